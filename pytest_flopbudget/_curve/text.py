"""A `Formula` as the lines `flopbudget count` prints under the layer table: every metric's total, where the
formulas hold, and each layer's formula of one metric at the table's depth (inclusive of its children, as the
table's rows are)."""

from __future__ import annotations

from pytest_flopbudget._curve.decode_step import CONTEXT, DecodeFormula
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._metrics import FLOPS, METRICS, Metric
from pytest_flopbudget._report import ROOT, truncate_path

ROOT_LABEL = "(model)"
#: In place of a metric's polynomial where the fit missed a count: a peak that is a maximum, a sort's n*ceil(log2 n).
NOT_EXACT = "not exact (no polynomial of its counts holds on the range: no formula)"


def formula_text(formula: Formula, depth: int | None = 2, metric: Metric = FLOPS) -> str:
    """`Formula in seq: exact on seq in [64, 8192] (9 counts, 6 off the fit)`, the totals, then the layers."""
    lines = [f"Formula in {', '.join(formula.dims)}: {formula.holds.describe()} ({method(formula)})"]
    holds = formula.holds
    width = max(len(m.label) for m in formula.totals) if formula.totals else 0
    for total_metric, poly in formula.totals.items():
        shown = NOT_EXACT if total_metric in holds.inexact else str(poly)
        lines.append(f"  {total_metric.label:<{width}}  {shown}")
    if metric in holds.inexact:  # a fit that missed a count is no formula to read per layer either
        lines.append(f"{metric.label} per layer: {NOT_EXACT}")
        return "\n".join(lines)
    rows = _rows(formula, depth, metric)
    if rows:
        lines.append(f"{metric.label} per layer:")
        label_width = max(len(label) for label, _ in rows)
        lines += [f"  {label:<{label_width}}  {poly}" for label, poly in rows]
    return "\n".join(lines)


def method(formula: Formula) -> str:
    """How the formulas were found: `one symbolic trace, checked against 1 point count`, or `8 counts, 5 checked
    off the fit` (and why a backend's symbolic trace was not used, where it has one)."""
    holds = formula.holds
    if holds.symbolic:
        return f"one symbolic trace, checked against {holds.verified} point count{'s' if holds.verified != 1 else ''}"
    text = f"{holds.samples} counts, {holds.verified} checked off the fit"
    return f"{text}; no symbolic trace: {holds.fallback}" if holds.fallback else text


def decode_formula_text(decode: DecodeFormula) -> str:
    """The lines under a generation's phases: what `context` is and where the formulas hold, then one line per
    metric, `MACs per decode step = 8192*context + 6476005376`, or why that metric has none (one line when no
    metric has one, for the same reason)."""
    reasons = set(decode.missing.values())
    if not decode.formulas and len(reasons) == 1:
        return f"decode step formulas: none, {reasons.pop()}"
    prompt = "" if decode.prompt is None else f" (prompt {decode.prompt} + k - 1)"
    lines = [
        f"decode step formulas in {CONTEXT} = the tokens in the cache when decode k runs{prompt}, {decode.describe()}:"
    ]
    metrics = [metric for metric in METRICS.per_op if metric in decode.formulas or metric in decode.missing]
    labels = {metric: f"{metric.label} per decode step" for metric in metrics}
    width = max(len(label) for label in labels.values()) if labels else 0
    for metric, label in labels.items():
        if metric in decode.formulas:
            off = decode.last_off.get(metric, 0)
            more = "more" if off > 0 else "less"
            last = f"; the last step (decode {decode.steps}) {abs(off):,} {more}" if off else ""
            lines.append(f"  {label:<{width}} = {decode.formulas[metric]}{last}")
        else:
            lines.append(f"  {label:<{width}}: no formula, {decode.missing[metric]}")
    return "\n".join(lines)


def _rows(formula: Formula, depth: int | None, metric: Metric) -> list[tuple[str, Polynomial]]:
    """The layers at `depth` whose formula (with their children's) is not zero, in the order they ran."""
    paths: dict[str, None] = {}
    for path in formula.layers:
        if path == ROOT:
            continue
        shown = path if depth is None else truncate_path(path, depth)
        if shown != ROOT:
            paths.setdefault(shown)
    rows = [(path, formula.inclusive(path, metric)) for path in paths]
    return [(path, poly) for path, poly in rows if poly.terms]
