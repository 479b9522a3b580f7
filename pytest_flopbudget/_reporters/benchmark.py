"""github-action-benchmark's `customSmallerIsBetter` JSON (`benchmark:PATH`): one entry per model and metric.

That action keeps every run's figures on a branch (`gh-pages` by default), draws one chart per entry name, and can
comment on or fail a commit whose figure grew past its alert threshold. It reads a JSON array of objects with
`name`, `unit` and a numeric `value`, and optionally `range` and `extra` (strings; `extra` is shown in the chart's
tooltip). Each entry is named `MODEL - METRIC` (`resnet - FLOPs`), the model name made one inert line; its
`extra` says the budget and the baseline. Counts are exact, so there is no `range`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._render.formatting import format_percent, format_value
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._reporters.trend import Figure, figures, named, unit


def benchmarks(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """The entries, models by name, each model's metrics in metric order."""
    entries = []
    for model, verdict in named(verdicts):
        for figure in figures(verdict):
            entry: dict[str, Any] = {
                "name": f"{model} - {figure.metric.label}",
                "unit": unit(figure.metric),
                "value": figure.value,
            }
            extra = _extra(figure)
            if extra:
                entry["extra"] = extra
            entries.append(entry)
    return entries


def write_benchmarks(verdicts: Sequence[Verdict], path: str | os.PathLike[str]) -> None:
    """Write the array to `path` atomically (parents created); `[]` when no model was counted."""
    write_atomic(Path(path), json.dumps(benchmarks(verdicts), indent=2, ensure_ascii=False) + "\n")


def _extra(figure: Figure) -> str:
    """The tooltip: the budget (and whether the figure is over it) and the baseline with the change against it."""
    lines = []
    if figure.limit is not None:
        over = " (over budget)" if figure.over else ""
        lines.append(f"budget {format_value(figure.limit, figure.metric)}{over}")
    if figure.baseline is not None:
        change = format_percent(figure.value - figure.baseline, figure.baseline)
        lines.append(f"baseline {format_value(figure.baseline, figure.metric)} ({change})")
    return "\n".join(lines)


class BenchmarkOutput:
    """`benchmark:PATH`: github-action-benchmark's `customSmallerIsBetter` JSON."""

    workspace_variables = ("GITHUB_WORKSPACE",)

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_benchmarks(findings.result.verdicts, path)
