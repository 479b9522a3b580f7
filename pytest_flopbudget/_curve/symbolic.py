"""A curve's formulas read off one symbolic count, where the backend has one (JAX), instead of interpolated.

A backend's optional `count_symbolic` counts the model once for every size of the dims: each figure (a layer's
metric, a total) is already an exact polynomial (`counting.symbolic.Symbolic`). This module turns those into the
curve's `Polynomial`s and proves them against the count at the entry's point, figure by figure, before they are
used: a symbolic trace that took another path than the point count (a model that tests a size for equality, a loop
whose trip count is a dim) differs there, and the curve interpolates point counts instead, saying why
(`Holds.fallback`). Either way the result is the same `Formula`, so every output reads it unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from pytest_flopbudget._counting.symbolic import NotPolynomial, Symbolic
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._report import Report


def polynomials(values: Mapping[Hashable, object], dims: Sequence[str]) -> dict[Hashable, Polynomial]:
    """Each figure of a symbolic count (an `int` or a `Symbolic` in `dims`) as a `Polynomial`; anything else (a
    float, a figure in other dims) raises `NotPolynomial`."""
    order = tuple(dims)
    found: dict[Hashable, Polynomial] = {}
    for key, value in values.items():
        if isinstance(value, Symbolic) and value.dims == order:
            found[key] = Polynomial(order, value.terms)
        elif isinstance(value, int) and not isinstance(value, bool):
            found[key] = Polynomial(order, {(0,) * len(order): value})
        else:
            raise NotPolynomial(f"a figure of the symbolic count is {type(value).__name__} {value!r:.60}")
    return found


def check(
    polys: Mapping[Hashable, Polynomial],
    counted: Mapping[Hashable, int],
    point: Mapping[str, int],
    symbolic: Report,
    at_point: Report,
) -> None:
    """Raise `NotPolynomial` naming the first figure whose polynomial misses the point count `counted` at `point`
    (and the ops only one of the two counts skipped, the usual cause); nothing when every figure agrees."""
    zero = Polynomial(tuple(point))
    for key in sorted(set(polys) | set(counted), key=str):
        expected = counted.get(key, 0)
        got = polys.get(key, zero).at(point)
        if got != expected:
            path, metric = key if isinstance(key, tuple) else (None, key)
            where = "the total" if path is None else f"layer {path}" if path else "the model's own ops"
            label = metric.label if isinstance(metric, Metric) else str(metric)
            at = ", ".join(f"{dim}={size}" for dim, size in point.items())
            raise NotPolynomial(
                f"it gives {label} {got} for {where} at {at}, the point count {expected}{_skips(symbolic, at_point)}"
            )


def _skips(symbolic: Report, at_point: Report) -> str:
    only = sorted(set(symbolic.skipped_ops) - set(at_point.skipped_ops))
    if not only:
        return ""
    named = "; ".join(f"{op}: {symbolic.skipped_ops[op].reason}" for op in only[:3])
    return f" (skipped in the symbolic trace only: {named})"
