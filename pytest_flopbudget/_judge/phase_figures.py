"""The figure a phase budget is held to: a generation's prefill, mean or last decode step, a training step's
forward or backward, read from a Report (None when the report has no such phase)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._report import Report

if TYPE_CHECKING:
    from pytest_flopbudget._config.budget import Budget


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


def phase_usages(report: Report, budget: Budget) -> list[tuple[str, float]]:
    """Share of each phase ceiling used (`decode-mean flops`, 1.0 = at the limit), for the check's "budget use"
    column: a phase close to its ceiling is the budget nearest to failing even when the total has no ceiling."""
    used: list[tuple[str, float]] = []
    for phase, limits in budget.phases.items():
        for metric, limit in limits.items():
            figure = phase_figure(report, phase, metric)
            if figure is None or not report.measures(metric):
                continue
            share = (0.0 if figure == 0 else float("inf")) if limit.value == 0 else float(figure / limit.value)
            used.append((f"{phase} {metric}", share))
    return used
