"""The figure a phase budget is held to: a generation's prefill, mean or last decode step, a training step's
forward or backward, read from a Report (None when the report has no such phase)."""

from __future__ import annotations

from fractions import Fraction

from pytest_flopbudget.metrics import Metric
from pytest_flopbudget.report import Report


def phase_figure(report: Report, phase: str, metric: Metric) -> Fraction | None:
    """One metric of one budgeted phase, exact (the mean decode step is a fraction); None when absent."""
    steps = report.phases[1:]
    if phase == "prefill" and report.phases:
        return Fraction(report.phases[0].get(metric))
    if phase == "decode-mean" and steps:
        return Fraction(sum(step.get(metric) for step in steps), len(steps))
    if phase == "decode-last" and steps:
        return Fraction(steps[-1].get(metric))
    if phase in ("forward", "backward") and report.training:
        return Fraction((report.forward if phase == "forward" else report.backward).get(metric))
    return None
