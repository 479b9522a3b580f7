"""Bencher Metric Format JSON (`bencher:PATH`): what `bencher run --adapter json --file PATH` uploads.

BMF is an object keyed by benchmark name, each holding an object keyed by measure slug, each holding a metric:
`{"value": n}`, optionally with `lower_value` and `upper_value`. Here a benchmark is a model (its name made one
inert line), a measure is a metric under its own name (`flops`, `macs`, `params`, `skipped`, `bytes`,
`param-bytes`, `peak-memory`: Bencher creates a measure the first time a slug is used), and `upper_value` is the
model's ceiling where its budget sets one, so Bencher draws the budget beside the figure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._reporters.trend import figures, named


def bencher_metrics(verdicts: Sequence[Verdict]) -> dict[str, dict[str, dict[str, int]]]:
    """The BMF object: models by name, each model's metrics in metric order."""
    document: dict[str, dict[str, dict[str, int]]] = {}
    for model, verdict in named(verdicts):
        measures: dict[str, dict[str, int]] = {}
        for figure in figures(verdict):
            metric: dict[str, int] = {"value": figure.value}
            if figure.limit is not None:
                metric["upper_value"] = figure.limit
            measures[str(figure.metric)] = metric
        document[model] = measures
    return document


def write_bencher(verdicts: Sequence[Verdict], path: str | os.PathLike[str]) -> None:
    """Write the object to `path` atomically (parents created); `{}` when no model was counted."""
    write_atomic(Path(path), json.dumps(bencher_metrics(verdicts), indent=2, ensure_ascii=False) + "\n")


class BencherOutput:
    """`bencher:PATH`: Bencher Metric Format JSON, one benchmark per model, one measure per metric."""

    workspace_variables = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_bencher(findings.result.verdicts, path)
