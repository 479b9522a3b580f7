"""Memory of an ONNX graph from its types alone: the bytes each node moves and the bytes of each initializer.

Sizes come from the shapes shape inference gave each value and from the element type of each value info and
initializer (`dims` and `data_type`); no tensor's data (`raw_data`, external data) is ever read.

`bytes` follows the PyTorch engine's convention (`counting/torch/backend.py`, `bytes_moved`): every distinct tensor
a node reads once plus every tensor it writes once, each at its own element size. The free ops (`ops.FREE_OPS`)
split in two:

- those the PyTorch engine sees as views or metadata (`VIEW_OPS`: Reshape, Transpose, Expand, Slice, Split, ...)
  move nothing, so a model and its export agree; onnxruntime may materialize some of them (Transpose, Expand,
  Slice), the figure then leaves those copies out, by this documented rule;
- the others write a new tensor and move bytes like any counted op, with the zero FLOPs they cost: Concat, Cast,
  Pad, Tile, Where, ...; a gather (`GATHER_OPS`) reads its indices and only the rows it gathers (as many bytes
  as it writes), never the whole table.

A counted op that is the identity this time (Dropout in inference, `IDENTITY_WHEN_FREE`) moves nothing either,
nor does shape arithmetic (`computes_shapes`): integers the graph fixes before it runs (`Shape -> Gather ->
Concat -> Reshape`), which a runtime folds and a PyTorch model computes in Python.

A size that is not known (a dimension shape inference left open, an element type without a fixed size such as
a string, a sequence) raises `Unsized` with the reason: the backend then leaves `bytes` not measured rather than
low.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from math import prod

from pytest_flopbudget._counting.onnx.graph import NodeInfo
from pytest_flopbudget._counting.onnx.names import text
from pytest_flopbudget._counting.onnx.node import known_dims
from pytest_flopbudget._counting.onnx.shapes import Scope
from pytest_flopbudget._metrics import Metric

#: Bits per element of each `TensorProto` data type with a fixed size; UNDEFINED (0) and STRING (8) have none.
ELEMENT_BITS = {
    1: 32,  # FLOAT
    2: 8,  # UINT8
    3: 8,  # INT8
    4: 16,  # UINT16
    5: 16,  # INT16
    6: 32,  # INT32
    7: 64,  # INT64
    9: 8,  # BOOL
    10: 16,  # FLOAT16
    11: 64,  # DOUBLE
    12: 32,  # UINT32
    13: 64,  # UINT64
    14: 64,  # COMPLEX64
    15: 128,  # COMPLEX128
    16: 16,  # BFLOAT16
    17: 8,  # FLOAT8E4M3FN
    18: 8,  # FLOAT8E4M3FNUZ
    19: 8,  # FLOAT8E5M2
    20: 8,  # FLOAT8E5M2FNUZ
    21: 4,  # UINT4 (two per byte)
    22: 4,  # INT4
    23: 4,  # FLOAT4E2M1
    24: 8,  # FLOAT8E8M0
    25: 2,  # UINT2 (four per byte)
    26: 2,  # INT2
    27: 6,  # FLOAT6E2M3
    28: 6,  # FLOAT6E3M2
}

#: Free ops that move nothing: views and reshapes in the PyTorch engine, shape queries, constants, and containers
#: (a sequence or optional holds references to tensors, it does not copy them).
VIEW_OPS = frozenset(
    {
        "Identity",
        "Constant",
        "Shape",
        "Size",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "Expand",
        "Slice",
        "Split",
        "SequenceConstruct",
        "SequenceAt",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
    }
)
#: Gathers: they read their indices and the rows they gather (the bytes they write), not the whole table.
GATHER_OPS = frozenset({"Gather", "GatherElements", "GatherND"})
#: Inputs whose data an op does not read, only their shape or type: `op -> input positions`.
SHAPE_ONLY_INPUTS = {
    "CastLike": (1,),
    "EyeLike": (0,),
    "RandomNormalLike": (0,),
    "RandomUniformLike": (0,),
}
#: Ops whose zero-cost form is the identity (Dropout in inference, Clip without bounds, a reduction over no axes):
#: then they move nothing, as the PyTorch engine, which never sees them, counts (and a Dropout's mask is not written).
IDENTITY_WHEN_FREE = frozenset({"Dropout", "Clip", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
#: Ops that turn a tensor into a sequence of tensors or back: a sequence's bytes are not in the graph, but they are
#: the tensor's (the pieces partition it), so the tensor is read (or written) and as many bytes written (or read).
SEQUENCE_SPLIT, SEQUENCE_CONCAT = "SplitToSequence", "ConcatFromSequence"
#: com.microsoft free ops that move data: a gather of quantized blocks is charged as a gather of the rows it
#: writes (more bytes than the packed rows and scales it reads), the others as any op.
MS = "com.microsoft"
MS_GATHER_OPS = frozenset({"GatherBlockQuantized"})
MS_MOVING_OPS = frozenset({"QLinearConcat", "Trilu", *MS_GATHER_OPS})


class Unsized(Exception):
    """A tensor's size is not known from the graph's types: no byte figure can be given without guessing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def moves_data(domain: str, op: str) -> bool:
    """Whether a free op (no arithmetic) still moves data, so its bytes count."""
    if domain == "":
        return op not in VIEW_OPS
    return domain == MS and op in MS_MOVING_OPS


def is_identity(domain: str, op: str, values: Mapping[Metric, int]) -> bool:
    """Whether a counted node that cost `values` is the identity, so it moves nothing (`IDENTITY_WHEN_FREE`)."""
    return domain == "" and op in IDENTITY_WHEN_FREE and not any(values.values())


#: Floating-point element types: never shape data.
FLOAT_TYPES = frozenset({1, 10, 11, 14, 15, 16, 17, 18, 19, 20, 23, 24, 27, 28})


def element_bits(data_type: int) -> int | None:
    """Bits per element of a `TensorProto` data type; None for one without a fixed size (string, undefined)."""
    return ELEMENT_BITS.get(data_type)


def tensor_bytes(dims: Iterable[int], data_type: int) -> int | None:
    """Bytes of a tensor of these dims and data type (sub-byte types packed, rounded up to whole bytes)."""
    bits = element_bits(data_type)
    return None if bits is None else -(-prod(dims) * bits // 8)


class NodeBytes:
    """The bytes each node of one graph moves, from that graph's `Scope` (sizes are looked up once per name)."""

    __slots__ = ("_sizes", "_types", "scope")

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self._sizes: dict[str, int] = {}
        self._types: dict[str, int] = {}

    def computes_shapes(self, info: NodeInfo, ints: Callable[[str], list[int] | None]) -> bool:
        """Whether every output of the node is integer data whose values the graph fixes (`ints`, the constant
        folder, gives them): shape arithmetic, which moves nothing. Float outputs are never asked for, so no weight
        is read."""
        found = False
        for name in info.outputs:
            if name:
                if self.data_type(name) in FLOAT_TYPES or ints(name) is None:
                    return False
                found = True
        return found

    def data_type(self, name: str) -> int:
        found = self._types.get(name)
        if found is None:
            found = self._types[name] = _data_type(self.scope, name)
        return found

    def of(self, info: NodeInfo) -> int:
        """Every distinct input read once plus every distinct output written once; a gather reads only its rows.
        Raises `Unsized` naming the first tensor whose size is not known."""
        op, domain = info.op_type, info.domain
        skipped: tuple[int, ...] = ()
        gather = False
        if domain == "":
            if op in (SEQUENCE_SPLIT, SEQUENCE_CONCAT):
                return self._sequence(info)
            skipped, gather = SHAPE_ONLY_INPUTS.get(op, ()), op in GATHER_OPS
        elif domain == MS:
            gather = op in MS_GATHER_OPS
        sizes, seen = self._sizes, set()
        moved = 0
        for name in info.outputs:
            if name and name not in seen:
                seen.add(name)
                found = sizes.get(name)
                moved += found if found is not None else self.size(name, info)
        if gather:  # data (input 0) is read only where gathered: as many bytes as the gather writes
            skipped, moved = (0,), 2 * moved
        for index, name in enumerate(info.inputs):
            if name and name not in seen and index not in skipped:
                seen.add(name)
                found = sizes.get(name)
                moved += found if found is not None else self.size(name, info)
        return moved

    def _sequence(self, info: NodeInfo) -> int:
        """SplitToSequence reads its tensor (and split sizes) and writes as many bytes into the sequence;
        ConcatFromSequence reads as many bytes from the sequence as the tensor it writes."""
        if info.op_type == SEQUENCE_SPLIT:
            split = info.inputs[1] if len(info.inputs) > 1 and info.inputs[1] else None
            return 2 * self.size(info.inputs[0], info) + (self.size(split, info) if split else 0)
        return 2 * self.size(info.outputs[0], info)

    def size(self, name: str, info: NodeInfo) -> int:
        found = self._sizes.get(name)
        if found is None:
            found = self._sizes[name] = self._measure(name, info)
        return found

    def _measure(self, name: str, info: NodeInfo) -> int:
        scope = self.scope
        dims = known_dims(scope.dims(name))
        if dims is None or any(d < 0 for d in dims):
            found = scope.type_of(name)
            kind = found.WhichOneof("value") if found is not None else None
            if kind not in (None, "tensor_type"):
                raise Unsized(
                    f"{_where(name, info)} is a {kind.replace('_type', '')}, whose bytes the graph does not give"
                )
            raise Unsized(f"the shape of {_where(name, info)} is unknown after shape inference")
        size = tensor_bytes(dims, self.data_type(name))
        if size is None:
            raise Unsized(f"the element type of {_where(name, info)} has no fixed size")
        return size


def _where(name: str, info: NodeInfo) -> str:
    return f"'{text(name)}' of {text(info.op_type)} node '{text(info.node.name)}'"


def _data_type(scope: Scope | None, name: str) -> int:
    """The element type of a value, read from an initializer or a value info without building a type proto."""
    while scope is not None:
        if name in scope.types:
            found = scope.types[name]
            return int(found.tensor_type.elem_type) if found.WhichOneof("value") == "tensor_type" else 0
        if name in scope.inits:
            return int(scope.inits[name].data_type)
        scope = scope.parent
    return 0


#: How an ONNX report counts `bytes` (its JSON's `conventions.bytes`): the PyTorch engine's rule, read from types.
CONVENTION = (
    "per counted node: every distinct tensor input read once and every output written once, each at its element "
    "type's size, from value infos and initializer dims (never the data); views and metadata (Reshape, Transpose, "
    "Expand, Slice, Split, Squeeze, Shape, ...) and identities in inference move 0; other free ops (Concat, Cast, "
    "Pad, ...) move their bytes; a gather reads its indices and only the rows it gathers"
)


def reason_not_measured(reason: str) -> str:
    """The `bytes` convention of a report that could not measure it, as its JSON and a budget's failure say it."""
    return f"not measured: {reason}"
