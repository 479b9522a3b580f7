"""The phases of a count against its baseline's: a generation's prefill, first and last decode step and mean
decode step per token, a training step's forward and backward, each as baseline, now and change.

A total that barely moved can hide a generated token that got 30% costlier; this table, under a failure's
per-layer diff and in `flopbudget diff`, says which phase moved. It is shown only when some phase did, and only
for phases both counts have (a baseline from before `generate = N` has no decode steps to compare).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import format_count, format_percent, metric_title
from pytest_flopbudget._render.phase_table import DECODE_MEAN, decode_mean
from pytest_flopbudget._report import Report


def phase_figures(report: Report, metric: Metric) -> dict[str, Fraction]:
    """The phases a budget names (and the first decode step), by how outputs name them; empty for a count
    without phases."""
    if report.phases:
        figures = {"prefill": Fraction(report.phases[0].get(metric))}
        steps = report.phases[1:]
        if steps:
            figures["first decode step"] = Fraction(steps[0].get(metric))
            figures["last decode step"] = Fraction(steps[-1].get(metric))
            figures[DECODE_MEAN] = decode_mean(report, metric)
        return figures
    if report.training:
        return {"forward": Fraction(report.forward.get(metric)), "backward": Fraction(report.backward.get(metric))}
    return {}


def phase_diff(baseline: Report, report: Report, metric: Metric, against: str) -> list[str]:
    """`FLOPs per phase, against X:` then `phase | baseline | now | delta` rows; nothing when no phase moved."""
    if not (baseline.measures(metric) and report.measures(metric)):
        return []
    old, now = phase_figures(baseline, metric), phase_figures(report, metric)
    shared = [name for name in now if name in old]
    if all(old[name] == now[name] for name in shared):
        return []
    rows = [("phase", "baseline", "now", "delta")]
    for name in shared:
        delta = now[name] - old[name]
        sign = "+" if delta > 0 else ""
        change = f"{sign}{_count(delta, metric)} ({format_percent(delta, old[name])})"  # type: ignore[arg-type]
        rows.append((name, _count(old[name], metric), _count(now[name], metric), change))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{metric_title(metric)} per phase, against {against}:"]
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(cell.rjust(widths[i]) for i, cell in enumerate(row) if i)]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return lines


def phase_diffs(baseline: Report, report: Report, metrics: Sequence[Metric], against: str) -> list[str]:
    """`phase_diff` for each metric that moved in some phase."""
    return [line for metric in metrics for line in phase_diff(baseline, report, metric, against)]


def _count(value: Fraction, metric: Metric) -> str:
    return format_count(float(value), prefixes=metric.prefixes)
