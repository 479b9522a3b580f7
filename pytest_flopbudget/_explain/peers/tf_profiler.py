"""TensorFlow's profiler as a peer: `tf.compat.v1.profiler.profile(graph, options=float_operation())` on the frozen
graph of the model's call, against our TensorFlow count.

The entry is counted as `flopbudget count` counts it (Keras layers priced by the shared rules), and once more with
the ops TensorFlow runs (`keras_rules=False`); the concrete function of that second count is frozen
(`convert_variables_to_constants_v2`, as the profiler is used) and profiled, and each node the profiler prices is
charged to the layer our count charged it to (the node keeps the layer's marker scope). Per layer, then per op type,
the differences are the profiler's rules, read from its registry (`ops.RegisterStatistics(..., "flops")`): no rule
for an op type at all (`Relu`, `Sigmoid`, `Tanh`, `Einsum`: 0), `Rsqrt` at 2 per element, reductions (`Sum`,
`ArgMax`, ...) at n - 1 adds per output; and, where the graph is traced with the batch left unknown
(`TfProfiler(open_batch=True)`), every op whose shapes are incomplete is dropped. Where we price a Keras layer by the
shared rule (a batch norm at 4 per element, not the 2N + 5C ops Keras writes), that is an item of its own first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from pytest_flopbudget._explain.peers.protocol import PeerError, Unit
from pytest_flopbudget._report import Report

#: Op types the profiler counts as n - 1 adds per output (its `_reduction_op_flops`), where we count 1 per input.
REDUCTIONS = frozenset({"Sum", "ArgMax", "ArgMin", "BiasAddGrad"})
#: The name of the op a Keras layer's rule is charged as (`keras_rules.RULE_OP`).
RULE_OP = "keras_rule"


class TfProfiler:
    name = "tf-profiler"
    distribution = "tensorflow"
    framework = "tensorflow"
    unit: Unit = "flops"
    title = "TensorFlow's profiler (tf.compat.v1.profiler, float_operation)"

    def __init__(self, open_batch: bool = False) -> None:
        #: Trace the graph the profiler reads with the first dim of every input unknown (a Keras model's own
        #: signature): the profiler then drops every op whose shapes are incomplete.
        self.open_batch = open_batch

    def is_installed(self) -> bool:
        return importlib.util.find_spec("tensorflow") is not None

    def version(self) -> str:
        for distribution in ("tensorflow", "tensorflow-cpu"):
            with contextlib.suppress(metadata.PackageNotFoundError):
                return metadata.version(distribution)
        return ""

    def explain(self, backend: Any, loaded: Any) -> Explanation:
        from pytest_flopbudget._counting.tensorflow.engine import captured_traces, count_tf

        ours = backend.count(loaded)
        with captured_traces() as traces:
            ops = count_tf(loaded.model, list(loaded.args), dict(loaded.kwargs), keras_rules=False)
            if self.open_batch:  # the same call traced again, for the profiler, with the batch unknown
                count_tf(
                    loaded.model, [_open_batch(arg) for arg in loaded.args], dict(loaded.kwargs), keras_rules=False
                )
        if not traces:
            raise PeerError("the count traced no function for the profiler to read")
        return self.compare(ours, ops, [concrete for concrete, _, _ in traces], traces[0][2])

    def compare(self, ours: Report, ops: Report, functions: list[Any], namer: Any) -> Explanation:
        """`ours` against the profiler's count of `functions[-1]`: `ops` is our count of the ops TensorFlow runs in
        `functions[0]` (whose layers `namer` names), and a second function is the same call traced with the batch
        unknown, whose incomplete ops the profiler drops."""
        profiled = [_by_layer(function, namer) for function in functions]
        known, total, _ = profiled[0]
        found = _rule_items(ours, ops)
        keys = [(path, op) for path, layer in ops.layers.items() for op, cost in layer.ops.items() if cost.flops]
        keys += [key for figures, _, _ in profiled for key in figures if key not in keys]
        rules = registered()
        for layer, op_type in keys:
            cost = ops.layers.get(layer)
            mine = cost.ops[op_type].flops if cost is not None and op_type in cost.ops else 0
            their = known.get((layer, op_type), 0)
            if mine != their:
                reason, detail = _reason(op_type, mine, their, rules)
                found.append(Item(layer, op_type, mine, their, reason, detail=detail))
            if len(profiled) > 1 and profiled[1][0].get((layer, op_type), 0) != their:
                dropped = profiled[1][0].get((layer, op_type), 0)
                found.append(
                    Item(layer, op_type, their, dropped, reasons.INCOMPLETE_SHAPE,
                         detail="traced with the batch unknown: the profiler drops the ops whose shapes lack a dim")
                )  # fmt: skip
        figures, total, _ = profiled[-1]
        gap = total - sum(figures.values())
        if gap:
            found.append(
                Item(None, None, 0, gap, reasons.UNEXPLAINED, detail="the profiler's total is not the sum of its nodes")
            )
        notes = [] if not ops.skipped_ops else [f"we skipped {ops.skipped_calls} op calls: our figure leaves them out"]
        return Explanation(
            peer=self.name,
            title=self.title,
            version=self.version(),
            unit=self.unit,
            ours=ours.flops,
            theirs=total,
            items=tuple(found),
            notes=tuple(notes),
        )


def _by_layer(concrete: Any, namer: Any) -> tuple[dict[tuple[str, str], int], int, Any]:
    """The profiler's figures for `concrete` by (layer, op type), its total, and the frozen graph it read."""
    from pytest_flopbudget._counting.tensorflow.names import scopes_of

    theirs, total, graph = profile(concrete)
    types = {op.name: op.type for op in graph.get_operations()}
    by_layer: dict[tuple[str, str], int] = {}
    for node, flops in theirs.items():
        key = (namer(scopes_of(node)), types[node])
        by_layer[key] = by_layer.get(key, 0) + flops
    return by_layer, total, graph


def profile(concrete: Any) -> tuple[dict[str, int], int, Any]:
    """The profiler's float operations per node of `concrete`'s frozen graph, its total, and that graph."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        graph = convert_variables_to_constants_v2(concrete).graph
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tree = tf.compat.v1.profiler.profile(graph, cmd="scope", options=options)
    except Exception as exc:
        raise PeerError(f"the profiler failed on the graph: {type(exc).__name__}: {exc}"[:300]) from None
    names = {op.name for op in graph.get_operations()}
    found: dict[str, int] = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.name in names and node.float_ops:
            found[node.name] = found.get(node.name, 0) + int(node.float_ops)
        stack.extend(node.children)
    return found, int(tree.total_float_ops), graph


def registered() -> frozenset[str]:
    """The op types TensorFlow's profiler has a flops rule for, from its registry."""
    from tensorflow.python.framework import ops

    return frozenset(key.rsplit(",", 1)[0] for key in ops._stats_registry.list() if key.endswith(",flops"))


def _rule_items(ours: Report, ops: Report) -> list[Item]:
    """Where we price a Keras layer by the shared rule: its rule against our count of the ops it runs."""
    found = []
    for path, layer in ours.layers.items():
        rule = layer.ops.get(RULE_OP)
        if rule is None:
            continue
        ran = ops.layers.get(path)
        difference = layer.flops - (ran.flops if ran is not None else 0)
        if difference:
            replaced = [
                op for op, cost in (ran.ops if ran else {}).items() if cost.flops and not _priced(layer.ops.get(op))
            ]
            names = ", ".join(sorted(replaced))
            found.append(
                Item(path, RULE_OP, rule.flops, rule.flops - difference, reasons.LAYER_RULE,
                     detail=f"TensorFlow runs {names}" if names else "")
            )  # fmt: skip
    return found


def _priced(cost: Any) -> bool:
    return cost is not None and bool(cost.flops)


def _reason(op_type: str, ours: int, theirs: int, rules: frozenset[str]) -> tuple[str, str]:
    if op_type not in rules:
        return reasons.NOT_SUPPORTED, f"the profiler registers no flops rule for {op_type}"
    if op_type == "Rsqrt" and theirs == 2 * ours:
        return reasons.PER_ELEMENT, "the profiler counts Rsqrt as 2 per element, we count 1"
    if op_type in REDUCTIONS:
        return reasons.REDUCTION, f"{ours - theirs:,} outputs: n - 1 adds each"
    return reasons.PER_ELEMENT, ""


def _open_batch(arg: Any) -> Any:
    import tensorflow as tf

    shape = getattr(arg, "shape", None)
    if shape is None or not len(shape):
        return arg
    dtype = tf.as_dtype(arg.dtype)
    return tf.TensorSpec((None, *tuple(shape)[1:]), dtype)


PEER = TfProfiler()
