"""Budgets on the curve: `max-degree = { seq = 1 }` and ceilings at points of it (`at = [{ seq = 8192, flops =
"2T" }]`), read from a pyproject model table or a `flop_budget` marker's `max_degree=` and `at=` arguments.

Both are judged on the model's formula (`judge/curve_verdict.py`), so both need the model's `curve`; every problem
is collected with the place it was written, like the other budget keys (docs/curve-budgets.md).

`max-degree` maps a dim to the highest power of it a formula may have. A number caps every metric that is not
optional (FLOPs, MACs, params); a metric's own table caps that metric instead (`max-degree = { seq = 1,
peak-memory = { seq = 1 } }`), the way an optional metric (bytes, peak memory) is judged only where a budget names
it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_flopbudget._config.budget import DegreeLimit, Limit, PointLimits, parse_quantity, shown
from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._metrics import METRICS, SKIPPED, Metric

#: Where a key below the budget's own key was written (`("seq",)` -> `...max-degree.seq`, line 12).
Locate = Callable[[tuple[str | int, ...]], Location]

#: A dim's name where the curve is not known yet (as `pyproject.DIM_NAME`, which this module sits below).
DIM_NAME = re.compile(r"[A-Za-z_]\w*")

#: The largest size of a dim at a point where the curve is not known yet (a marker's `at`).
MAX_SIZE = 2**40

#: The highest degree a budget may allow: a cost polynomial of higher degree is no model anyone runs.
MAX_DEGREE = 16

DEGREE_GRAMMAR = (
    "a table of dim = highest power, such as { seq = 1 }, or of metric = such a table, such as "
    "{ peak-memory = { seq = 1 } }"
)
AT_GRAMMAR = 'a list of tables of dim = size and budgets, such as [{ seq = 8192, flops = "2T" }]'


def default_degree_metrics() -> tuple[Metric, ...]:
    """What `max-degree = { seq = 1 }` caps: every growth metric the outputs show without a budget of its own."""
    return tuple(metric for metric in METRICS.growth if not metric.optional)


def at_metrics() -> tuple[Metric, ...]:
    """The metrics a ceiling at a point can set: every one with a figure that grows with the dims."""
    return tuple(metric for metric in METRICS if metric != SKIPPED)


def parse_max_degree(
    value: Any, locate: Locate, curve: Mapping[str, tuple[int, int]] | None, what: str = "curve"
) -> tuple[DegreeLimit, ...]:
    """`{ seq = 1 }` or `{ flops = { seq = 1 } }` -> one `DegreeLimit` per metric and dim; raises `LocatedError`
    with every problem. `curve` is the model's range (a dim it lacks cannot be judged), None where it is not
    known yet (a marker: any dim named as an identifier); `what` names it."""
    problems: list[Problem] = []
    limits: dict[tuple[Metric, str], DegreeLimit] = {}
    if not isinstance(value, Mapping) or not value:
        raise LocatedError([Problem(locate(()), f"expected {DEGREE_GRAMMAR}, got {shown(value)}")])

    def degree(dims: Mapping[Any, Any], path: tuple[str, ...], metrics: tuple[Metric, ...]) -> None:
        for dim, power in dims.items():
            where = (*path, str(dim))
            if not isinstance(power, int) or isinstance(power, bool) or not 0 <= power <= MAX_DEGREE:
                problems.append(
                    Problem(locate(where), f"expected a whole number from 0 to {MAX_DEGREE}, got {shown(power)}")
                )
            elif curve is None and not DIM_NAME.fullmatch(str(dim)):
                problems.append(Problem(locate(where), "a dim's name is an identifier such as seq or height"))
            elif curve is not None and dim not in curve:
                problems.append(Problem(locate(where), _no_range(str(dim), curve, what)))
            else:
                for metric in metrics:
                    limits[(metric, str(dim))] = DegreeLimit(metric, str(dim), power, locate(where))

    defaults = {k: v for k, v in value.items() if not isinstance(v, Mapping)}
    degree(defaults, (), default_degree_metrics())
    for key, dims in value.items():
        if not isinstance(dims, Mapping):
            continue
        metric = METRICS.by_key(str(key)) or METRICS.by_argument(str(key))
        if metric is None or metric not in METRICS.growth:
            known = ", ".join(m.key for m in METRICS.growth)
            problems.append(Problem(locate((str(key),)), f"not a metric; a metric's own table is one of: {known}"))
        elif not dims:
            problems.append(Problem(locate((str(key),)), f"expected {DEGREE_GRAMMAR}, got {shown(dims)}"))
        else:
            for dim in [d for d in limits if d[0] == metric]:  # a metric's own table replaces the number's
                del limits[dim]
            degree(dims, (str(key),), (metric,))
    if problems:
        raise LocatedError(problems)
    return tuple(limits[key] for key in sorted(limits, key=lambda k: (list(METRICS).index(k[0]), k[1])))


def parse_at(
    value: Any, locate: Locate, curve: Mapping[str, tuple[int, int]] | None, what: str = "curve"
) -> tuple[PointLimits, ...]:
    """`[{ seq = 8192, flops = "2T" }]` -> one `PointLimits` per table; raises `LocatedError` with every problem.
    Each point is inside the curve's range (a formula says nothing beyond it; None: not known yet, any key that
    is not a budget is a dim); a dim not given is the model's point (`dims`)."""
    if not isinstance(value, list) or not value:
        raise LocatedError([Problem(locate(()), f"expected {AT_GRAMMAR}, got {shown(value)}")])
    problems: list[Problem] = []
    points: list[PointLimits] = []
    settable = {m.key: m for m in at_metrics()} | {m.argument: m for m in at_metrics()}
    for index, item in enumerate(value):
        path: tuple[str | int, ...] = (index,)
        if not isinstance(item, Mapping):
            problems.append(
                Problem(locate(path), f'expected a table such as {{ seq = 8192, flops = "2T" }}, got {shown(item)}')
            )
            continue
        before = len(problems)
        point: dict[str, int] = {}
        limits: dict[Metric, Limit] = {}
        for key, entry in item.items():
            where = locate((*path, str(key)))
            is_dim = DIM_NAME.fullmatch(str(key)) is not None if curve is None else key in curve
            if key not in settable and is_dim:
                low, high = curve[key] if curve is not None else (1, MAX_SIZE)
                if not isinstance(entry, int) or isinstance(entry, bool) or not low <= entry <= high:
                    problems.append(
                        Problem(where, f"expected a size in the {what}'s range [{low}, {high}], got {shown(entry)}")
                    )
                else:
                    point[str(key)] = entry
            elif key in settable:
                try:
                    limit = parse_quantity(entry, str(settable[key]), where)
                except LocatedError as exc:
                    problems.extend(exc.problems)
                    continue
                if limit.metric in limits:
                    problems.append(
                        Problem(where, f"{limit.text!r} sets a {limit.metric} ceiling this point already has")
                    )
                else:
                    limits[limit.metric] = limit
            else:
                dims = ", ".join(curve or ()) or f"none: set {what} first"
                keys = ", ".join(m.key for m in at_metrics())
                problems.append(Problem(where, f"unknown key; expected a dim of the {what} ({dims}) or one of: {keys}"))
        if len(problems) > before:
            continue
        if not point:
            problems.append(
                Problem(locate(path), f"names no dim of the {what} ({', '.join(curve or ())}): at which size?")
            )
        elif not limits:
            keys = ", ".join(m.key for m in at_metrics())
            problems.append(Problem(locate(path), f"sets no ceiling; give one of: {keys}"))
        else:
            points.append(PointLimits(point, {m: limits[m] for m in METRICS if m in limits}, locate(path)))
    if problems:
        raise LocatedError(problems)
    return tuple(points)


def _no_range(dim: str, curve: Mapping[str, tuple[int, int]], what: str) -> str:
    if not curve:
        return f"a degree is judged on the model's formula: set curve = {{ {dim} = [low, high] }} too"
    return f"dim {dim!r} has no range in the {what} ({', '.join(curve)})"
