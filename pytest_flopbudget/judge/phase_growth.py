"""Growth per budgeted phase: `max-increase` applied to each phase a budget names, where the baseline has it.

A generation's total is mostly its prefill, so a mean decode step that grows 30% moves the total by 2% and slips
under a `max-increase` on the total; judged phase by phase, the phase names itself
(`decode mean per token +30.0% > max-increase 10%`). Only the phases and metrics a budget sets in `phases` are
judged, and only where the baseline counted that phase (a baseline from before `generate = N` has none).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from pytest_flopbudget.config.budget import Budget
from pytest_flopbudget.config.phase_budget import PHASES
from pytest_flopbudget.judge.phase_figures import phase_figure
from pytest_flopbudget.render.formatting import format_pair, format_percent
from pytest_flopbudget.report import Report

if TYPE_CHECKING:
    from pytest_flopbudget.judge.verdict import Finding


def phase_growth_findings(report: Report, baseline: Report | None, budget: Budget) -> list[Finding]:
    """An error for each budgeted phase's metric grown more than `max-increase` over the baseline's phase."""
    from pytest_flopbudget.judge.verdict import ERROR, Finding, FindingKind

    increase = budget.max_increase
    if baseline is None or increase is None:
        return []
    findings: list[Finding] = []
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
            findings.append(
                Finding(
                    ERROR, FindingKind.INCREASE, message, metric, actual=math.ceil(now), limit=allowed,
                    baseline=math.ceil(old), source=increase.source,
                )
            )  # fmt: skip
    return findings
