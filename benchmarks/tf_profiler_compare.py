"""Our TensorFlow count beside `tf.compat.v1.profiler`'s float-operation count, op type by op type, with the reason
for every difference.

    python benchmarks/tf_profiler_compare.py                          # convnet, ResNet50, MobileNetV2, EfficientNetB0
    python benchmarks/tf_profiler_compare.py --models convnet --size 32 --json out.json

Each Keras model (`examples/keras_models.py`, TensorFlow backend, `weights=None`) is counted by the engine
(`count_tf`) and, as the TF1 profiler is used, on the frozen graph of the same call
(`convert_variables_to_constants_v2` of its concrete function) with
`profile(graph, cmd="scope", options=ProfileOptionBuilder.float_operation())`: once at batch 1, and once with a
`None` batch, where the profiler drops every op whose shape is incomplete (one log line, no figure) and we skip the
same ops by name (`unknown static shape`).

Every difference at batch 1 is a profiler rule that differs from ours, found in TensorFlow's own registry
(`tensorflow/python/profiler/internal/flops_registry.py`, `nn_ops.py`): the profiler registers no rule for most
activations (`Relu`, `Relu6`, `Sigmoid`, `Tanh`, `Exp`, `Erf`, `Einsum`...) and counts them as 0; it counts `Rsqrt`
as 2 per element (ours 1, the shared elementwise rule); its `Sum` (and `ArgMax`, `ArgMin`, `BiasAddGrad`) is n - 1
adds per output where ours is 1 per input element. Convolutions (2 FLOPs per MAC, full taps), `MatMul`, `BiasAdd`,
`Mean`, pooling and elementwise arithmetic agree exactly. `explain()` predicts the profiler's figure for each op
type from ours and the graph's shapes; a type whose prediction misses is listed as unexplained (none on these
models), and the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The op types TensorFlow's profiler has a flops rule for (TensorFlow 2.21); any other op type counts 0 there: the
# table the `tf-profiler` convention profile prices by.
from pytest_flopbudget._explain.peers.conventions import TF_PROFILER_RULES as PROFILER_RULES

#: Why the profiler's figure for an op type differs from ours, by reason key.
REASONS = {
    "same": "same rule",
    "no rule": "the profiler has no rule for this op: 0",
    "rsqrt": "the profiler counts Rsqrt as 2 per element, we count 1 (the shared elementwise rule)",
    "reduction": "the profiler counts n - 1 adds per output of a reduction, we count 1 per input element",
    "incomplete shape": "dropped by the profiler: a dim of its operands or output is unknown (None batch)",
}


@dataclass
class Row:
    """One op type: our FLOPs, the profiler's, the profiler's figure as `explain()` predicts it, and why."""

    op: str
    ours: int
    profiler: int
    predicted: int
    reason: str

    @property
    def difference(self) -> int:
        return self.ours - self.profiler

    @property
    def explained(self) -> bool:
        return self.predicted == self.profiler


def _graph_nodes(node: Any) -> Any:
    yield node
    for child in node.children:
        yield from _graph_nodes(child)


def profile(tf: Any, graph: Any) -> dict[str, int]:
    """The TF1 profiler's float operations on `graph`, by op type."""
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    tree = tf.compat.v1.profiler.profile(graph, cmd="scope", options=options)
    types = {op.name: op.type for op in graph.get_operations()}
    found: dict[str, int] = {}
    for node in _graph_nodes(tree):
        if node.name in types and node.float_ops:
            found[types[node.name]] = found.get(types[node.name], 0) + int(node.float_ops)
    assert sum(found.values()) == int(tree.total_float_ops)
    return found


def frozen_graph(tf: Any, model: Any, shape: tuple[int | None, ...]) -> Any:
    """The graph of `model(x, training=False)` with its variables folded into constants, as the profiler reads it."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    function = tf.function(lambda x: model(x, training=False))
    concrete = function.get_concrete_function(tf.TensorSpec(shape, tf.float32))
    return convert_variables_to_constants_v2(concrete).graph


def _elements(shape: Any) -> int:
    dims = shape.as_list() if shape.rank is not None else [None]
    return math.prod(d for d in dims) if all(d is not None for d in dims) else 0


def _complete(op: Any) -> bool:
    tensors = [*op.inputs, *op.outputs[:1]]
    return all(t.shape.rank is not None and None not in t.shape.as_list() for t in tensors)


def explain(ours: dict[str, int], profiler: dict[str, int], graph: Any) -> list[Row]:
    """One row per op type either side counts, the profiler's figure predicted from ours: the same, 0 where it has
    no rule, twice ours for `Rsqrt`, ours less the output elements for `Sum` and the other reductions without a
    final division."""
    by_type: dict[str, list[Any]] = {}
    for op in graph.get_operations():
        by_type.setdefault(op.type, []).append(op)
    rows = []
    for op_type in sorted(set(ours) | set(profiler), key=lambda t: -max(ours.get(t, 0), profiler.get(t, 0))):
        mine = ours.get(op_type, 0)
        if op_type not in PROFILER_RULES:
            predicted, reason = 0, "no rule"
        elif op_type == "Rsqrt":
            predicted, reason = 2 * mine, "rsqrt"
        elif op_type in ("Sum", "ArgMax", "ArgMin", "BiasAddGrad"):
            outputs = sum(_elements(op.outputs[0].shape) for op in by_type.get(op_type, []) if _complete(op))
            predicted, reason = mine - outputs, "reduction"
        else:
            predicted, reason = mine, "same"
        rows.append(Row(op_type, mine, profiler.get(op_type, 0), predicted, reason))
    return rows


def compare(name: str, size: int) -> dict[str, Any]:
    """Ours and the profiler's on model `name` at batch 1 and with a None batch, with the per-op-type rows."""
    import tensorflow as tf

    from examples.keras_models import MODELS, input_shape
    from pytest_flopbudget._counting.tensorflow.engine import count_tf

    model = MODELS[name][0](size)
    shape = input_shape(name, size)
    start = time.perf_counter()
    # op by op against the profiler: the ops TensorFlow runs, not the Keras layers priced by the shared rules
    report = count_tf(model, [tf.TensorSpec(shape, tf.float32)], keras_rules=False)
    ours_s = time.perf_counter() - start
    ours = {op: cost.flops for op, cost in report.ops.items() if cost.flops}
    graph = frozen_graph(tf, model, shape)
    start = time.perf_counter()
    theirs = profile(tf, graph)
    profiler_s = time.perf_counter() - start
    rows = explain(ours, theirs, graph)

    unknown = (None, *shape[1:])
    open_report = count_tf(model, [tf.TensorSpec(unknown, tf.float32)], keras_rules=False)
    open_graph = frozen_graph(tf, model, unknown)
    open_theirs = profile(tf, open_graph)
    dropped = sorted({op.type for op in open_graph.get_operations() if op.type in PROFILER_RULES and not _complete(op)})
    return {
        "model": name,
        "input": list(shape),
        "ours": report.flops,
        "profiler": sum(theirs.values()),
        "ours_s": round(ours_s, 3),
        "profiler_s": round(profiler_s, 3),
        "rows": [{**asdict(row), "difference": row.difference, "explained": row.explained} for row in rows],
        "none_batch": {
            "ours_counted": open_report.flops,
            "ours_skipped": {op: skip.calls for op, skip in open_report.skipped_ops.items()},
            "profiler": sum(open_theirs.values()),
            "profiler_dropped_types": dropped,
            "profiler_dropped_ops": sum(
                1 for op in open_graph.get_operations() if op.type in PROFILER_RULES and not _complete(op)
            ),
        },
    }


def markdown(result: dict[str, Any]) -> str:
    """The comparison of one model as the Markdown docs/tensorflow.md shows."""
    shape = "x".join(str(d) for d in result["input"])
    lines = [
        f"**{result['model']}** ({shape}): ours {result['ours']:,} FLOPs, profiler {result['profiler']:,} "
        f"(difference {result['ours'] - result['profiler']:+,})",
        "",
        "| op type | ours | profiler | ours - profiler | why |",
        "|---|---:|---:|---:|---|",
    ]
    for row in result["rows"]:
        if row["difference"] == 0:
            continue
        why = REASONS[row["reason"]] if row["explained"] else "UNEXPLAINED"
        lines.append(f"| `{row['op']}` | {row['ours']:,} | {row['profiler']:,} | {row['difference']:+,} | {why} |")
    same = sum(row["ours"] for row in result["rows"] if row["difference"] == 0)
    kinds = ", ".join(f"`{row['op']}`" for row in result["rows"] if row["difference"] == 0 and row["ours"])
    lines.append(f"| the rest ({kinds}) | {same:,} | {same:,} | 0 | same rule |")
    none = result["none_batch"]
    lines += [
        "",
        f"With a `None` batch the profiler reports {none['profiler']:,} FLOPs: it drops "
        f"{none['profiler_dropped_ops']} ops of the types it has rules for "
        f"({', '.join(f'`{t}`' for t in none['profiler_dropped_types'])}) with one log line, *incomplete shapes*. "
        f"We count {none['ours_counted']:,} FLOPs and report "
        f"{sum(none['ours_skipped'].values())} skipped ops by type and layer (reason *unknown static shape*).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["convnet", "resnet50", "mobilenet_v2", "efficientnet_b0"])
    parser.add_argument("--size", type=int, default=None, help="input side (default: 32 for convnet, else 224)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    results = []
    for name in args.models:
        size = args.size or (32 if name == "convnet" else 224)
        result = compare(name, size)
        results.append(result)
        print(markdown(result), end="\n\n", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    unexplained = [(r["model"], row["op"]) for r in results for row in r["rows"] if not row["explained"]]
    if unexplained:
        print(f"unexplained: {unexplained}", file=sys.stderr)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
