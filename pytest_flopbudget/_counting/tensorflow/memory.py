"""Memory of a traced TensorFlow graph: the bytes each op moves and the events the peak is found from
(`graph_memory.py`).

Every op reads its inputs and writes its outputs, each at its dtype's size, as the PyTorch, ONNX and JAX engines
count (`bytes`), and every output is a new buffer alive until its last reader (the peak). Ops free of FLOPs split
as in the other engines, so a Keras model and its PyTorch twin agree where the ops do:

- **views** move nothing and hold no memory of their own, their output sharing an input's buffer (`VIEW_OPS`:
  `Identity`, `Reshape`, `Squeeze`, `ExpandDims`, `Transpose`, `BroadcastTo`, `Slice`, `StridedSlice`, `Split`,
  `Unpack`, `StopGradient`, ...), and `ReadVariableOp`: a variable's value is read where it lives;
- **metadata** (`Shape`, `Size`, `Rank`, ...) moves nothing (the PyTorch engine computes shapes in Python), though
  its small integer output is a tensor alive until read;
- **gathers** (`GatherV2`, `GatherNd`, `ResourceGather`) read their indices and only the rows they gather;
- `ZerosLike`, `OnesLike` and `Fill` write their output and read nothing of their operands' data;
  `AssignVariableOp` reads the value and writes the variable (a PyTorch `copy_`);
- every other op (priced or free: `ConcatV2`, `Cast`, `Pad`, `Tile`, `SelectV2`, ...) reads its inputs and writes
  its outputs.

The variables a function reads are alive throughout, counted once (`Recorder.resident`, from the engine), as are
its constants (`Const`); a resource handle itself holds no bytes. A tensor whose shape is not fully known (a `None`
dim), or whose dtype has no fixed size (a `variant`: a `TensorList`; a `string`), leaves `bytes` (when an op that
moves bytes touches it) and the peak (when an op writes it) not measured. An op skipped for its unknown shape adds
no bytes, and leaves `bytes` not measured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from math import prod
from typing import Any

from pytest_flopbudget._counting.graph_memory import Key, Recorder, Value, traffic

#: Ops whose outputs share an input's buffer: op type -> the position of that input.
VIEW_OPS: dict[str, int] = {
    **dict.fromkeys(
        (
            "Identity",
            "Snapshot",
            "StopGradient",
            "PreventGradient",
            "EnsureShape",
            "CheckNumerics",
            "PlaceholderWithDefault",
            "ReadVariableOp",
            "Reshape",
            "Squeeze",
            "ExpandDims",
            "Transpose",
            "ConjugateTranspose",
            "BroadcastTo",
            "Slice",
            "StridedSlice",
            "SplitV",
            "Unpack",
            "Bitcast",
        ),
        0,
    ),
    "Split": 1,  # (axis, value)
}
#: Ops whose each output shares the input at its own position.
PAIRWISE_VIEW_OPS = frozenset({"IdentityN"})
#: Ops that describe tensors or graphs without touching their data: nothing moved.
NO_TRAFFIC_OPS = frozenset(
    {
        "Placeholder",
        "Const",
        "NoOp",
        "VarHandleOp",
        "VarIsInitializedOp",
        "Shape",
        "ShapeN",
        "Size",
        "Rank",
        "BroadcastArgs",
        "TensorListElementShape",
        "TensorListLength",
    }
)
#: Gathers: their indices (input 1) and as many bytes of their source (input 0) as they write.
GATHER_OPS = frozenset({"Gather", "GatherV2", "GatherNd", "ResourceGather"})
#: Write their output without reading their inputs' data.
WRITE_ONLY_OPS = frozenset({"ZerosLike", "OnesLike", "Fill"})
#: Overwrite a variable with their value input (input 1): read it, write as many bytes.
ASSIGN_OPS = frozenset({"AssignVariableOp"})

#: How a TensorFlow report counts `bytes` (its JSON's `conventions["bytes"]`).
BYTES_CONVENTION = (
    "per graph op: every distinct input read once and every output written once, each at its dtype's size; views "
    "and metadata (Identity, Reshape, Squeeze, ExpandDims, Transpose, BroadcastTo, Slice, StridedSlice, Split, "
    "ReadVariableOp, Shape, ...) move 0; gathers read their indices and only the rows they gather; ZerosLike, "
    "OnesLike and Fill only write; other free ops (ConcatV2, Cast, Pad, Tile, SelectV2, ...) move their bytes; a "
    "loop body's bytes count as often as it runs"
)

_RESOURCE, _NO_FIXED_SIZE = "resource", frozenset({"variant", "string"})


def tensor_bytes(tensor: Any) -> int | None:
    """A graph tensor's bytes: its elements at its dtype's size; 0 for a resource handle; None when a dim is not
    known or the dtype has no fixed size."""
    dtype = tensor.dtype
    name = getattr(dtype, "name", "")
    if name == _RESOURCE:
        return 0
    if name in _NO_FIXED_SIZE:
        return None
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return prod(int(d) for d in shape.as_list()) * int(dtype.size)


def variable_bytes(tf: Any, variable: Any) -> int | None:
    """A variable's bytes at its dtype's size; None when its shape or dtype does not give them."""
    shape = variable.shape
    try:
        dims = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
        size = int(tf.as_dtype(variable.dtype).size)
    except (TypeError, ValueError):
        return None
    return prod(dims) * size if size else None


def _handle_bytes(op: Any) -> int | None:
    """The bytes of the variable a `VarHandleOp` makes, from its `shape` and `dtype` attributes (nothing read)."""
    try:
        shape, dtype = op.get_attr("shape"), op.get_attr("dtype")
    except ValueError:
        return None
    if shape.unknown_rank or any(d.size < 0 for d in shape.dim) or not dtype.size:
        return None
    return prod(d.size for d in shape.dim) * int(dtype.size)


def key(tensor: Any) -> Key:
    """A tensor's identity across every graph of the count (a body's `x:0` is not the root's)."""
    return (tensor.graph, tensor.name)


def value(tensor: Any) -> Value:
    return Value(key(tensor), tensor_bytes(tensor))


class TfMemory:
    """The memory side of one graph walk: the bytes rule the walk adds to its tally, and the recording of every
    graph and op it meets for the peak (`recorder`)."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        #: why `bytes` cannot be measured (the first op with a tensor of unknown size), None while it can
        self.unsized: str | None = None
        #: the ops the tally holds for their bytes alone (free ops), dropped if `bytes` is not measured
        self.free_ops: set[str] = set()
        #: the bytes of each variable a `VarHandleOp` of the graph makes, by its shared name (a SavedModel's)
        self.variable_bytes: dict[str, int | None] = {}
        #: the inputs of each graph the walk is in (innermost last)
        self._inputs: list[set[Key]] = []

    # --- bytes -------------------------------------------------------------------------------------------------

    def moved(self, op: Any, kind: str, *, free: bool, layer: str) -> int:
        """The bytes one op moves (the module's docstring); 0 with `unsized` set when a size is not known."""
        if free and (kind in VIEW_OPS or kind in PAIRWISE_VIEW_OPS or kind in NO_TRAFFIC_OPS):
            return 0
        writes = [value(t) for t in op.outputs]
        reads = [] if kind in WRITE_ONLY_OPS else [value(t) for t in op.inputs]
        if kind in GATHER_OPS and reads:
            gathered, indices = traffic((), writes), traffic(reads[1:2], ())
            moved = None if gathered is None or indices is None else indices + 2 * gathered
        elif kind in ASSIGN_OPS and len(reads) > 1:
            assigned = traffic(reads[1:2], ())
            moved = None if assigned is None else 2 * assigned
        else:
            moved = traffic(reads, writes)
        if moved is None:
            self.cannot_size(kind, layer)
            return 0
        if free and moved:
            self.free_ops.add(kind)
        return moved

    def cannot_size(self, kind: str, layer: str) -> None:
        """An op whose bytes cannot be known (a tensor of unknown shape or size): `bytes` is not measured."""
        where = f"layer '{layer}'" if layer else "the model"
        self.unsized = self.unsized or f"a tensor of {kind} in {where} has no known size"

    # --- the peak ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def program(self, graph: Any, outputs: Sequence[Any] | None = None) -> Iterator[None]:
        """A graph the walk enters: its inputs (placeholders) and its outputs (`outputs`, where the walk wants those
        alone: a SavedModel signature's)."""
        inputs = [value(t) for t in getattr(graph, "inputs", ())]
        results = outputs if outputs is not None else getattr(graph, "outputs", ())
        self._inputs.append({found.key for found in inputs})
        try:
            with self.recorder.program(inputs, [key(t) for t in results]):
                yield
        finally:
            self._inputs.pop()

    @contextlib.contextmanager
    def equation(self, op: Any, layer: str, *, backward: bool, called: bool, has_body: bool) -> Iterator[None]:
        """One op, around the walk's handling of it (whose bodies become its own); `called`: a function call, whose
        body is spelled out in place."""
        kind = op.type
        reads: Sequence[Key | None] = [key(t) for t in op.inputs]
        writes = [value(t) for t in op.outputs]
        views: Sequence[int] | None = None
        if kind in VIEW_OPS:
            views = [VIEW_OPS[kind]] * len(writes)
        elif kind in PAIRWISE_VIEW_OPS:
            views = list(range(len(writes)))
        elif kind in ("Placeholder", "Const"):  # an input, or a constant alive throughout: never allocated here
            inputs = self._inputs[-1] if self._inputs else set()
            for written in writes:  # a placeholder that is no input of its graph is fed from outside (a SavedModel's)
                if kind == "Const" or written.key not in inputs:
                    self.recorder.resident(written)
            views = [len(reads)] * len(writes)
        elif kind == "VarHandleOp":  # a variable of the graph itself: alive throughout, its handle holds nothing
            name = op.get_attr("shared_name")
            name = (name.decode() if isinstance(name, bytes) else str(name or "")) or op.name
            nbytes = self.variable_bytes[name] = _handle_bytes(op)
            self.recorder.resident(Value(("variable", name), nbytes))
        with self.recorder.equation(
            kind, layer, reads, writes, views=views, backward=backward, inline=called, has_body=has_body
        ):
            yield
