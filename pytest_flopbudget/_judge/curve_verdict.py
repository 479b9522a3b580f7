"""The budgets on the curve judged on a model's formula: `max-degree`, ceilings at points (`at`), and which terms
changed since the baseline's formula.

A degree over its budget names the term and the layers that carry it (`FLOPs grow as seq**2 (max-degree seq =
1): seq**2 term 280*seq**2 from h.{0..1}.attn`). A budget on the curve that the formula cannot answer fails,
never passes silently: no formula at all (a point count), a metric whose formula is not exact (a peak), a
piecewise cost (a model that branches on a size), or a point where the formula does not hold. See
docs/curve-budgets.md.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil

from pytest_flopbudget._config.budget import Budget, DegreeLimit, PointLimits
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._judge.formula_diff import grouped_labels, term_changes
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._render.formatting import format_pair, format_percent

#: The most groups of layers a degree finding names, and the most changed terms a formula finding lists.
SHOWN = 3


def degree_problem(limit: DegreeLimit, formula: Formula) -> str | None:
    """Why `formula` breaks `limit` (`FLOPs grow as seq**2 (max-degree seq = 1): seq**2 term ... from ...`),
    None when it keeps it (a dim the formula is not in does not grow it)."""
    total = formula.total(limit.metric)
    if limit.dim not in formula.dims or total.degree(limit.dim) <= limit.degree:
        return None
    degree = total.degree(limit.dim)
    top = total.above(limit.dim, degree - 1)  # the terms of the highest power: what grows fastest
    monomial = f"{limit.dim}**{degree}" if degree > 1 else limit.dim
    text = f"{limit.metric.label} grow as {monomial} (max-degree {limit.dim} = {limit.degree}): {monomial} term {top}"
    labels = grouped_labels(formula.layers_above(limit.metric, limit.dim, limit.degree))
    if labels:
        more = f" (+{len(labels) - SHOWN} more)" if len(labels) > SHOWN else ""
        text += f" from {', '.join(labels[:SHOWN])}{more}"
    return text


def not_exact(metric: Metric, formula: Formula) -> str | None:
    """Why `metric`'s formula cannot answer a budget on the curve, None when it is exact on the whole range."""
    holds = formula.holds
    if metric not in formula.totals:
        return f"{metric.label}: no formula for this model (not measured)"
    if holds.piecewise or metric in holds.inexact:
        return f"{metric.label}: the formula is not exact on the curve ({holds.describe()})"
    return None


def point_value(metric: Metric, point: dict[str, int], formula: Formula) -> tuple[int | None, str]:
    """`metric` at `point` from the formula (rounded up where it is not whole), or None and why it does not hold
    there."""
    holds = formula.holds
    for dim, size in point.items():
        low, high = holds.ranges.get(dim, (size, size))
        step = holds.step.get(dim, 1)
        if not low <= size <= high or size % step:
            return None, f"the formula does not hold there ({holds.describe()})"
    value: Fraction = formula.total(metric).at(point)
    return ceil(value), ""


def at_problems(limits: PointLimits, formula: Formula) -> list[tuple[Metric, str, int | None, int, Location]]:
    """(metric, why, figure, ceiling, where) for each ceiling of `limits` the formula breaks or cannot answer."""
    point = {**formula.point, **limits.point}
    point = {dim: point[dim] for dim in formula.dims if dim in point}
    shown = ", ".join(f"{dim}={size}" for dim, size in limits.point.items())
    found: list[tuple[Metric, str, int | None, int, Location]] = []
    for metric, limit in limits.limits.items():
        why = not_exact(metric, formula)
        now = None
        if why is None and len(point) < len(formula.dims):
            why = f"the point names no size for {', '.join(d for d in formula.dims if d not in point)}"
        if why is None:
            now, why = point_value(metric, point, formula)
        if why:
            found.append(
                (
                    metric,
                    f"at {shown}: {why}, so the ceiling {limit.text} cannot be checked",
                    None,
                    limit.value,
                    limit.source,
                )
            )
        elif now is not None and now > limit.value:
            shown_now, shown_limit = format_pair(now, limit.value, metric)
            excess = f" ({format_percent(now - limit.value, limit.value)})" if limit.value else ""
            message = f"{metric.label} at {shown}: {shown_now} > budget {shown_limit}{excess}"
            found.append((metric, message, now, limit.value, limit.source))
    return found


def formula_changes(baseline: Formula, now: Formula, budget: Budget) -> list[tuple[Metric, str]]:
    """(metric, `FLOPs formula changed: seq**2 term of h.{0..1}.attn +100%`) for each metric shown without a
    budget of its own, and each optional one the budget sets, whose formula's terms changed."""
    found = []
    for metric in METRICS.growth:
        if metric.optional and budget.limit(metric) is None:
            continue
        if baseline.dims != now.dims:
            if metric == next(iter(METRICS.growth)):
                found.append((metric, f"formula dims changed: {', '.join(baseline.dims)} -> {', '.join(now.dims)}"))
            continue
        # the terms that grow with the dims: a constant term's change is the point count's, shown already
        changes = [change for change in term_changes(baseline, now, metric) if change.degree > 0]
        if changes:
            more = f" (+{len(changes) - SHOWN} more)" if len(changes) > SHOWN else ""
            found.append((metric, f"{metric.label} formula changed: {'; '.join(map(str, changes[:SHOWN]))}{more}"))
    return found
