"""A tiny integer constant folder: enough to read a Loop's trip count or an If's condition when it is static.

Exporters rarely write a trip count as a literal; a TorchScript loop over a tensor's first axis becomes
`Shape -> Gather -> Loop`. With the input shapes bound, that count is static, and counting the body that many
times is exact. Anything the folder cannot evaluate is dynamic, and the backend reports the loop as skipped.

The same values feed the shape gap-filling pass (`shapes.complete_shapes`) wherever ONNX data propagation
stops: shape vectors built with integer Div, the TorchScript `Where(Equal(shape, -1), ones, shape)` guard in front
of `Expand`, `Range(axis, rank, 1)` reduction axes. `floats` reads (never computes) small float constants.
"""

from __future__ import annotations

import operator
from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting.onnx.graph import NodeInfo, index_nodes
from pytest_flopbudget._counting.onnx.node import Dims, attribute_value, known_dims

MAX_DEPTH = 64
MAX_VALUES = 4096
_INT_TYPES = {2, 3, 4, 5, 6, 7, 9, 12, 13}  # uint8 int8 uint16 int16 int32 int64 bool uint32 uint64
_FLOAT_TYPES = {1, 10, 11, 16}  # float float16 double bfloat16

_BINARY: dict[str, Callable[[int, int], int]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "Div": lambda a, b: (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b else 0,  # exact, truncating
    "Mod": operator.mod,  # fmod=0: the sign of the divisor, as Python's %; fmod=1 is `_mod`'s
    "Max": max,
    "Min": min,
    "Equal": lambda a, b: int(a == b),
    "Less": lambda a, b: int(a < b),
    "Greater": lambda a, b: int(a > b),
    "LessOrEqual": lambda a, b: int(a <= b),
    "GreaterOrEqual": lambda a, b: int(a >= b),
    "And": lambda a, b: int(bool(a) and bool(b)),
    "Or": lambda a, b: int(bool(a) or bool(b)),
}
_PASS_THROUGH = {"Identity", "Cast", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "CastLike"}


class ConstFolder:
    """Integer values of one graph's names; falls back to the enclosing graph's folder for outer names."""

    def __init__(
        self,
        graph: Any,
        dims: Callable[[str], Dims],
        tensors: dict[str, Any] | None = None,
        parent: ConstFolder | None = None,
        nodes: list[NodeInfo] | None = None,
    ) -> None:
        if nodes is None:
            nodes = index_nodes(graph)
        self.producers = {out: info.node for info in nodes for out in info.outputs if out}
        self.tensors = dict(tensors or {})
        for init in graph.initializer:
            self.tensors.setdefault(init.name, init)
        self.dims = dims
        self.parent = parent
        self._cache: dict[str, list[int] | None] = {}

    def ints(self, name: str, depth: int = 0) -> list[int] | None:
        if not name or depth > MAX_DEPTH:
            return None
        if name in self._cache:
            return self._cache[name]
        value = self._evaluate(name, depth)
        if value is None and self.parent is not None and name not in self.producers:
            value = self.parent.ints(name, depth + 1)
        if value is not None and len(value) > MAX_VALUES:
            value = None
        self._cache[name] = value
        return value

    def floats(self, name: str) -> list[float] | None:
        """The values of a small float constant (an initializer or a Constant node), for the float parameters some
        ops take as inputs (Resize's `scales`); nothing is computed, and None means not a constant."""
        tensor = self.tensors.get(name)
        if tensor is None:
            node = self.producers.get(name)
            if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                from pytest_flopbudget._counting.onnx.shapes import _constant_node_tensor

                tensor = _constant_node_tensor(node)
            elif node is None and self.parent is not None:
                return self.parent.floats(name)
        if tensor is None or tensor.data_type not in _FLOAT_TYPES or tensor.data_location == 1:
            return None
        if prod(tensor.dims) > MAX_VALUES:
            return None
        from onnx import numpy_helper

        try:
            return [float(v) for v in numpy_helper.to_array(tensor).reshape(-1)]
        except Exception:  # a malformed tensor is simply not a constant we can read
            return None

    def _evaluate(self, name: str, depth: int) -> list[int] | None:
        if name in self.tensors:
            return tensor_ints(self.tensors[name])
        node = self.producers.get(name)
        if node is None or node.domain not in ("", "ai.onnx"):
            return None
        op = node.op_type
        args = node.input
        if op == "Constant":
            from pytest_flopbudget._counting.onnx.shapes import _constant_node_tensor

            tensor = _constant_node_tensor(node)
            return tensor_ints(tensor) if tensor is not None else None
        if op in _PASS_THROUGH:
            return self.ints(args[0], depth + 1) if args else None
        if op == "Shape":
            dims = known_dims(self.dims(args[0]))
            if dims is None:
                return None
            attrs = {a.name: attribute_value(a) for a in node.attribute}
            start, end = attrs.get("start", 0), attrs.get("end", len(dims))
            return list(dims[start:end])
        if op == "Size":
            dims = known_dims(self.dims(args[0]))
            return None if dims is None else [prod(dims)]
        if op == "Gather":
            data, index = self.ints(args[0], depth + 1), self.ints(args[1], depth + 1)
            if data is None or index is None:
                return None
            try:
                return [data[i] for i in index]
            except IndexError:
                return None
        if op == "Concat":
            joined: list[int] = []
            for a in args:
                part = self.ints(a, depth + 1)
                if part is None:
                    return None
                joined.extend(part)
            return joined
        if op == "Slice":
            return self._slice(node, depth)
        if op == "Not":
            value = self.ints(args[0], depth + 1)
            return None if value is None else [int(not v) for v in value]
        if op == "ConstantOfShape":
            return self._constant_of_shape(node, depth)
        if op == "Where" and len(args) == 3:
            return self._where(args, depth)
        if op == "Range" and len(args) == 3:
            return self._range(args, depth)
        if op in _BINARY and len(args) == 2:
            a, b = self.ints(args[0], depth + 1), self.ints(args[1], depth + 1)
            if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
                return None
            n = max(len(a), len(b))
            fn = _mod(node) if op == "Mod" else _BINARY[op]
            return [fn(a[i % len(a)], b[i % len(b)]) for i in range(n)]
        return None

    def _constant_of_shape(self, node: Any, depth: int) -> list[int] | None:
        """A shape vector filled with one integer: the TorchScript exporter builds `ones` for `expand` this way.

        The default fill is a float 0.0, which is not shape data; only an integer `value` is folded.
        """
        shape = self.ints(node.input[0], depth + 1) if node.input else None
        if shape is None or any(d < 0 for d in shape) or prod(shape) > MAX_VALUES:
            return None
        fill = next((tensor_ints(a.t) for a in node.attribute if a.name == "value" and a.type == 4), None)
        if fill is None or len(fill) != 1:
            return None
        return fill * prod(shape)

    def _where(self, args: Any, depth: int) -> list[int] | None:
        """`Where(Equal(shape, -1), ones, shape)`: how the TorchScript exporter writes `x.expand(b, s)`.

        Without folding it, `Expand` has unknown output dims, and a batch of 1 broadcast against an unknown dim
        stays unknown downstream: every matmul of an exported BERT counted at batch 1 was skipped.
        """
        cond, a, b = (self.ints(name, depth + 1) for name in args)
        if cond is None or a is None or b is None:
            return None
        n = max(len(cond), len(a), len(b))
        if any(len(v) not in (1, n) for v in (cond, a, b)):
            return None
        return [a[i % len(a)] if cond[i % len(cond)] else b[i % len(b)] for i in range(n)]

    def _range(self, args: Any, depth: int) -> list[int] | None:
        """Integer `Range(start, limit, delta)`: function bodies build reduction axes as Range(axis, rank, 1)."""
        start, limit, delta = (self.ints(name, depth + 1) for name in args)
        if start is None or limit is None or delta is None or {len(start), len(limit), len(delta)} != {1}:
            return None
        if delta[0] == 0 or len(range(start[0], limit[0], delta[0])) > MAX_VALUES:
            return None
        return list(range(start[0], limit[0], delta[0]))

    def _slice(self, node: Any, depth: int) -> list[int] | None:
        """1-D slices of shape vectors (`Shape -> Slice -> Concat` builds Reshape targets)."""
        args = node.input
        data = self.ints(args[0], depth + 1) if args else None
        if data is None:
            return None
        if len(args) >= 3:  # opset 10+: starts, ends, axes, steps are inputs
            starts, ends = self.ints(args[1], depth + 1), self.ints(args[2], depth + 1)
            axes = self.ints(args[3], depth + 1) if len(args) > 3 and args[3] else [0]
            steps = self.ints(args[4], depth + 1) if len(args) > 4 and args[4] else [1]
        else:
            attrs = {a.name: attribute_value(a) for a in node.attribute}
            starts, ends, axes, steps = attrs.get("starts"), attrs.get("ends"), attrs.get("axes", [0]), [1]
        if starts is None or ends is None or axes is None or steps is None:
            return None
        if len(starts) != 1 or len(ends) != 1 or axes not in ([0], [-1]) or len(steps) != 1 or steps[0] == 0:
            return None
        return data[slice(*_clamp(starts[0], ends[0], steps[0], len(data)))]


def _mod(node: Any) -> Callable[[int, int], int]:
    """Integer `Mod`: the sign of the divisor (Python's %), or with `fmod=1` of the dividend (C's fmod); x mod 0
    folds to 0 rather than fail (the value is then wrong, as a runtime's would be undefined)."""
    fmod = any(a.name == "fmod" and a.i for a in node.attribute)

    def mod(a: int, b: int) -> int:
        if not b:
            return 0
        return (abs(a) % abs(b)) * (1 if a >= 0 else -1) if fmod else a % b

    return mod


def _clamp(start: int, end: int, step: int, length: int) -> tuple[int, int, int]:
    """ONNX Slice bounds (which may be +-INT64_MAX) as Python slice arguments."""

    def bound(value: int) -> int:
        return max(-length - 1, min(length, value))

    return bound(start), bound(end), step


def tensor_ints(tensor: Any) -> list[int] | None:
    """The values of a small integer or boolean TensorProto; None for floats or external data."""
    if tensor.data_type not in _INT_TYPES or tensor.data_location == 1 or prod(tensor.dims) > MAX_VALUES:
        return None
    from onnx import numpy_helper

    try:
        return [int(v) for v in numpy_helper.to_array(tensor).reshape(-1)]
    except Exception:  # a malformed tensor is simply not a constant we can read
        return None
