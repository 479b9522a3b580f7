"""Walk a traced graph op by op, pricing each with the formula table (`ops.py`) and recursing into bodies.

The graph is a concrete function's `FuncGraph`; a body (a loop's `body` and `cond`, an `If`'s branches, a
`PartitionedCall`'s `f`) is the function of that name in the graph's function library, read as the `FuncGraph`
TensorFlow traced it into (its static shapes), else rebuilt from its `FunctionDef` with the caller's input shapes.
Control flow counts as it runs: a `While` with a known trip count (a counter from a constant start, stepped by a
constant, compared with `Less` to a constant or loop-invariant bound) counts its body trip times and its condition
trip + 1 times; a data-dependent `While` capped by a constant `maximum_iterations` counts the cap, an upper bound
listed as an estimated op (`CAPPED_TRIP`); any other is skipped with the reason. An `If`/`Case` counts its
costliest branch, the others' skipped ops still reported; a call its body once. Nothing is executed.

The walk also follows resource handles (variables) into the bodies that receive them, so each variable is charged
to the layer of the first op that reads it (`Walker.readers`): a graph that keeps no layer objects (a SavedModel)
or a plain `tf.function` puts its parameters where its ops are.

Every op also goes through the walk's `memory` (`memory.py`): the bytes it moves are added to the tally beside its
FLOPs (so a loop body's bytes count as often as its FLOPs), and each graph and op is recorded for the peak of live
bytes (`graph_memory.py`). A `While` without a known trip count is still walked for that (its peak does not depend
on how often it runs), its figures thrown away.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytest_flopbudget._counting.registry import FREE
from pytest_flopbudget._counting.tally import NO_FORMULA, Tally, formula_failed
from pytest_flopbudget._counting.tensorflow.memory import TfMemory
from pytest_flopbudget._counting.tensorflow.names import LayerNamer, joined, plain_layer, scopes_of
from pytest_flopbudget._counting.tensorflow.ops import TF_OPS, OpContext
from pytest_flopbudget._metrics import BYTES
from pytest_flopbudget._report import ROOT

WHILE_OPS = frozenset({"While", "StatelessWhile"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
#: The skip reason of a `While` whose trip count the graph does not fix.
DYNAMIC_TRIP = "dynamic trip count (a while loop without a constant maximum_iterations or constant bounds)"
#: The skip reason of a priced op with a dim the trace left unknown.
UNKNOWN_SHAPE = "unknown static shape after tracing (give every dim in the input specs)"
#: The name scope TensorFlow puts a `GradientTape`'s gradient ops under: the backward phase of a training count.
BACKWARD_SCOPE = "gradient_tape"
#: The skip reason of a body that is in no function library.
MISSING_BODY = "function body not found in the graph's function library"
#: The rule of a `While` counted at its `maximum_iterations` because its condition depends on the data: the figures
#: are an upper bound, listed among the estimated ops.
CAPPED_TRIP = "data-dependent while loop counted at its constant maximum_iterations (an upper bound)"
#: Ops that pass a resource handle through unchanged: what they output is the variable they were given.
_PASS_THROUGH = frozenset({"Identity", "Snapshot"})


def _shape(tensor: Any) -> tuple[int, ...] | None:
    """A tensor's static shape, None when its rank or any dim is unknown."""
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return tuple(int(d) for d in shape.as_list())


def _is_integer(tensor: Any) -> bool:
    dtype = tensor.dtype
    return bool(getattr(dtype, "is_integer", False))


#: A graph's resource tensors by name -> the variable each holds (its key in `Walker.readers`).
Resources = dict[str, str]


class Walker:
    """Prices every op of a graph into a `Tally`, by layer (`namer` over the op's name scopes).

    `readers` maps each variable the walk saw read (by the key its handle was given in `walk(resources=...)`, or
    a `VarHandleOp`'s shared name) to the layer of the first op that read it; `variable_sizes` holds the element
    count of each `VarHandleOp` the walk met (its `shape` attribute, nothing read)."""

    def __init__(self, tf: Any, root: Any, namer: LayerNamer = plain_layer) -> None:
        self.tf, self.root, self.namer = tf, root, namer
        self._library: dict[str, Any] | None = None
        self.readers: dict[str, str] = {}
        self.variable_sizes: dict[str, int] = {}
        self.memory = TfMemory()
        #: The phase of the op whose body is being walked: a call, loop or branch in the backward phase runs
        #: backward ops whatever their scopes say.
        self._backward = False

    def walk(
        self,
        graph: Any,
        tally: Tally,
        outer: Sequence[str] = (),
        resources: Resources | None = None,
        outputs: Sequence[Any] | None = None,
        forward_ops: frozenset[str] | None = None,
    ) -> None:
        """Price the ops of `graph` that run: those its outputs depend on (`outputs`, else the graph's own; every
        op of a graph that declares none). `resources` names the variables its resource tensors hold.

        `forward_ops`, for a training step's graph, names the ops made before the gradient was asked for: every
        other op is backward, those under the tape's scope and those the gradient functions of
        `tf.recompute_grad` and `tf.custom_gradient` make outside it (the recomputed forward, the custom
        gradient), as PyTorch counts a checkpoint's recomputation and a custom `backward` in the backward phase."""
        live = live_ops(graph, outputs)
        held = dict(resources or {})
        placed: dict[str, tuple[str, bool, int]] = {}
        with self.memory.program(graph, outputs):
            for op in graph.get_operations():
                scopes = joined(outer, scopes_of(op.name))
                taped = (
                    self._backward
                    or (bool(scopes) and scopes[0] == BACKWARD_SCOPE)
                    or (forward_ops is not None and op.name not in forward_ops)
                )
                path, backward = place(op, self.namer(scopes), taped, placed)
                if live is None or op.name in live:
                    kind = op.type
                    called = kind in CALL_OPS or (TF_OPS.lookup(kind) is None and self._in_library(kind))
                    has_body = called or kind in WHILE_OPS or kind in IF_OPS or kind in CASE_OPS
                    with self.memory.equation(op, path, backward=backward, called=called, has_body=has_body):
                        outer_phase, self._backward = self._backward, backward  # its bodies run in its phase
                        try:
                            self.op(op, tally, scopes, path, backward, held)
                        finally:
                            self._backward = outer_phase

    def op(
        self,
        op: Any,
        tally: Tally,
        scopes: Sequence[str],
        path: str,
        backward: bool = False,
        held: Resources | None = None,
    ) -> None:
        kind = op.type
        held = {} if held is None else held
        self._follow(op, kind, path, held)
        if kind in WHILE_OPS:
            self._while(op, tally, scopes, path, held)
        elif kind in IF_OPS:
            names = [op.get_attr("then_branch").name, op.get_attr("else_branch").name]
            self._branches(op, names, tally, scopes, path, held)
        elif kind in CASE_OPS:
            self._branches(op, [b.name for b in op.get_attr("branches")], tally, scopes, path, held)
        elif kind in CALL_OPS:
            body = self.body(op, op.get_attr("f").name, op.inputs)
            if body is None:
                tally.skip(path, kind, MISSING_BODY)
            else:
                self.walk(body, tally, scopes, passed(op.inputs, body, held))
        elif TF_OPS.lookup(kind) is None and self._in_library(kind):  # a function called by name
            body = self.body(op, kind, op.inputs)
            if body is not None:
                self.walk(body, tally, scopes, passed(op.inputs, body, held))
        else:
            self._priced(op, kind, tally, path, backward=backward)

    def _follow(self, op: Any, kind: str, path: str, held: Resources) -> None:
        """Track the variables' handles: a `VarHandleOp` makes one, an identity passes one on, and any other op
        (but a call or control flow, whose bodies are followed) given one reads it."""
        if kind == "VarHandleOp":
            key = _text(op.get_attr("shared_name")) or op.name
            held[op.outputs[0].name] = key
            shape = op.get_attr("shape")
            if shape.unknown_rank:
                return
            dims = [d.size for d in shape.dim]
            self.variable_sizes.setdefault(key, int(np.prod(dims, dtype=np.int64)) if all(d >= 0 for d in dims) else 0)
            return
        if not held:
            return
        given = [held[t.name] for t in op.inputs if t.name in held]
        if not given:
            return
        if kind in _PASS_THROUGH:
            held[op.outputs[0].name] = given[0]
        elif kind not in CALL_OPS | WHILE_OPS | IF_OPS | CASE_OPS and not self._in_library(kind):
            for key in given:
                self.readers.setdefault(key, path)

    def _priced(self, op: Any, kind: str, tally: Tally, path: str, *, backward: bool = False) -> None:
        entry = TF_OPS.lookup(kind)
        if entry is FREE:  # no arithmetic, but a copy, a gather or a fill still moves memory (memory.py)
            moved = self.memory.moved(op, kind, free=True, layer=path)
            if moved:
                tally.add_values(path, kind, {BYTES: moved}, backward=backward)
            return
        if entry is None:
            tally.skip(path, kind, NO_FORMULA)
            return
        in_shapes = [_shape(t) for t in op.inputs]
        out_shapes = [_shape(t) for t in op.outputs]
        # the operands and the first output are what formulas read; a side output TensorFlow leaves unshaped
        # (FusedBatchNormV3's reserve space) reads as a scalar
        if any(s is None for s in in_shapes) or (out_shapes and out_shapes[0] is None):
            tally.skip(path, kind, UNKNOWN_SHAPE)
            self.memory.cannot_size(kind, path)
            return
        context = OpContext(
            op_type=kind,
            in_shapes=in_shapes,  # type: ignore[arg-type]
            out_shapes=[s if s is not None else () for s in out_shapes],
            attrs={name: op.get_attr(name) for name in op.node_def.attr if not name.startswith("_")},
            out_integer=bool(op.outputs) and _is_integer(op.outputs[0]),
        )
        try:
            cost = entry(context)  # type: ignore[operator]
        except Exception as exc:  # a formula that cannot read this op says so; it never counts zero silently
            tally.skip(path, kind, formula_failed(f"{type(exc).__name__}: {exc}"[:200]))
            return
        values = cost.values()
        moved = self.memory.moved(op, kind, free=False, layer=path)
        if moved:
            values[BYTES] = moved
        tally.add_values(path, kind, values, backward=backward)

    # --- function bodies ----------------------------------------------------------------------------------------

    def _in_library(self, name: str) -> bool:
        return name in self.library()

    def library(self) -> dict[str, Any]:
        """The root graph's function library by name (`FunctionDef`s), read once."""
        if self._library is None:
            self._library = {fn.signature.name: fn for fn in self.root.as_graph_def().library.function}
        return self._library

    def body(self, op: Any, name: str, inputs: Sequence[Any]) -> Any:
        """The graph of function `name` called by `op`: the FuncGraph TensorFlow traced (where it knows every dim
        the caller knows), else rebuilt from the library's `FunctionDef` with the caller's input shapes; None when
        it is nowhere."""
        traced = self._traced(op, name)
        if traced is not None and _knows_as_much(traced.inputs, inputs):
            return traced
        return self._rebuilt(name, [t.shape for t in inputs], inputs)

    def loop(self, op: Any) -> tuple[Any, Any]:
        """A `While`'s body and condition graphs (None where missing). The bodies TensorFlow traced are taken as
        they are (their inputs have the loop's shape invariants); a body rebuilt from its `FunctionDef` starts from
        the loop's initial shapes, and every dim the body changes from one trip to the next is left unknown, until
        the body's outputs fit its inputs (the invariants TensorFlow would have found)."""
        body_name, cond_name = op.get_attr("body").name, op.get_attr("cond").name
        body, cond = self._traced(op, body_name), self._traced(op, cond_name)
        if body is not None and cond is not None:
            return body, cond
        shapes = [t.shape for t in op.inputs]
        for _ in range(len(shapes) + 1):
            body = self._rebuilt(body_name, shapes, op.inputs)
            if body is None:
                return None, None
            relaxed = [mine.most_specific_compatible_shape(out.shape) for mine, out in zip(shapes, body.outputs)]
            if [_dims(s) for s in relaxed] == [_dims(s) for s in shapes[: len(relaxed)]]:
                break
            shapes = [*relaxed, *shapes[len(relaxed) :]]
        return body, self._rebuilt(cond_name, shapes, op.inputs)

    def _traced(self, op: Any, name: str) -> Any:
        for graph in (op.graph, self.root):
            found = getattr(graph, "_functions", {}).get(name)
            traced = getattr(found, "graph", None) if found is not None else None
            if traced is not None:
                return traced
        return None

    def _rebuilt(self, name: str, shapes: Sequence[Any], operands: Sequence[Any]) -> Any:
        fdef = self.library().get(name)
        return None if fdef is None else function_graph(self.root, fdef, shapes, operands)

    # --- control flow -------------------------------------------------------------------------------------------

    def _branches(
        self, op: Any, names: Sequence[str], tally: Tally, scopes: Sequence[str], path: str, held: Resources
    ) -> None:
        branches = []
        for name in names:
            body = self.body(op, name, op.inputs[1:])
            if body is None:
                tally.skip(path, op.type, MISSING_BODY)
                return
            sub = Tally()
            self.walk(body, sub, scopes, passed(op.inputs[1:], body, held))
            branches.append(sub)
        if not branches:
            return
        costliest = max(branches, key=lambda sub: list(sub.totals().values()))
        tally.merge(costliest)
        for other in branches:
            if other is not costliest:  # ops skipped in a cheaper branch may run: reported, never called exact
                tally.merge_skipped(other)

    def _while(self, op: Any, tally: Tally, scopes: Sequence[str], path: str, held: Resources) -> None:
        body, cond = self.loop(op)
        if body is None or cond is None:
            tally.skip(path, op.type, MISSING_BODY)
            return
        trip, exact = trip_bound(self.tf, op, body, cond)
        if trip is None:
            tally.skip(path, op.type, DYNAMIC_TRIP)
            self.walk(body, Tally(), scopes, passed(op.inputs, body, held))  # for the peak alone (`memory`)
            self.walk(cond, Tally(), scopes, passed(op.inputs, cond, held))
            return
        if not exact:
            tally.estimate(path, op.type, CAPPED_TRIP)
        body_tally, cond_tally = Tally(), Tally()
        self.walk(body, body_tally, scopes, passed(op.inputs, body, held))
        self.walk(cond, cond_tally, scopes, passed(op.inputs, cond, held))
        tally.merge(body_tally, trip)
        tally.merge(cond_tally, trip + 1)


def _dims(shape: Any) -> list[int | None] | None:
    return None if shape.rank is None else shape.as_list()


def _knows_as_much(inner: Sequence[Any], outer: Sequence[Any]) -> bool:
    """Whether a traced body's inputs know every dim its caller's operands know (else it is rebuilt)."""
    for mine, theirs in zip(inner, outer):
        if theirs.shape.rank is None:
            continue
        if mine.shape.rank is None:
            return False
        if any(m is None and t is not None for m, t in zip(mine.shape.as_list(), theirs.shape.as_list())):
            return False
    return True


def passed(inputs: Sequence[Any], body: Any, held: Resources) -> Resources:
    """The variables a body receives: its input placeholders, matched in order to the caller's operands."""
    return {inner.name: held[outer.name] for outer, inner in zip(inputs, body.inputs) if outer.name in held}


def function_graph(root: Any, fdef: Any, input_shapes: Sequence[Any], operands: Sequence[Any] = ()) -> Any:
    """The function `fdef` as a graph whose inputs have `input_shapes` (the caller's), shapes inferred from there.

    TensorFlow's `function_def_to_graph` would let the shapes a function was saved with (`_output_shapes` on its
    arguments) replace the caller's, so a SavedModel's body would keep its unknown batch, and its placeholders
    would lack what the caller's tensors know of the tensors inside a handle (a `TensorList`'s element shape, a
    variable's shape), so a recurrent loop's per-step reads would be unknown. Here the placeholders are made
    first, with the caller's shapes and `operands`' handle data (a resource argument's declared handle data
    otherwise), and the body is imported onto them. Nested functions are found in `root`'s library."""
    from tensorflow.python.framework import importer
    from tensorflow.python.framework.func_graph import FuncGraph
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def
    from tensorflow.python.ops import array_ops, handle_data_util

    args = list(fdef.signature.input_arg)
    shapes = list(input_shapes) + [None] * (len(args) - len(input_shapes))
    bound = type(fdef)()
    bound.CopyFrom(fdef)
    for index in bound.arg_attr:
        bound.arg_attr[index].attr.pop("_output_shapes", None)
    with root.as_default():
        graph_def, flat_names = function_def_to_graph_def(bound, shapes)
        arg_names = {arg.name for arg in args}
        body_def = type(graph_def)()
        body_def.CopyFrom(graph_def)
        del body_def.node[:]
        body_def.node.extend(node for node in graph_def.node if node.name not in arg_names)
        graph = FuncGraph(fdef.signature.name)
        with graph.as_default():
            feeds = {}
            for index, (arg, shape) in enumerate(zip(args, shapes)):
                placeholder = array_ops.placeholder(arg.type, shape, name=arg.name)
                if index < len(operands) and arg.type in (_RESOURCE, _VARIANT):
                    handle_data_util.set_handle_data(placeholder, _handle_data(operands[index]))
                if arg.handle_data and arg.type == _RESOURCE:
                    declared = handle_data_util.create_handle_data(
                        _tensor_shape(arg.handle_data[0].shape), _dtype(arg.handle_data[0].dtype)
                    )
                    if not handle_data_util.get_handle_data(placeholder).is_set:
                        handle_data_util.set_handle_data(placeholder, declared)
                feeds[f"{arg.name}:0"] = placeholder
            used = {name if ":" in name else f"{name}:0" for node in body_def.node for name in node.input}
            importer.import_graph_def(body_def, input_map={k: v for k, v in feeds.items() if k in used}, name="")

            def tensor(name: str) -> Any:
                return feeds[name] if name in feeds else graph.get_tensor_by_name(name)

            graph.inputs = [feeds[f"{arg.name}:0"] for arg in args]
            graph.outputs = [tensor(flat_names[fdef.ret[arg.name]]) for arg in fdef.signature.output_arg]
            graph.control_outputs = [
                graph.get_operation_by_name(fdef.control_ret[name]) for name in fdef.signature.control_output
            ]
            for node in body_def.node:  # the shapes saved with each op, merged with what inference found
                saved = node.attr.get("_output_shapes")
                if saved is None:
                    continue
                op = graph.get_operation_by_name(node.name)
                for output, shape in zip(op.outputs, saved.list.shape):
                    try:
                        output.set_shape(_tensor_shape(shape))
                    except ValueError:  # a saved shape the bound inputs contradict: inference wins
                        continue
    return graph


#: `DT_RESOURCE` (a variable's handle) and `DT_VARIANT` (a `TensorList`'s).
_RESOURCE, _VARIANT = 20, 21


def _handle_data(tensor: Any) -> Any:
    """What `tensor` knows of the tensors inside its handle. A `TensorList` made from a tensor (a recurrent layer's
    time steps) holds slices of it: TensorFlow takes their shape from the `element_shape` constant the trace wrote
    (a SavedModel's keeps its unknown batch), so it is merged with the shape of the tensor's slices."""
    from tensorflow.python.ops import handle_data_util

    data = handle_data_util.get_handle_data(tensor)
    source = _through_identity(tensor)
    if data is None or not data.is_set or len(data.shape_and_type) != 1 or source.op.type != "TensorListFromTensor":
        return data
    element, sliced = _tensor_shape(data.shape_and_type[0].shape), source.op.inputs[0].shape
    if sliced.rank is None or not element.is_compatible_with(sliced[1:]):
        return data
    refined = type(data)()
    refined.CopyFrom(data)
    refined.shape_and_type[0].shape.CopyFrom(element.merge_with(sliced[1:]).as_proto())
    return refined


def _tensor_shape(proto: Any) -> Any:
    from tensorflow.python.framework.tensor_shape import TensorShape

    return TensorShape(proto)


def _dtype(enum: int) -> Any:
    from tensorflow.python.framework.dtypes import as_dtype

    return as_dtype(enum)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def place(op: Any, path: str, backward: bool, placed: dict[str, tuple[str, bool, int]]) -> tuple[str, bool]:
    """The layer and phase of `op` (`placed` holds those of the ops before it in the graph by name, with their
    position).

    An op is charged to the layer its scopes name, and is backward under the tape's `gradient_tape` scope. One
    kind of op has neither: the gradient machinery sums the gradients of a tensor used twice (a residual's
    shortcut) with an `AddN` it builds outside every scope. An op outside every layer whose operands are all
    backward is such a sum: backward, charged to the layer of its latest operand (where the
    second gradient arrived, as PyTorch's autograd engine accumulates it and jax's `add_any` is placed)."""
    if path == ROOT and op.inputs:
        sources = [placed.get(tensor.op.name) for tensor in op.inputs]
        if all(source is not None and source[1] for source in sources):
            path, backward = max(sources, key=lambda source: source[2])[0], True  # type: ignore[index]
    placed[op.name] = (path, backward, len(placed))
    return path, backward


def live_ops(graph: Any, wanted: Sequence[Any] | None = None) -> set[str] | None:
    """The names of the ops a function runs: those its outputs and control outputs depend on (TensorFlow prunes
    the rest before running a function, such as the input gradient a convolution's gradient function builds for an
    input nothing differentiates), or those `wanted` tensors depend on (a SavedModel signature's outputs in a graph
    that also holds the saver); None for a graph without declared outputs (every op runs)."""
    outputs = list(wanted if wanted is not None else getattr(graph, "outputs", None) or ())
    controls = [] if wanted is not None else list(getattr(graph, "control_outputs", None) or ())
    if not outputs and not controls:
        return None
    live: set[str] = set()
    stack = [t.op for t in outputs] + controls
    while stack:
        op = stack.pop()
        if op.name in live:
            continue
        live.add(op.name)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return live


#: Integer ops the trip count folds over constants (beyond what `tf.get_static_value` folds): Keras' recurrent
#: layers bound their loop by `Max(time_steps, axis=[])`.
_FOLD_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "AddV2": lambda a, b: a + b,
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b,
    "Maximum": lambda a, b: np.maximum(a, b),
    "Minimum": lambda a, b: np.minimum(a, b),
}
_FOLD_REDUCE: dict[str, Callable[..., Any]] = {"Max": np.max, "Min": np.min, "Sum": np.sum, "Prod": np.prod}


def _fold(tf: Any, tensor: Any, depth: int = 0) -> Any:
    """The value of `tensor` when constants decide it, else None."""
    try:
        value = tf.get_static_value(tensor)
    except Exception:
        value = None
    if value is not None or depth > 16:
        return None if value is None else np.asarray(value)
    op = tensor.op
    if op.type in ("Identity", "Snapshot"):
        return _fold(tf, op.inputs[0], depth + 1)
    operands = [_fold(tf, t, depth + 1) for t in op.inputs]
    if any(v is None for v in operands):
        return None
    if op.type in _FOLD_BINARY and len(operands) == 2:
        return np.asarray(_FOLD_BINARY[op.type](*operands))
    if op.type in _FOLD_REDUCE and len(operands) == 2:
        axes = tuple(int(a) for a in np.asarray(operands[1]).ravel())
        keep = bool(op.get_attr("keep_dims"))
        return np.asarray(_FOLD_REDUCE[op.type](operands[0], axis=axes, keepdims=keep))
    return None


def _constant(tf: Any, tensor: Any) -> int | None:
    value = _fold(tf, tensor)
    if value is None or value.shape != ():
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _through_identity(tensor: Any) -> Any:
    while tensor.op.type in ("Identity", "Snapshot"):
        tensor = tensor.op.inputs[0]
    return tensor


def trip_count(tf: Any, op: Any, body: Any, cond: Any) -> int | None:
    """The trip count of a `While` op when the graph fixes it or caps it, else None (`trip_bound` says which)."""
    return trip_bound(tf, op, body, cond)[0]


def trip_bound(tf: Any, op: Any, body: Any, cond: Any) -> tuple[int | None, bool]:
    """The trip count of a `While` op when the graph fixes it, and whether it is exact; (None, False) when the
    graph neither fixes nor caps it.

    Bounds: `maximum_iterations` (the loop's second input, TF2 control flow) when a constant >= 0, and every
    `Less` term of the condition (joined by `LogicalAnd`) that compares a counter (a loop variable from a constant
    start, stepped in the body by a constant or loop-invariant `AddV2`) with a constant or a loop-invariant loop
    variable of constant start. The smallest bound is the trip count, exact; a condition with any other term
    counts as `maximum_iterations` alone, the cap it is: an upper bound, not exact. Without one it has no known
    trip count.
    """
    inits = list(op.inputs)
    cap = _constant(tf, inits[1]) if len(inits) >= 2 else None
    cap = cap if cap is not None and cap >= 0 else None
    terms, found, known = [_through_identity(t) for t in cond.outputs], [], True
    while terms:
        term = terms.pop()
        if term.op.type == "LogicalAnd":
            terms.extend(_through_identity(t) for t in term.op.inputs)
            continue
        if _always_true(tf, term):  # `lambda *_: True` under a cap: the cap is the trip count
            continue
        bound = _less_bound(tf, term, inits, body, cond)
        known = known and bound is not None
        if bound is not None:
            found.append(bound)
    if known and found:
        return max(min([*found, *([cap] if cap is not None else [])]), 0), True
    return cap, False


def _always_true(tf: Any, term: Any) -> bool:
    value = _fold(tf, term)
    return value is not None and value.shape == () and value.dtype == np.bool_ and bool(value)


def _input_index(graph: Any, tensor: Any) -> int | None:
    for index, placeholder in enumerate(graph.inputs):
        if placeholder is tensor or placeholder.name == tensor.name:
            return index
    return None


def _invariant_value(tf: Any, tensor: Any, inits: Sequence[Any], body: Any, graph: Any) -> int | None:
    """A constant, or a loop variable the body passes through unchanged whose start is constant."""
    tensor = _through_identity(tensor)
    value = _constant(tf, tensor) if tensor.op.type == "Const" else None
    if value is not None:
        return value
    index = _input_index(graph, tensor)
    if index is None or index >= len(inits) or index >= len(body.outputs):
        return None
    if _through_identity(body.outputs[index]).name != body.inputs[index].name:
        return None
    return _constant(tf, inits[index])


def _less_bound(tf: Any, term: Any, inits: Sequence[Any], body: Any, cond: Any) -> int | None:
    if term.op.type != "Less":
        return None
    counter, bound = (_through_identity(t) for t in term.op.inputs)
    index = _input_index(cond, counter)
    upper = _invariant_value(tf, bound, inits, body, cond)
    if index is None or upper is None or index >= len(inits) or index >= len(body.outputs):
        return None
    start = _constant(tf, inits[index])
    step_out = _through_identity(body.outputs[index])
    if start is None or step_out.op.type not in ("AddV2", "Add"):
        return None
    a, b = (_through_identity(t) for t in step_out.op.inputs)
    counter_in = body.inputs[index]
    if a.name == counter_in.name:
        step = _invariant_value(tf, b, inits, body, body)
    elif b.name == counter_in.name:
        step = _invariant_value(tf, a, inits, body, body)
    else:
        return None
    if step is None or step <= 0:
        return None
    return max(-(-(upper - start) // step), 0)
