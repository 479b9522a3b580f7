"""What an ONNX formula sees of one node: its attributes, the shapes around it and its constant inputs.

Formulas read shapes only through `input_shape` / `output_shape`, which raise `UnknownShape` when shape inference
left a dimension open. The backend turns that into a skipped-op entry with the reason, so a formula never has to
guess and an unknown shape is never counted as zero silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any, Callable, Optional, cast

from pytest_flopbudget._counting.tally import INVALID_SHAPE, UNKNOWN_SHAPE

#: A shape as shape inference left it: `None` for an unknown rank, `None` entries for unknown dimensions.
Dims = Optional[tuple[Optional[int], ...]]


def known_dims(dims: Dims) -> tuple[int, ...] | None:
    """`dims` when the rank and every dim are known, else None."""
    if dims is None or None in dims:
        return None
    return cast("tuple[int, ...]", dims)


class UnknownShape(Exception):
    """A shape the formula needs is not known after shape inference."""

    def __init__(self, what: str, reason: str = UNKNOWN_SHAPE) -> None:
        super().__init__(f"{reason} ({what})")
        self.reason = reason


def attribute_value(attribute: Any) -> Any:
    """The Python value of an AttributeProto, without importing onnx.helper for the common scalar kinds."""
    kind = attribute.type
    if kind == 1:  # FLOAT
        return attribute.f
    if kind == 2:  # INT
        return attribute.i
    if kind == 3:  # STRING
        return attribute.s.decode("utf-8", "replace")
    if kind == 6:  # FLOATS
        return list(attribute.floats)
    if kind == 7:  # INTS
        return list(attribute.ints)
    if kind == 8:  # STRINGS
        return [s.decode("utf-8", "replace") for s in attribute.strings]
    if kind == 5:  # GRAPH
        return attribute.g
    if kind == 4:  # TENSOR
        return attribute.t
    from onnx import helper

    return helper.get_attribute_value(attribute)


class NodeContext:
    """One node with the shapes of its inputs and outputs, as handed to a formula."""

    __slots__ = ("_attrs", "_const", "_floats", "_in", "_out", "node", "version")

    def __init__(
        self,
        node: Any,
        version: int,
        in_shapes: Sequence[Dims],
        out_shapes: Sequence[Dims],
        const: Callable[[str], list[int] | None] | None = None,
        floats: Callable[[str], list[float] | None] | None = None,
    ) -> None:
        self.node = node
        self.version = version
        self._in = in_shapes
        self._out = out_shapes
        self._const = const
        self._floats = floats
        self._attrs: dict[str, Any] | None = None

    @property
    def op_type(self) -> str:
        return str(self.node.op_type)

    def attr(self, name: str, default: Any = None) -> Any:
        if self._attrs is None:
            self._attrs = {a.name: attribute_value(a) for a in self.node.attribute}
        return self._attrs.get(name, default)

    def has_input(self, index: int) -> bool:
        return index < len(self.node.input) and self.node.input[index] != ""

    def has_output(self, index: int) -> bool:
        return index < len(self.node.output) and self.node.output[index] != ""

    @property
    def input_count(self) -> int:
        """Inputs actually given (optional inputs left empty do not count)."""
        return sum(1 for name in self.node.input if name)

    def input_shape(self, index: int) -> tuple[int, ...]:
        return _known(self._in[index] if index < len(self._in) else None, f"input {index} of {self.op_type}")

    def output_shape(self, index: int = 0) -> tuple[int, ...]:
        return _known(self._out[index] if index < len(self._out) else None, f"output {index} of {self.op_type}")

    def maybe_input_shape(self, index: int) -> tuple[int, ...] | None:
        """The shape of an optional input, None when the input is absent."""
        return self.input_shape(index) if self.has_input(index) else None

    def input_numel(self, index: int = 0) -> int:
        return prod(self.input_shape(index))

    def output_numel(self, index: int = 0) -> int:
        return prod(self.output_shape(index))

    def const_ints(self, index: int) -> list[int] | None:
        """The integer values of a constant input (an initializer or a Constant node), None when not constant."""
        if self._const is None or not self.has_input(index):
            return None
        return self._const(self.node.input[index])

    def const_floats(self, index: int) -> list[float] | None:
        """The values of a small constant float input (Resize's `scales`), None when not constant."""
        if self._floats is None or not self.has_input(index):
            return None
        return self._floats(self.node.input[index])


def _known(dims: Dims, what: str) -> tuple[int, ...]:
    if dims is None:
        raise UnknownShape(what)
    for d in dims:
        if d is None:
            raise UnknownShape(what)
        if d < 0:
            raise UnknownShape(what, INVALID_SHAPE)
    return cast("tuple[int, ...]", dims)
