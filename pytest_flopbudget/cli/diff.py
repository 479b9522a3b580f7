"""`flopbudget diff`: the per-layer change of every metric since the baseline, without judging."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from pytest_flopbudget.config.pyproject import ModelEntry, Settings
from pytest_flopbudget.judge.baseline import BaselineStore
from pytest_flopbudget.judge.diff import DIFF_METRICS
from pytest_flopbudget.judge.verdict import Verdict
from pytest_flopbudget.render.formatting import format_pair, format_percent, format_value, metric_title

from ..errors import BaselineError
from ..metrics import METRICS, Metric
from ..report import Report
from ..reporters import terminal
from ..run import EXIT_ERROR, EXIT_OK, Run
from .check import count_into
from .project import load_project, select_models


def run_diff(*, pyproject: str | None, names: Sequence[str], out: TextIO, err: TextIO) -> int:
    settings = load_project(pyproject)
    return diff_models(select_models(settings, names), settings, out, err)


def diff_models(entries: Sequence[ModelEntry], settings: Settings, out: TextIO, err: TextIO | None = None) -> int:
    """Print the per-layer change of every metric against the baseline; no budget is looked at."""
    store = BaselineStore(settings.baseline_dir)
    run = Run(store)
    count_into(run, entries, settings, err)
    blocks: list[str] = []
    status = EXIT_OK
    for measurement in run.measurements:
        shown = store.display(measurement.name)
        try:
            baseline = store.load(measurement.name)
        except BaselineError as exc:
            blocks.append(f"error: {exc}")
            status = EXIT_ERROR
            continue
        if baseline is None:
            blocks.append(
                f"error: {measurement.name}: no baseline yet ({shown}); "
                f"run `flopbudget check --update {measurement.name}` to create it"
            )
            status = EXIT_ERROR
            continue
        blocks.append(format_diff(Verdict(measurement, [], baseline, shown)))
    if run.errors:
        blocks.extend(f"error: {e.message}" for e in run.errors)
        status = EXIT_ERROR
    if blocks:
        out.write("\n\n".join(blocks) + "\n")
    return status


def format_diff(verdict: Verdict) -> str:
    """`resnet18: FLOPs 3.40G -> 3.64G (+7.1%), ...` then one per-layer table per metric that changed."""
    baseline = verdict.baseline
    assert baseline is not None
    shown = verdict.baseline_file
    changed = [m for m in DIFF_METRICS if (diff := verdict.diff(m)) is not None and diff.changes]
    if not changed:
        figures = ", ".join(_figure(verdict.report, m) for m in METRICS.counted)
        lines = [f"{verdict.name}: no change since {shown} ({figures})"]
    else:
        totals = ", ".join(_change(verdict, m) for m in DIFF_METRICS if m in changed or m.counted)
        lines = [f"{verdict.name}: {totals}"]
        for metric in changed:
            diff = verdict.diff(metric)
            assert diff is not None
            lines.append(f"{metric_title(metric)} per layer, against {shown}:")
            lines.extend(terminal.diff_table(diff))
    lines.extend(terminal._baseline_notes(verdict))  # the plugin's wording for a baseline counted differently
    return "\n".join(lines)


def _figure(report: Report, metric: Metric) -> str:
    return format_value(report.metric(metric), metric)


def _change(verdict: Verdict, metric: Metric) -> str:
    """`8.18 GFLOPs -> 8.52 GFLOPs (+4.2%)`, or `25.6M params (unchanged)`."""
    now, old = verdict.value(metric), verdict.baseline_value(metric) or 0
    if now == old:
        return f"{format_value(now, metric)} (unchanged)"
    shown_old, shown_now = format_pair(old, now, metric)
    return f"{shown_old} -> {shown_now} ({format_percent(now - old, old)})"
