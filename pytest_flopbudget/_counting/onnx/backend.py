"""Counting an ONNX model: load without weights, bind input dims, infer shapes, walk, attribute parameters.

The pipeline is load (weights never read) -> bind input dims -> strict shape inference with data propagation on a
light copy -> fill the shapes inference left open -> walk (`walk.py`). Every node that has compute but no
formula, or whose shapes stay unknown, is a skipped-op entry with its reason; nothing counts as zero silently.
Neither this module nor any module it imports imports torch, and onnx is imported only when a model is counted.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from math import prod
from pathlib import Path
from typing import Any

from pytest_flopbudget._counting.onnx.consts import ConstFolder
from pytest_flopbudget._counting.onnx.functions import spell_out_function_defaults
from pytest_flopbudget._counting.onnx.graph import NodeInfo, all_nodes, index_nodes, topological_order
from pytest_flopbudget._counting.onnx.inputs import bind_inputs
from pytest_flopbudget._counting.onnx.load import load_model, opset_versions
from pytest_flopbudget._counting.onnx.names import ModulePaths, module_of_parameter, text
from pytest_flopbudget._counting.onnx.shapes import Scope, complete_shapes, constant_tensors, infer, light_model
from pytest_flopbudget._counting.onnx.traffic import CONVENTION, reason_not_measured, tensor_bytes
from pytest_flopbudget._counting.onnx.validate import check_structure
from pytest_flopbudget._counting.onnx.walk import Walker
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, PARAM_BYTES, PARAMS, Metric
from pytest_flopbudget._report import MAX_COUNT, LayerCost, Report, conventions_with

#: Initializer element types that hold indices or shapes, never weights.
NON_PARAMETER_TYPES = {7, 8, 9, 13}  # INT64, STRING, BOOL, UINT64
#: The largest count a report carries (`_check_bounded`): the bound `Report.from_dict` reads back (a count beyond
#: it could not become a baseline), and far inside float range, so its percentages and prefixed figures format.


def count_onnx(
    model: Any, inputs: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None
) -> Report:
    """Count one forward pass of an ONNX model given as a path or an `onnx.ModelProto`; `dims` sizes the graph's
    symbolic dims by name (`batch`, `sequence`)."""
    try:
        import onnx
    except ImportError:
        raise CountingError(
            "counting an ONNX model needs the onnx package: pip install 'pytest-flopbudget[onnx]'"
        ) from None
    proto, label = load_model(model)
    try:
        with _cyclic_gc_paused():
            return _count(onnx, proto, label, inputs, dims)
    except CountingError:
        raise
    except RecursionError:
        raise CountingError(f"{label}: the model's subgraphs are nested too deeply to walk") from None
    except Exception as exc:  # a malformed model must give one line, not a traceback
        text = " ".join(str(exc).split())[:200]
        raise CountingError(
            f"{label}: the model could not be counted ({type(exc).__name__}: {text}); check it with "
            f"onnx.checker.check_model and re-export it"
        ) from None


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Counting allocates a few objects per node and no reference cycles; without the pause, the collector's full
    passes over an ever larger heap make a 100,000-node count grow faster than linearly."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _count(
    onnx: Any,
    proto: Any,
    label: str,
    inputs: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int] | None = None,
) -> Report:
    graph = proto.graph
    _check_initializers(graph, label)
    check_structure(onnx, proto, label)
    opsets = opset_versions(proto)
    initializer_names = {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
    graph_inputs = [vi for vi in graph.input if vi.name not in initializer_names]
    shapes = bind_inputs(graph_inputs, inputs, label, dims)
    light = light_model(proto, shapes)
    if len(light.functions):
        light = onnx.inliner.inline_local_functions(light)
    nodes = index_nodes(light.graph)
    order = topological_order(nodes, label)
    if order is not None:
        _reorder(light.graph, order)
        nodes = index_nodes(light.graph)
    every_node = list(all_nodes(nodes))
    undeclared = sorted({info.domain for info in every_node} - set(opsets))
    for domain in undeclared:  # so that inference skips these nodes instead of failing on them
        _declare_domain(light, domain)
    inferred = _infer_with_fallbacks(light, label, opsets)
    nodes = _with_inferred_subgraphs(nodes, inferred.graph)

    names = ModulePaths(m for m in (module_of_parameter(n) for n in initializer_names) if m)
    walker = Walker(light, label, opsets, set(undeclared), initializer_names, names, constant_tensors(proto))
    scope = Scope(inferred.graph, initializers=graph.initializer)
    folder = ConstFolder(inferred.graph, scope.dims, walker.consts, nodes=nodes)
    complete_shapes(nodes, light, scope, folder)
    tally = Tally()
    walker.walk(nodes, scope, folder, tally)

    unsized = {
        BYTES: walker.unsized,
        PARAM_BYTES: _attribute_parameters(graph, every_node, initializer_names, walker, tally.layers),
    }
    report = Report(
        **tally.report_fields(),
        training=False,
        backend="onnx",
        model=Path(label).name if not label.startswith("<") else (text(graph.name) or "model"),
        inputs=[_describe_input(onnx, vi, shapes) for vi in graph_inputs],
        versions=_versions(onnx, proto),
    )
    _check_bounded(report, label)
    _measure_memory(report, unsized)
    return _valid_text(report)


def _measure_memory(report: Report, unsized: dict[Metric, str | None]) -> None:
    """Mark `bytes` and `param-bytes` measured, each unless a size was unknown (`unsized[metric]`, the reason) or
    its total is beyond what a report holds: then its figures are dropped and its convention says why, so a budget
    on it fails as not measured, never passes on a low figure. Peak memory is never measured for ONNX."""
    for metric in (BYTES, PARAM_BYTES):
        if unsized[metric] is None and metric.of_report(report) > MAX_COUNT:
            unsized[metric] = "its total is beyond what a report can hold (10^30 bytes)"
    measured = frozenset(metric for metric, reason in unsized.items() if reason is None)
    report.optional_metrics = measured
    report.conventions = conventions_with(measured)
    if BYTES in measured:
        report.conventions[BYTES] = CONVENTION
    for metric, reason in unsized.items():
        if reason is None:
            continue
        report.conventions[metric] = reason_not_measured(reason)
        for figures in (report.forward, report.backward, *report.layers.values()):
            figures.values.pop(metric, None)
        for layer in report.layers.values():
            for op in layer.ops.values():
                op.values.pop(metric, None)


def _check_bounded(report: Report, label: str) -> None:
    """Counts are exact integers, but one beyond `MAX_COUNT` is refused with one line: it could not be read back
    as a baseline, and beyond float range its percentages and prefixed figures (`1.2 GFLOPs`) cannot be formatted.
    Every per-layer and per-op figure is at most its total, so checking the totals bounds the whole report."""
    for metric, value in (("FLOPs", report.flops), ("MACs", report.macs), ("parameters", report.params)):
        if value > MAX_COUNT:
            digits = len(str(value)) if value < 10**4000 else "more than 4,000"
            raise CountingError(
                f"{label}: the model counts to a number of {metric} with {digits} digits, beyond what a report can "
                f"hold (at most 10^30); a tensor's dimensions multiply to an impossible size: check the input "
                f"sizes and the shapes in the model"
            )


def _valid_text(report: Report) -> Report:
    """Every name in the report as valid text (`names.text`), so its JSON encodes and reads back unchanged.

    Names mostly arrive decoded already; this pass also catches those that went through other steps
    (`ast.literal_eval` of metadata can produce lone surrogates)."""
    layers: dict[str, LayerCost] = {}
    for path, cost in report.layers.items():
        cost.ops = {text(name): op for name, op in cost.ops.items()}
        cost.skipped = {text(name): calls for name, calls in cost.skipped.items()}
        key = text(path)
        if key in layers:
            layers[key].merge(cost)
        else:
            layers[key] = cost
    report.layers = layers
    for op in [*report.skipped_ops.values()]:
        op.layers = [text(p) for p in op.layers]
        op.reason = text(op.reason)
    report.skipped_ops = {text(name): op for name, op in report.skipped_ops.items()}
    for est in report.estimated_ops.values():
        est.layers = [text(p) for p in est.layers]
        est.rule = text(est.rule)
    report.estimated_ops = {text(name): op for name, op in report.estimated_ops.items()}
    report.model = text(report.model)
    report.versions = {text(k): text(v) for k, v in report.versions.items()}
    return report


def _declare_domain(model: Any, domain: str | bytes) -> None:
    """Append `domain` at version 1 to the opset imports; a domain that is not valid UTF-8 comes back from
    protobuf as bytes, which cannot be assigned to a string field, so the entry is written as wire bytes."""
    raw = domain if isinstance(domain, bytes) else domain.encode("utf-8", "surrogatepass")
    length, prefix = len(raw), bytearray()
    while True:  # protobuf varint
        prefix.append((length & 0x7F) | (0x80 if length > 0x7F else 0))
        length >>= 7
        if not length:
            break
    model.opset_import.add().MergeFromString(b"\x0a" + bytes(prefix) + raw + b"\x10\x01")


def _infer_with_fallbacks(light: Any, label: str, opsets: dict[str, int]) -> Any:
    """Strict shape inference, retried after each repair that changes the model.

    Repairs, applied cumulatively: spell out the schema defaults of ops with a function body (onnx's body
    inference does not apply them: MeanVarianceNormalization at opset >= 13 without `axes` fails), then drop stale
    value_info that exporters sometimes leave behind. Inference stays strict throughout: a real shape error still
    fails, with the error of the most repaired model (the one that names the real problem).
    """
    try:
        return infer(light, label)
    except CountingError as exc:
        error = exc
    repairs: tuple[Callable[[], bool], ...] = (
        lambda: spell_out_function_defaults(light.graph, opsets),
        lambda: _drop_value_info(light.graph),
    )
    for repair in repairs:
        if not repair():
            continue
        try:
            return infer(light, label)
        except CountingError as exc:
            error = exc
    raise error


def _drop_value_info(graph: Any) -> bool:
    if not len(graph.value_info):
        return False
    graph.ClearField("value_info")
    return True


def _with_inferred_subgraphs(nodes: list[NodeInfo], inferred: Any) -> list[NodeInfo]:
    """Inference keeps the nodes and their order; only subgraphs gain value_info, so only those are re-read."""
    if len(inferred.node) != len(nodes):
        return index_nodes(inferred)
    return [NodeInfo(inferred.node[i]) if info.subgraphs else info for i, info in enumerate(nodes)]


def _reorder(graph: Any, order: list[int]) -> None:
    nodes = [graph.node[i] for i in order]
    copies = []
    for node in nodes:
        copy = type(node)()
        copy.CopyFrom(node)
        copies.append(copy)
    graph.ClearField("node")
    graph.node.extend(copies)


def _check_initializers(graph: Any, label: str) -> None:
    for init in graph.initializer:
        if any(d < 0 for d in init.dims):
            raise CountingError(
                f"{label}: initializer '{init.name}' has a negative dimension {list(init.dims)}; the model is "
                f"corrupt: re-export it"
            )


def _attribute_parameters(
    graph: Any, every_node: list[NodeInfo], initializer_names: set[str], walker: Walker, layers: dict[str, LayerCost]
) -> str | None:
    """Charge each weight and its bytes to its module; returns why `param-bytes` cannot be measured (a weight
    whose element type has no fixed size), None when it can.

    A parameter is an initializer read by some node that is neither integer index/shape data (int64, bool), nor
    a 0-d scalar constant, nor a batch norm's running mean or variance (buffers in the framework, not
    parameters). Its module is the one its name gives (`layer1.0.conv1.weight`), else its first reader's module.
    Its bytes are its numel at its data type's size, from `dims` and `data_type` (the data is never read; a sparse
    initializer counts as its dense size, as its parameters do); an initializer read by several nodes (tied) counts
    once. Constant nodes are not parameters, so their bytes are not parameter bytes either.
    """
    uses: dict[str, list[tuple[NodeInfo, int]]] = {}
    for info in every_node:
        for index, name in enumerate(info.inputs):
            if name in initializer_names:
                uses.setdefault(name, []).append((info, index))
    tensors = [(t.name, t.data_type, t.dims) for t in graph.initializer]
    tensors += [(s.values.name, s.values.data_type, s.dims) for s in graph.sparse_initializer]
    unsized: str | None = None
    for name, data_type, dims in tensors:
        readers = uses.get(name)
        if not readers or data_type in NON_PARAMETER_TYPES or len(dims) == 0:
            continue
        if all(info.op_type == "BatchNormalization" and index in (3, 4) for info, index in readers):
            continue
        size = prod(int(d) for d in dims)
        module = module_of_parameter(name)
        if module is None:
            module = walker.path(readers[0][0])
        layer = layers.setdefault(module, LayerCost())
        layer.add(PARAMS, size)
        size_in_bytes = tensor_bytes((int(d) for d in dims), data_type)
        if size_in_bytes is None:
            unsized = unsized or f"the element type of initializer '{text(name)}' has no fixed size"
        else:
            layer.add(PARAM_BYTES, size_in_bytes)
    return unsized


def _describe_input(onnx: Any, vi: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    described: dict[str, Any] = {"name": text(vi.name)}
    if vi.name in shapes:
        described["shape"] = list(shapes[vi.name])
    if vi.type.WhichOneof("value") == "tensor_type":
        try:
            described["dtype"] = str(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        except (KeyError, ValueError, TypeError):
            described["dtype"] = str(vi.type.tensor_type.elem_type)
    return described


def _versions(onnx: Any, proto: Any) -> dict[str, str]:
    from pytest_flopbudget._version import __version__

    opsets = ",".join(f"{text(entry.domain) or 'ai.onnx'}:{entry.version}" for entry in proto.opset_import)
    producer = f"{text(proto.producer_name)} {text(proto.producer_version)}".strip()
    versions = {"onnx": onnx.__version__, "opsets": opsets, "pytest-flopbudget": __version__}
    if producer:
        versions["producer"] = producer
    return versions
