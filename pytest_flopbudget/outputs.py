"""What a `--report KIND:PATH` output from outside this package implements, and the run-result types it reads.

A package adds an output by naming an object implementing `Output` (or a class whose instances do, made with no
arguments) in the `pytest_flopbudget.outputs` entry-point group; the entry point's name is the KIND. Both front
ends then write it: `flopbudget check --report KIND:PATH` and `pytest --flopbudget-report=KIND:PATH`
(docs/architecture.md, "Outputs").

    # pyproject.toml of the output's package
    [project.entry-points."pytest_flopbudget.outputs"]
    csv = "flopbudget_csv:CsvOutput"

    # flopbudget_csv.py
    from pytest_flopbudget.outputs import Findings, OutputContext

    class CsvOutput:
        workspace_variables = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")

        def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
            rows = [f"{v.name},{v.report.flops},{v.passed}" for v in findings.result.verdicts]
            with open(path, "w", encoding="utf-8") as file:
                file.write("".join(row + "\\n" for row in rows))

`write` is called once per run, after every model was judged, on the process that writes the run's outputs (the
xdist controller under pytest); an `OSError` it raises becomes one `flopbudget: error:` line, as for the built-in
outputs, and so does any other exception (it costs that output only).
"""

from __future__ import annotations

from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.verdict import Finding, Verdict
from pytest_flopbudget._reporters.annotations import Annotation
from pytest_flopbudget._reporters.output import Findings, Output, OutputContext, SupportsWrite
from pytest_flopbudget._run import RunResult, Unchecked

__all__ = [
    "Annotation",
    "BudgetChange",
    "Finding",
    "Findings",
    "Output",
    "OutputContext",
    "RunResult",
    "SupportsWrite",
    "Unchecked",
    "Verdict",
]
