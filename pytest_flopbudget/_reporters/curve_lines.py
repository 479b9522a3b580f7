"""What the outputs say about a model's formula: a failed model's details show the formula of each metric (and the
baseline's where it differs); the job summary shows the base and head curves of every model whose formula changed,
as figures along the range (docs/curve-budgets.md)."""

from __future__ import annotations

from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._render.formatting import format_percent, format_value

#: At most this many sizes along the first dim in a summary's curve table: the range's ends and powers of two between.
CURVE_POINTS = 6


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


def changed_curves(verdict: Verdict) -> list[Metric]:
    """The metrics shown for the model whose formula differs from its baseline's (same dims); none without both."""
    formula, base = verdict.measurement.formula, verdict.baseline_formula
    if formula is None or base is None or base.dims != formula.dims:
        return []
    return [
        m for m in METRICS.growth if m in formula.totals and verdict.judges(m) and base.total(m) != formula.total(m)
    ]


def curve_table(verdict: Verdict) -> list[str]:
    """Markdown rows comparing base and head along the first dim (the other dims at the model's point): what a
    picture of the two curves would show, in a form a job summary and a pull-request comment both render. Sizes
    run from the range's low end to its high end by powers of two (a formula that holds only at multiples of a
    step is read at multiples of it). Empty unless the formula changed."""
    metrics = changed_curves(verdict)
    formula, base = verdict.measurement.formula, verdict.baseline_formula
    if not metrics or formula is None or base is None:
        return []
    dim = formula.dims[0]
    low, high = formula.holds.ranges.get(dim, (formula.point.get(dim, 1),) * 2)
    step = formula.holds.step.get(dim, 1)
    sizes = _sizes(low, high, step)
    fixed = {name: size for name, size in formula.point.items() if name != dim}
    header = [dim, *(f"{m.label} base \u2192 now" for m in metrics)]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size in sizes:
        point = {**fixed, dim: size}
        cells = [str(size)]
        for metric in metrics:
            was, now = int(base.total(metric).at(point)), int(formula.total(metric).at(point))
            change = f" ({format_percent(now - was, was)})" if was != now else ""
            cells.append(f"{format_value(was, metric)} \u2192 {format_value(now, metric)}{change}")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _sizes(low: int, high: int, step: int) -> list[int]:
    """`low`, the multiples of `step` at powers of two strictly between, `high`; at most `CURVE_POINTS`."""
    sizes = [low]
    size = 1
    while size <= low:
        size *= 2
    while size < high:
        if size % step == 0:
            sizes.append(size)
        size *= 2
    if high != low:
        sizes.append(high)
    if len(sizes) > CURVE_POINTS:  # keep the ends, thin the middle evenly
        middle = sizes[1:-1]
        keep = CURVE_POINTS - 2
        sizes = [sizes[0], *(middle[round(i * (len(middle) - 1) / (keep - 1))] for i in range(keep)), sizes[-1]]
    return sizes
