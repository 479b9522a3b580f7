"""Walk a traced graph op by op, pricing each with the formula table (`ops.py`) and recursing into bodies.

The graph is a concrete function's `FuncGraph`; a body (a loop's `body` and `cond`, an `If`'s branches, a
`PartitionedCall`'s `f`) is the function of that name in the graph's function library, read as the `FuncGraph`
TensorFlow traced it into (its static shapes), else rebuilt from its `FunctionDef` with the caller's input shapes.
Control flow counts as it runs: a `While` with a known trip count (a constant `maximum_iterations`, or a counter
from a constant start, stepped by a constant, compared with `Less` to a constant or loop-invariant bound) counts
its body trip times and its condition trip + 1 times, else it is skipped with the reason; an `If`/`Case` its
costliest branch, the others' skipped ops still reported; a call its body once. Nothing is executed.

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


def _shape(tensor: Any) -> tuple[int, ...] | None:
    """A tensor's static shape, None when its rank or any dim is unknown."""
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return tuple(int(d) for d in shape.as_list())


def _is_integer(tensor: Any) -> bool:
    dtype = tensor.dtype
    return bool(getattr(dtype, "is_integer", False))


class Walker:
    """Prices every op of a graph into a `Tally`, by layer (`namer` over the op's name scopes)."""

    def __init__(self, tf: Any, root: Any, namer: LayerNamer = plain_layer) -> None:
        self.tf, self.root, self.namer = tf, root, namer
        self._library: dict[str, Any] | None = None
        self.memory = TfMemory()

    def walk(self, graph: Any, tally: Tally, outer: Sequence[str] = ()) -> None:
        live = live_ops(graph)
        with self.memory.program(graph):
            for op in graph.get_operations():
                if live is None or op.name in live:
                    self.op(op, tally, joined(outer, scopes_of(op.name)))

    def op(self, op: Any, tally: Tally, scopes: Sequence[str]) -> None:
        kind = op.type
        path = self.namer(scopes)
        called = kind in CALL_OPS or (TF_OPS.lookup(kind) is None and self._in_library(kind))
        backward = bool(scopes) and scopes[0] == BACKWARD_SCOPE
        has_body = called or kind in WHILE_OPS or kind in IF_OPS or kind in CASE_OPS
        with self.memory.equation(op, path, backward=backward, called=called, has_body=has_body):
            self._op(op, kind, tally, scopes, path)

    def _op(self, op: Any, kind: str, tally: Tally, scopes: Sequence[str], path: str) -> None:
        if kind in WHILE_OPS:
            self._while(op, tally, scopes, path)
        elif kind in IF_OPS:
            self._branches(op, [op.get_attr("then_branch").name, op.get_attr("else_branch").name], tally, scopes, path)
        elif kind in CASE_OPS:
            self._branches(op, [b.name for b in op.get_attr("branches")], tally, scopes, path)
        elif kind in CALL_OPS:
            body = self.body(op, op.get_attr("f").name, op.inputs)
            if body is None:
                tally.skip(path, kind, MISSING_BODY)
            else:
                self.walk(body, tally, scopes)
        elif TF_OPS.lookup(kind) is None and self._in_library(kind):  # a function called by name
            body = self.body(op, kind, op.inputs)
            if body is not None:
                self.walk(body, tally, scopes)
        else:
            self._priced(op, kind, tally, path, backward=bool(scopes) and scopes[0] == BACKWARD_SCOPE)

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
        """The graph of function `name` called by `op`: the FuncGraph TensorFlow traced, else rebuilt from the
        library's `FunctionDef` with the caller's input shapes; None when it is nowhere."""
        for graph in (op.graph, self.root):
            found = getattr(graph, "_functions", {}).get(name)
            if found is not None and getattr(found, "graph", None) is not None:
                return found.graph
        fdef = self.library().get(name)
        if fdef is None:
            return None
        from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

        return function_def_to_graph(fdef, input_shapes=[t.shape for t in inputs])

    # --- control flow -------------------------------------------------------------------------------------------

    def _branches(self, op: Any, names: Sequence[str], tally: Tally, scopes: Sequence[str], path: str) -> None:
        branches = []
        for name in names:
            body = self.body(op, name, op.inputs[1:])
            if body is None:
                tally.skip(path, op.type, MISSING_BODY)
                return
            sub = Tally()
            self.walk(body, sub, scopes)
            branches.append(sub)
        if not branches:
            return
        costliest = max(branches, key=lambda sub: list(sub.totals().values()))
        tally.merge(costliest)
        for other in branches:
            if other is not costliest:  # ops skipped in a cheaper branch may run: reported, never called exact
                tally.merge_skipped(other)

    def _while(self, op: Any, tally: Tally, scopes: Sequence[str], path: str) -> None:
        body = self.body(op, op.get_attr("body").name, op.inputs)
        cond = self.body(op, op.get_attr("cond").name, op.inputs)
        if body is None or cond is None:
            tally.skip(path, op.type, MISSING_BODY)
            return
        trip = trip_count(self.tf, op, body, cond)
        if trip is None:
            tally.skip(path, op.type, DYNAMIC_TRIP)
            self.walk(body, Tally(), scopes)  # for the peak alone (`memory`)
            self.walk(cond, Tally(), scopes)
            return
        body_tally, cond_tally = Tally(), Tally()
        self.walk(body, body_tally, scopes)
        self.walk(cond, cond_tally, scopes)
        tally.merge(body_tally, trip)
        tally.merge(cond_tally, trip + 1)


def live_ops(graph: Any) -> set[str] | None:
    """The names of the ops a function runs: those its outputs and control outputs depend on (TensorFlow prunes
    the rest before running a function, such as the input gradient a convolution's gradient function builds for an
    input nothing differentiates); None for a graph without declared outputs (every op runs)."""
    outputs = list(getattr(graph, "outputs", None) or ())
    controls = list(getattr(graph, "control_outputs", None) or ())
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
    """The trip count of a `While` op when the graph fixes it, else None.

    Bounds: `maximum_iterations` (the loop's second input, TF2 control flow) when a constant >= 0, and every
    `Less` term of the condition (joined by `LogicalAnd`) that compares a counter (a loop variable from a constant
    start, stepped in the body by a constant or loop-invariant `AddV2`) with a constant or a loop-invariant loop
    variable of constant start. The smallest bound is the trip count; a condition with any other term counts as
    `maximum_iterations` alone (as the cap it is), and without one it has no known trip count.
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
        bound = _less_bound(tf, term, inits, body, cond)
        known = known and bound is not None
        if bound is not None:
            found.append(bound)
    if known and found:
        return max(min([*found, *([cap] if cap is not None else [])]), 0)
    return cap


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
