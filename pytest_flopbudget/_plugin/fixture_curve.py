"""`flopbudget.count_curve(model, [1, "seq"], dims={"seq": 128}, curve={"seq": (16, 512)})`: a marker test's model
counted over a curve, so that its `max_degree=` and `at=` have a formula to be judged on (docs/curve-budgets.md).

The model is counted exactly as a pyproject model with the same `inputs`, `dims` and `curve` (`count_curve`, one
backend, generated inputs sized by the dims): the test's live model object is lent to that path under a module
name of its own for the duration of the count, so no second way of counting a curve exists.
"""

from __future__ import annotations

import itertools
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._config.pyproject import DIM_NAME, DTYPES, InputSpec, ModelEntry, reserved_dim_problem
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._report import Report

_COUNTER = itertools.count()


def count_model_curve(
    model: Any,
    shapes: Sequence[Any],
    *,
    dims: Mapping[str, int],
    curve: Mapping[str, Sequence[int]],
    name: str,
    origin: Location,
    root: Path,
    training: bool = False,
    method: str = "forward",
) -> tuple[Report, Formula]:
    """The count at `dims` and the formula over `curve` of `model` fed zeros of `shapes` (`[1, "seq"]`, or
    `{"shape": [1, "seq"], "dtype": "int64"}`); raises `LocatedError` naming the argument that is wrong."""
    from pytest_flopbudget._curve.engine import count_curve

    specs = [_spec(shape, index, origin) for index, shape in enumerate(shapes)]
    point, ranges = _dims(dims, curve, specs, origin)
    with _lent(model) as target:
        entry = ModelEntry(
            name=name,
            target=target,
            inputs=specs,
            budget=Budget(),
            source=origin,
            training=training,
            method=method,
            dims=point,
            curve=ranges,
        ).at(point)
        return count_curve(entry, root)


@contextmanager
def _lent(model: Any) -> Iterator[str]:
    """`model` as the target `"<module>:model"` of a module that exists only while it is counted."""
    name = f"_flopbudget_fixture_model_{next(_COUNTER)}"
    module = types.ModuleType(name)
    module.model = model  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        yield f"{name}:model"
    finally:
        sys.modules.pop(name, None)


def _spec(value: Any, index: int, origin: Location) -> InputSpec:
    dtype = None
    shape = value
    if isinstance(value, Mapping):
        shape, dtype = value.get("shape"), value.get("dtype")
        if dtype is not None and dtype not in DTYPES:
            raise _error(origin, f"input {index}: unknown dtype {dtype!r}; expected one of: {', '.join(DTYPES)}")
    if not isinstance(shape, (list, tuple)) or not all(
        (isinstance(d, int) and not isinstance(d, bool) and d >= 0) or (isinstance(d, str) and DIM_NAME.fullmatch(d))
        for d in shape
    ):
        raise _error(origin, f'input {index}: {shape!r} is not a shape such as [1, "seq"] (sizes or names of dims)')
    reserved = next(filter(None, (reserved_dim_problem(d) for d in shape if isinstance(d, str))), None)
    if reserved is not None:
        raise _error(origin, f"input {index}: {reserved}")
    names = tuple(d if isinstance(d, str) else None for d in shape)
    sizes = tuple(0 if isinstance(d, str) else d for d in shape)
    return InputSpec(sizes, dtype, names if any(names) else None)


def _dims(
    dims: Mapping[str, int], curve: Mapping[str, Sequence[int]], specs: Sequence[InputSpec], origin: Location
) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    named = {n for spec in specs for n in (spec.names or ()) if n is not None}
    point: dict[str, int] = {}
    for dim in sorted(named):
        size = dims.get(dim)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise _error(origin, f"dims: dim {dim!r} needs a positive size, e.g. dims={{{dim!r}: 128}}")
        point[dim] = size
    ranges: dict[str, tuple[int, int]] = {}
    for dim, bounds in curve.items():
        if dim not in named:
            raise _error(origin, f"curve: no input names the dim {dim!r}")
        if not (
            isinstance(bounds, (list, tuple))
            and len(bounds) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            and 1 <= bounds[0] < bounds[1]
        ):
            raise _error(origin, f"curve: {dim}: expected (low, high) with 1 <= low < high, got {bounds!r}")
        ranges[dim] = (bounds[0], bounds[1])
    if not ranges:
        raise _error(origin, 'curve: give the range of a dim, e.g. curve={"seq": (64, 8192)}')
    return point, ranges


def _error(origin: Location, message: str) -> LocatedError:
    return LocatedError([Problem(origin, f"flopbudget.count_curve: {message}")])
