"""What a failed model's details say about its formula: the formula of each metric shown (and the baseline's where
it differs), and the edit that accepts a higher degree (docs/curve-budgets.md)."""

from __future__ import annotations

import re

from pytest_flopbudget.judge.verdict import Finding, FindingKind, Verdict
from pytest_flopbudget.metrics import METRICS

_DEGREE = re.compile(r"\(max-degree (\w+) = \d+\)")


def formula_lines(verdict: Verdict) -> list[str]:
    """`formula in seq, exact on seq in [16, 512]:` and one line per metric shown, nothing without a formula."""
    formula = verdict.measurement.formula
    if formula is None:
        return []
    base = verdict.baseline_formula
    lines = [f"formula in {', '.join(formula.dims)}, {formula.holds.describe()}:"]
    shown = [m for m in METRICS.growth if m in formula.totals and verdict.judges(m)]
    width = max((len(m.label) for m in shown), default=0)
    for metric in shown:
        now = formula.total(metric)
        line = f"  {metric.label:<{width}}  {now}"
        if base is not None and base.dims == formula.dims and base.total(metric) != now:
            line += f"  (baseline {base.total(metric)})"
        lines.append(line)
    return lines


def degree_edit(finding: Finding, start: str | None = None) -> str | None:
    """`set max-degree seq = 2 at pyproject.toml:8`, the edit that accepts a degree finding (None for another)."""
    match = _DEGREE.search(finding.message)
    if finding.kind != FindingKind.DEGREE or finding.actual is None or match is None or finding.source is None:
        return None
    where = finding.source.location(start)
    return f"set max-degree {match.group(1)} = {finding.actual}" + (f" at {where}" if where else "")
