"""Growth per budgeted phase: `max-increase` applied to each phase a budget names, where the baseline has it.

A generation's total is mostly its prefill, so a mean decode step that grows 30% moves the total by 2% and slips
under a `max-increase` on the total; judged phase by phase, the phase names itself
(`decode mean per token +30.0% > max-increase 10%`). Only the phases and metrics a budget sets in `phases` are
judged, and only where the baseline counted that phase (a baseline from before `generate = N` has none). The
verdict (judge/verdict.py) turns each `PhaseGrowth` into an `increase` finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.phase_budget import PHASES
from pytest_flopbudget._judge.phase_figures import phase_figure
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import format_pair, format_percent
from pytest_flopbudget._report import Report


@dataclass(frozen=True)
class PhaseGrowth:
    """One phase's metric grown past max-increase: figures rounded up (a mean decode step is a fraction)."""

    message: str
    metric: Metric
    now: int
    allowed: int
    baseline: int
    source: Location


def phase_growth(report: Report, baseline: Report | None, budget: Budget) -> list[PhaseGrowth]:
    """Each budgeted phase's metric grown more than `max-increase` over the baseline's phase."""
    increase = budget.max_increase
    if baseline is None or increase is None:
        return []
    grown: list[PhaseGrowth] = []
    for phase, limits in budget.phases.items():
        for metric in limits:
            if not (report.measures(metric) and baseline.measures(metric)):
                continue
            old, now = phase_figure(baseline, phase, metric), phase_figure(report, phase, metric)
            if old is None or now is None or increase.allows(old, now):  # type: ignore[arg-type]
                continue
            shown_now, shown_old = format_pair(math.ceil(now), math.ceil(old), metric)
            growth = format_percent(now - old, old) if old else "new"  # type: ignore[arg-type]
            message = f"{PHASES[phase]} {growth} > max-increase {increase.text} ({shown_now}, baseline {shown_old})"
            allowed = int(old + old * Fraction(increase.fraction))
            grown.append(PhaseGrowth(message, metric, math.ceil(now), allowed, math.ceil(old), increase.source))
    return grown
