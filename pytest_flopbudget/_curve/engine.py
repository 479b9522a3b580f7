"""A configured model's cost as a formula of its named dims: point counts through its backend, fitted exactly.

Any backend counts: each point is the entry at other sizes of its dims (`ModelEntry.at`), counted as
`backends.count_entry` counts a point budget (`entry_counter` loads the model once), so the formula and the point
counts can never disagree on how a model is counted. See `fit.py` for how the points are chosen and checked, and
docs/curves.md. A backend that counts every size in one symbolic trace (JAX) gives the formulas directly, proven
against the count at the entry's point (`symbolic.py`); where it cannot, the points are interpolated as for any.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Optional, cast

from pytest_flopbudget._backends import entry_counter
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._counting.symbolic import NotPolynomial, PointsOnly
from pytest_flopbudget._curve.fit import Fit, FitError, Point, fit
from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._curve.symbolic import check, polynomials
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import DERIVED, METRICS, Metric
from pytest_flopbudget._report import Report

#: The series key of a model's total of a metric (a layer's is its path).
TOTAL = None
#: What a formula is fitted to: (a layer's path, or TOTAL; a metric).
SeriesKey = tuple[Optional[str], Metric]


def count_point(count_at: Callable[[ModelEntry], Report], entry: ModelEntry, values: dict[str, int]) -> Report:
    """`entry` counted at one point of its range (`values`: a size per dim); a count that fails there says where."""
    try:
        return count_at(entry.at(values))
    except CountingError as exc:
        at = ", ".join(f"{dim}={size}" for dim, size in values.items())
        raise CountingError(f"at {at}: {exc}") from None


def count_curve(entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
    """The count at the entry's point (`entry.dims`) and every metric's formula over `entry.curve`.

    The formulas come from one symbolic count where the backend has one and it agrees with the point count
    (`curve/symbolic.py`), else from interpolating point counts (`fit.py`), with the reason the symbolic count was
    not used in `Holds.fallback`. Raises `CountingError` when a count fails (naming the sizes it was counted at) or
    no formula is found.
    """
    dims = tuple(entry.curve)
    if not dims:
        raise CountingError(
            f"{entry.source.where()}: no curve: give the range of a dim, e.g. curve = {{ seq = [64, 8192] }}"
        )
    reports: dict[Point, Report] = {}
    count_at = entry_counter(entry, root)

    def sample(point: Point) -> dict[Hashable, int]:
        if point in reports:  # the entry's point, counted first
            return series(reports[point])
        report = count_point(count_at, entry, dict(zip(dims, point)))
        reports[point] = report
        return series(report)

    point = tuple(entry.dims[dim] for dim in dims)
    sample(point)
    report = reports[point]
    try:
        found = _symbolic(count_at.symbolic(entry, dims), reports, sample, entry, dims)
    except PointsOnly:  # the backend has no symbolic count: nothing was tried
        found = _lattice(sample, entry, dims)
    except (NotPolynomial, TypeError, ValueError, ArithmeticError) as exc:
        found = _lattice(sample, entry, dims)
        found.fallback = " ".join(str(exc).split())[:300] or type(exc).__name__
    totals: dict[Metric, Polynomial] = {}
    layers: dict[str, dict[Metric, Polynomial]] = {}
    for key, poly in sorted(found.polys.items(), key=lambda item: str(item[0])):
        path, metric = cast(SeriesKey, key)
        if path is TOTAL:
            totals[metric] = poly
        elif poly.terms:
            layers.setdefault(path, {})[metric] = poly
    order = {path: i for i, path in enumerate(report.layers)}  # the count's order: the model's, as the table's
    layers = dict(sorted(layers.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
    measured = {metric for metric in METRICS if report.measures(metric)}
    totals = {metric: totals.get(metric, Polynomial(dims)) for metric in METRICS if metric in measured}
    holds = Holds(
        step=found.step,
        ranges=found.ranges,
        piecewise=found.piecewise,
        broken_at=found.broken_at,
        inexact=tuple(m for m in METRICS if any(cast(SeriesKey, key)[1] == m for key in found.failing)),
        samples=found.samples,
        verified=found.verified,
        symbolic=found.symbolic,
        fallback=found.fallback,
    )
    formula = Formula(dims, totals, layers, holds, point=dict(entry.dims), ranges=dict(entry.curve))
    return report, formula


def _lattice(sample: Callable[[Point], dict[Hashable, int]], entry: ModelEntry, dims: tuple[str, ...]) -> Fit:
    try:
        return fit(sample, dims, [entry.curve[dim] for dim in dims], core=_core)
    except FitError as exc:
        raise CountingError(f"{entry.source.where()}: {exc}") from None


def _symbolic(
    symbolic: Report,
    reports: dict[Point, Report],
    sample: Callable[[Point], dict[Hashable, int]],
    entry: ModelEntry,
    dims: tuple[str, ...],
) -> Fit:
    """The fit a symbolic count gives: every figure's polynomial, holding at every size of the range, proven at
    the entry's point (counted already) and, where a range starts at 1, at the low corner: jax answers `size == 1`
    with False for a symbolic size, so the symbolic trace is the general one, and jax's size-1 special cases
    (a gradient's sum over a broadcast axis of size 1 is no op) would show there. A dim constrained to a range
    above 1 decides `size == 1` soundly. Raises `NotPolynomial` where a figure misses.

    A metric the point count measures and the symbolic count could not (a peak of live bytes reached at different
    ops at different sizes: no one polynomial) is not exact on the curve (`failing`), as the lattice reports a
    peak it cannot fit; the other figures keep their proven polynomials."""
    polys = polynomials(series(symbolic), dims)
    points = [tuple(entry.dims[dim] for dim in dims)]
    at_entry = reports[points[0]]
    unmeasured = {metric for metric in METRICS if at_entry.measures(metric) and not symbolic.measures(metric)}
    if any(entry.curve[dim][0] == 1 for dim in dims):  # size 1: where jax's general path and a point's part
        points.append(tuple(entry.curve[dim][0] for dim in dims))
    points = list(dict.fromkeys(points))
    for point in points:
        try:
            counted = sample(point)
        except CountingError as exc:
            raise NotPolynomial(f"the count to check it failed ({exc})") from None
        proven = {key: value for key, value in counted.items() if cast(SeriesKey, key)[1] not in unmeasured}
        check(polys, proven, dict(zip(dims, point)), symbolic, reports[point])
    return Fit(
        polys=dict(polys),
        step={dim: 1 for dim in dims},
        ranges={dim: entry.curve[dim] for dim in dims},
        piecewise=False,
        broken_at=None,
        failing={key for key in series(at_entry) if cast(SeriesKey, key)[1] in unmeasured},
        samples=len(points),
        verified=len(points),
        symbolic=True,
    )


def series(report: Report) -> dict[Hashable, int]:
    """Every figure of `report` a formula is fitted to: each layer's own counted metrics, and each total."""
    values: dict[Hashable, int] = {}  # keyed by SeriesKey
    counted = [metric for metric in METRICS.counted if report.measures(metric)]
    for path, cost in report.layers.items():
        for metric in counted:
            amount = cost.get(metric)
            if amount:
                values[(path, metric)] = amount
    for metric in METRICS:
        if report.measures(metric):
            values[(TOTAL, metric)] = metric.of_report(report)
    return values


def _core(key: Hashable) -> bool:
    """Sums of per-op and per-layer figures decide the lattice; a derived figure (a peak) is checked, not trusted."""
    return cast(SeriesKey, key)[1].scope != DERIVED
