"""Bind the graph inputs' symbolic dimensions (`batch`, `seq`, `-1`) to the sizes given as `inputs=`.

A symbol names one size everywhere in the model, so binding `batch` through one input binds it for every input that
uses it. When a dimension stays open the error lists every graph input with its dims and spells out the `inputs=`
argument to write, because the user cannot see the symbols without opening the model in a viewer.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any, Union

from pytest_flopbudget._errors import CountingError, MissingInputSizes

INT64_MAX = 2**63 - 1

#: A declared dimension: a size, a symbol name, or None when the exporter left it blank.
Declared = Union[int, str, None]


def declared_dims(type_proto: Any) -> list[Declared] | None:
    """The dims a graph input declares; None when it declares no shape at all (its rank is unknown too)."""
    if type_proto.WhichOneof("value") != "tensor_type" or not type_proto.tensor_type.HasField("shape"):
        return None
    dims: list[Declared] = []
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(str(d.dim_param))
        else:
            dims.append(None)
    return dims


def bind_inputs(
    graph_inputs: Sequence[Any],
    inputs: Mapping[str, Sequence[int]] | None,
    label: str,
    named_dims: Mapping[str, int] | None = None,
) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for every tensor graph input, or a CountingError naming what is missing or wrong.

    `named_dims` binds the graph's symbolic dims by name (`{"batch": 1, "sequence": 128}`), as a given shape would."""
    given = _validate_given(inputs, [vi.name for vi in graph_inputs], label)
    declared: dict[str, list[Declared] | None] = {}
    named_sizes = dict(named_dims or {})
    symbols: dict[str, int] = dict(named_sizes)
    for vi in graph_inputs:
        if vi.type.WhichOneof("value") != "tensor_type":
            continue
        dims = declared_dims(vi.type)
        declared[vi.name] = dims
        for axis, d in enumerate(dims or []):
            if isinstance(d, int) and d < 0:
                raise CountingError(
                    f"{label}: graph input '{vi.name}' declares dimension {d} at axis {axis}; a size cannot be "
                    f"negative: fix the exporter's dynamic-axes setting or pass inputs={{'{vi.name}': [...]}}"
                )
        if vi.name in given and dims is not None:
            _match(vi.name, dims, given[vi.name], symbols, label)

    named = {d for listed in declared.values() for d in listed or () if isinstance(d, str)}
    unknown = [name for name in named_sizes if name not in named]
    if unknown:
        raise CountingError(
            f"{label}: the dim {unknown[0]!r} is not a symbolic dim of the graph's inputs "
            f"({', '.join(repr(n) for n in sorted(named)) or 'it has none'})"
        )
    bound: dict[str, tuple[int, ...]] = {}
    missing: list[str] = []
    for name, dims in declared.items():
        if name in given:
            bound[name] = given[name]
            continue
        if dims is None:
            missing.append(name)
            continue
        resolved = [d if isinstance(d, int) else symbols.get(d) if isinstance(d, str) else None for d in dims]
        if any(d is None for d in resolved):
            missing.append(name)
        else:
            bound[name] = tuple(d for d in resolved if d is not None)
    if missing:
        raise _missing(label, declared, missing, symbols)
    for name, shape in bound.items():
        if prod(shape) > INT64_MAX:
            raise CountingError(
                f"{label}: graph input '{name}' {list(shape)} has {prod(shape)} elements, more than an int64 can "
                f"index; the model declares impossible sizes: re-export it"
            )
    return bound


def _validate_given(
    inputs: Mapping[str, Sequence[int]] | None, names: Sequence[str], label: str
) -> dict[str, tuple[int, ...]]:
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise CountingError(
            f"inputs= must map graph input names to shapes, e.g. inputs={{'{names[0] if names else 'input'}': "
            f"[1, 3, 224, 224]}}; got {type(inputs).__name__}"
        )
    given: dict[str, tuple[int, ...]] = {}
    for name, shape in inputs.items():
        if name not in names:
            raise CountingError(
                f"{label}: inputs= names '{name}', which is not a graph input; the graph inputs are "
                f"{', '.join(repr(n) for n in names) or '(none)'}"
            )
        given[name] = _as_shape(name, shape)
    return given


def _as_shape(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or (not isinstance(shape, Sequence) and not hasattr(shape, "__iter__")):
        raise CountingError(f"inputs['{name}'] must be a list of sizes such as [1, 3, 224, 224], got {shape!r:.60}")
    dims: list[int] = []
    for d in shape:
        try:
            if isinstance(d, bool):
                raise TypeError
            size = operator.index(d)
        except TypeError:
            raise CountingError(
                f"inputs['{name}'] must contain whole sizes such as [1, 3, 224, 224], "
                f"got {d!r:.40} in {list(shape)!r:.80}"
            ) from None
        if size < 0 or size > INT64_MAX:
            raise CountingError(f"inputs['{name}'] has size {size}; sizes must be between 0 and {INT64_MAX} (int64)")
        dims.append(size)
    if prod(dims) > INT64_MAX:
        raise CountingError(
            f"inputs['{name}'] = {dims} has {prod(dims)} elements, more than an int64 can index; check the sizes"
        )
    return tuple(dims)


def _match(name: str, dims: list[Declared], shape: tuple[int, ...], symbols: dict[str, int], label: str) -> None:
    if len(dims) != len(shape):
        raise CountingError(
            f"{label}: inputs['{name}'] has {len(shape)} dims {list(shape)} but the graph input has {len(dims)}: "
            f"{_render(dims)}"
        )
    for axis, (d, size) in enumerate(zip(dims, shape)):
        if isinstance(d, int) and d != size:
            raise CountingError(
                f"{label}: inputs['{name}'] gives {size} at axis {axis}, where the model fixes the size to {d}: "
                f"the graph input is {_render(dims)}"
            )
        if isinstance(d, str) and symbols.setdefault(d, size) != size:
            raise CountingError(
                f"{label}: dimension '{d}' is bound to both {symbols[d]} and {size} (inputs['{name}'] axis "
                f"{axis}); every input that uses '{d}' must give it the same size"
            )


def _render(dims: list[Declared] | None) -> str:
    if dims is None:
        return "[unknown rank]"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _missing(
    label: str, declared: dict[str, list[Declared] | None], missing: list[str], symbols: dict[str, int]
) -> MissingInputSizes:
    listed = "; ".join(f"'{name}' {_render(dims)}" for name, dims in declared.items())
    first = label if not label.startswith("<") else "model"
    return MissingInputSizes(label, listed, [(name, _template(declared[name], symbols)) for name in missing], first)


def _template(dims: list[Declared] | None, symbols: dict[str, int]) -> list[str]:
    if dims is None:
        return ["<sizes>"]
    parts = []
    for d in dims:
        if isinstance(d, int):
            parts.append(str(d))
        elif isinstance(d, str):
            parts.append(str(symbols[d]) if d in symbols else f"<{d}>")
        else:
            parts.append("<?>")
    return parts
