"""The phases under a generation's layer table: the prefill, the first and the last decode step, and the mean
decode step per generated token, each with every per-op metric the count measured (and its peak memory).

A generation of 256 tokens has 256 phases; the table shows the four rows a budget names (the JSON has them all).
"""

from __future__ import annotations

from fractions import Fraction

from pytest_flopbudget._metrics import METRICS, PEAK_MEMORY, Metric
from pytest_flopbudget._render.formatting import format_count, format_figure, metric_title
from pytest_flopbudget._report import Phase, Report

#: The label of the mean decode step.
DECODE_MEAN = "decode mean per token"


def decode_mean(report: Report, metric: Metric) -> Fraction:
    """One metric of the mean decode step (exact: the sum over the decode steps over their number); 0 without any."""
    steps = report.phases[1:]
    return Fraction(sum(phase.get(metric) for phase in steps), len(steps)) if steps else Fraction(0)


def format_phases(report: Report) -> list[str]:
    """The rows of a generation's phases; nothing for any other count (its text is unchanged)."""
    if not report.phases:
        return []
    metrics = [
        metric
        for metric in METRICS.per_op
        if report.measures(metric) and not (metric.omit_zero and not any(p.get(metric) for p in report.phases))
    ]  # integer ops only where some phase has some, as everywhere else
    peaks = PEAK_MEMORY in report.optional_metrics
    steps = report.phases[1:]
    rows: list[tuple[str, list[str]]] = [("prefill", _figures(report.phases[0], metrics, peaks))]
    if steps:
        rows.append((f"{steps[0].name} (first)", _figures(steps[0], metrics, peaks)))
        if len(steps) > 1:
            rows.append((f"{steps[-1].name} (last)", _figures(steps[-1], metrics, peaks)))
        mean = [format_count(float(decode_mean(report, metric)), prefixes=metric.prefixes) for metric in metrics]
        rows.append((DECODE_MEAN, mean + (["-"] if peaks else [])))
    titles = [metric_title(metric) for metric in metrics] + (["peak memory"] if peaks else [])
    width = max(len(label) for label, _ in rows)
    label = f"phases ({report.generated} tokens generated)"
    width = max(width, len(label))
    header = f"{label:<{width}}" + "".join(f"  {title:>11}" for title in titles)
    lines = ["", header, "-" * len(header)]
    lines += [f"{name:<{width}}" + "".join(f"  {cell:>11}" for cell in cells) for name, cells in rows]
    return lines


def _figures(phase: Phase, metrics: list[Metric], peaks: bool) -> list[str]:
    cells = [format_figure(phase.get(metric), metric) for metric in metrics]
    if peaks:
        cells.append("-" if phase.peak_memory is None else format_figure(phase.peak_memory, PEAK_MEMORY))
    return cells
