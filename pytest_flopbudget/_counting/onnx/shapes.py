"""Shapes for every value of an ONNX graph, from `onnx.shape_inference` in strict mode with data propagation.

Inference runs on a *light* copy of the model: large initializers are replaced by typed graph inputs, so a model
with 100 MB of embedded weights is not serialised through the C++ inferencer twice, and external data is never
needed. Small initializers keep their values because shape inference reads them (Reshape targets, Resize scales).

Gaps of the ONNX inferencer are filled here rather than counted as zero:
- data propagation stops at some ops (an integer `Div` computing a `Slice` end, as in rotary embeddings exported
  by TorchScript), and com.microsoft operators (ONNX Runtime's fused Attention, SkipLayerNormalization, ...) have
  no schema in `onnx`; `complete_shapes` re-infers such nodes one by one, in one linear pass, with the constant
  inputs our own folder evaluates and with output-shape rules for the com.microsoft ops.
- `Loop` and `Scan` bodies are inferred with their loop-carried shapes cleared, because a carried value may change
  shape between iterations; `infer_body` re-infers a body with the actual input shapes, and the backend checks
  that the carried shapes really are loop-invariant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting.onnx.graph import NodeInfo, free_names, normalize_domain
from pytest_flopbudget._counting.onnx.names import text
from pytest_flopbudget._counting.onnx.node import Dims, NodeContext, UnknownShape, attribute_value, known_dims
from pytest_flopbudget._errors import CountingError

#: Initializers with at most this many elements keep their data in the light model (shape inference may read them).
SMALL_INITIALIZER = 1024


def tensor_dims(type_proto: Any) -> Dims:
    """Dims of a tensor type (None entries for symbolic or missing dims); None for a missing shape or non-tensor."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return None
    tt = type_proto.tensor_type
    if not tt.HasField("shape"):
        return None
    dims: list[int | None] = []
    for d in tt.shape.dim:
        value = d.dim_value  # one protobuf access for the common case; HasField only to tell 0 from unset
        dims.append(value if value or d.HasField("dim_value") else None)
    return tuple(dims)


def is_external(tensor: Any) -> bool:
    return bool(tensor.data_location == 1)  # TensorProto.EXTERNAL


def light_model(model: Any, input_shapes: dict[str, tuple[int, ...]]) -> Any:
    """A copy of `model` fit for shape inference: bound input shapes, big initializers turned into typed inputs."""
    import onnx

    src = model.graph
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph = light.graph
    graph.name = text(src.name)
    graph.node.extend(src.node)
    input_names = set()
    for vi in src.input:
        input_names.add(vi.name)
        copy = graph.input.add()
        copy.CopyFrom(vi)
        if vi.name in input_shapes:
            _set_dims(copy.type, input_shapes[vi.name])
    for init in src.initializer:
        if not is_external(init) and prod(init.dims) <= SMALL_INITIALIZER:
            graph.initializer.append(init)
        elif init.name not in input_names:
            graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    for sparse in src.sparse_initializer:
        if sparse.values.name not in input_names:
            graph.input.append(
                onnx.helper.make_tensor_value_info(sparse.values.name, sparse.values.data_type, list(sparse.dims))
            )
    graph.output.extend(src.output)
    graph.value_info.extend(src.value_info)
    return light


def _set_dims(type_proto: Any, dims: Sequence[int]) -> None:
    shape = type_proto.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = d


def infer(model: Any, label: str) -> Any:
    """Strict shape inference with data propagation; a failure is one CountingError naming the node."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=True, data_prop=True)
    except Exception as exc:  # InferenceError, ValidationError or a RuntimeError from C++
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:297] + "..."
        raise CountingError(
            f"{label}: ONNX shape inference failed: {text}; check the sizes given as inputs= and that the model "
            f"passes onnx.checker.check_model"
        ) from None


def complete_shapes(nodes: list[NodeInfo], model: Any, scope: Scope, folder: Any) -> None:
    """Fill the shapes the C++ inferencer left open, in one topological pass, into `scope`.

    A node whose outputs are not fully known but whose inputs are gets inferred again on its own: default-domain
    ops through `onnx.shape_inference.infer_node_outputs` with the constant inputs `folder` can evaluate (the
    ONNX data propagation stops at ops such as integer Div), com.microsoft ops through `MS_SHAPE_RULES`.
    """
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    for info in nodes:
        if info.subgraphs or all(scope.known(name) for name in info.outputs if name):
            continue
        inputs = [name for name in info.inputs if name]
        if not all(scope.known(name) for name in inputs):
            continue
        node, domain = info.node, info.domain
        found = _infer_standard(node, inputs, scope, folder, model, opsets) if domain == "" else {}
        # ONNX Runtime also registers some contrib ops (SimplifiedLayerNormalization) in the default domain
        if not found and domain in ("", "com.microsoft") and node.op_type in MS_SHAPE_RULES:
            found = _infer_microsoft(node, scope)
        outputs = set(info.outputs)
        for name, type_proto in found.items():
            dims = tensor_dims(type_proto)
            if name in outputs and dims is not None and all(d is not None and d >= 0 for d in dims):
                scope.set_type(name, type_proto)


def _infer_standard(
    node: Any, inputs: list[str], scope: Scope, folder: Any, model: Any, opsets: dict[str, int]
) -> dict[str, Any]:
    import onnx

    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get("", 1), "")
    except Exception:  # SchemaError: an op this onnx does not know
        return {}
    types = {name: scope.type_of(name) for name in inputs}
    data = {}
    for name in inputs:
        t = types[name]
        elem = t.tensor_type.elem_type if t.WhichOneof("value") == "tensor_type" else 0
        if elem not in (6, 7):  # INT32, INT64: shape-like data
            continue
        shape = known_dims(tensor_dims(t))
        values = folder.ints(name)
        if values is not None and shape is not None and prod(shape) == len(values):
            data[name] = onnx.helper.make_tensor(name, elem, list(shape), values)
    try:
        return onnx.shape_inference.infer_node_outputs(
            schema,
            node,
            types,
            data,
            opset_imports=list(model.opset_import),
            ir_version=model.ir_version,
        )
    except Exception:  # inconsistent shapes: leave the outputs unknown, the node is skipped
        return {}


def _infer_microsoft(node: Any, scope: Scope) -> dict[str, Any]:
    import onnx

    in_dims = [scope.dims(n) for n in node.input]
    try:
        shapes = MS_SHAPE_RULES[node.op_type](NodeContext(node, 1, in_dims, []))
    except (UnknownShape, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return {}
    found = {}
    for index, dims in enumerate(shapes):
        if index < len(node.output) and node.output[index]:
            found[node.output[index]] = onnx.helper.make_tensor_type_proto(_elem_type(scope, node, index), list(dims))
    return found


def _elem_type(scope: Scope, node: Any, index: int) -> int:
    """Output element type: float ops keep input 0's type; dequantising ops take the scale's type."""
    source = {"MatMulIntegerToFloat": 2, "DequantizeLinear": 1, "QuantizeLinear": 2}.get(node.op_type, 0)
    if source >= len(node.input) or scope.type_of(node.input[source]) is None:
        source = 0
    t = scope.type_of(node.input[source]) if node.input else None
    if t is not None and t.WhichOneof("value") == "tensor_type" and t.tensor_type.elem_type:
        return int(t.tensor_type.elem_type)
    return 2 if node.op_type == "QuantizeLinear" else 1  # UINT8 / FLOAT


def _same(index: int = 0) -> Callable[[NodeContext], list[tuple[int, ...]]]:
    return lambda n: [n.input_shape(index)]


def _ms_attention_shape(n: NodeContext) -> list[tuple[int, ...]]:
    x, w = n.input_shape(0), n.input_shape(1)
    sizes = n.attr("qkv_hidden_sizes") or [w[1] // 3] * 3
    return [(x[0], x[1], sizes[2])]


def _ms_mha_shape(n: NodeContext) -> list[tuple[int, ...]]:
    q = n.input_shape(0)
    heads = n.attr("num_heads")
    if len(q) == 5:
        return [(q[0], q[1], q[2] * q[4])]
    v = n.input_shape(2) if n.has_input(2) else None
    if v is None:
        k = n.input_shape(1)
        return [(q[0], q[1], k[2] * k[4] if len(k) == 5 else q[2])]
    return [(q[0], q[1], v[1] * v[3] if len(v) == 4 else v[2])] if heads else []


def _ms_gqa_shape(n: NodeContext) -> list[tuple[int, ...]]:
    q = n.input_shape(0)
    heads, kv_heads = n.attr("num_heads"), n.attr("kv_num_heads")
    head = q[2] // (heads + 2 * kv_heads) if not n.has_input(1) else q[2] // heads
    return [(q[0], q[1], heads * head)]


def broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy broadcasting of two batch shapes (the shapes were already validated by shape inference)."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def _ms_matmul_shape(n: NodeContext) -> list[tuple[int, ...]]:
    a, b = list(n.input_shape(0)), list(n.input_shape(1))
    if n.attr("transA", 0):
        a[-1], a[-2] = a[-2], a[-1]
    if n.attr("transB", 0):
        b[-1], b[-2] = b[-2], b[-1]
    batch = broadcast(a[:-2], b[:-2])
    return [(*batch, a[-2], b[-1])]


def _ms_nbits_shape(n: NodeContext) -> list[tuple[int, ...]]:
    a = n.input_shape(0)
    return [(*a[:-1], n.attr("N"))]


def _ms_embed_shape(n: NodeContext) -> list[tuple[int, ...]]:
    ids, word = n.input_shape(0), n.input_shape(2)
    return [(ids[0], ids[1], word[1]), (ids[0],)]


def _ms_skip_norm_shape(n: NodeContext) -> list[tuple[int, ...]]:
    x = n.input_shape(0)
    stats = (*x[:-1], 1)
    return [x, stats, stats, x]


def _ms_pool_shape(n: NodeContext) -> list[tuple[int, ...]]:
    """QLinearAveragePool: the usual pooling arithmetic over the spatial axes (floor, or ceil with ceil_mode)."""
    x = n.input_shape(0)
    kernel = n.attr("kernel_shape")
    spatial = len(kernel)
    strides = n.attr("strides") or [1] * spatial
    pads = n.attr("pads") or [0] * (2 * spatial)
    ceil = bool(n.attr("ceil_mode", 0))
    out = []
    for i, size in enumerate(x[2:]):
        span = size + pads[i] + pads[i + spatial] - kernel[i]
        out.append((-(-span // strides[i]) if ceil else span // strides[i]) + 1)
    return [(x[0], x[1], *out)]


def _ms_global_pool_shape(n: NodeContext) -> list[tuple[int, ...]]:
    x = n.input_shape(0)
    channels_last = bool(n.attr("channels_last", 0))
    if channels_last:
        return [(x[0], *(1 for _ in x[1:-1]), x[-1])]
    return [(x[0], x[1], *(1 for _ in x[2:]))]


def _ms_broadcast_shape(first: int, second: int) -> Callable[[NodeContext], list[tuple[int, ...]]]:
    def rule(n: NodeContext) -> list[tuple[int, ...]]:
        return [broadcast(n.input_shape(first), n.input_shape(second))]

    return rule


#: Output shapes of the com.microsoft ops the ONNX inferencer does not know.
MS_SHAPE_RULES: dict[str, Callable[[NodeContext], list[tuple[int, ...]]]] = {
    "Attention": _ms_attention_shape,
    "MultiHeadAttention": _ms_mha_shape,
    "GroupQueryAttention": _ms_gqa_shape,
    "SkipLayerNormalization": _ms_skip_norm_shape,
    "SkipSimplifiedLayerNormalization": _ms_skip_norm_shape,
    "SimplifiedLayerNormalization": _same(),
    "EmbedLayerNormalization": _ms_embed_shape,
    "FastGelu": _same(),
    "BiasGelu": _same(),
    "BiasFastGelu": _same(),
    "Gelu": _same(),
    "QuickGelu": _same(),
    "BiasAdd": _same(),
    "QLinearSigmoid": _same(),
    "QLinearLeakyRelu": _same(),
    "QLinearSoftmax": _same(),
    "QLinearAveragePool": _ms_pool_shape,
    "QLinearGlobalAveragePool": _ms_global_pool_shape,
    "QLinearAdd": _ms_broadcast_shape(0, 3),
    "QLinearMul": _ms_broadcast_shape(0, 3),
    "QuantizeLinear": _same(),
    "DequantizeLinear": _same(),
    "FusedMatMul": _ms_matmul_shape,
    "MatMulIntegerToFloat": _ms_matmul_shape,
    "DynamicQuantizeMatMul": _ms_matmul_shape,
    "MatMulNBits": _ms_nbits_shape,
}


# --- scopes ----------------------------------------------------------------------------------------------------


class Scope:
    """Value name -> type for one graph, falling back to the enclosing graph's scope (outer-scope references).

    The one shape store of a walk: `complete_shapes` writes the shapes it fills in here, and dims are computed
    from the protobuf once per name (protobuf field access is the slow part of counting a large graph).
    """

    __slots__ = ("_cache", "inits", "parent", "types")

    def __init__(self, graph: Any, parent: Scope | None = None, initializers: Iterable[Any] = ()) -> None:
        self.types: dict[str, Any] = {}
        for vi in (*graph.input, *graph.output, *graph.value_info):
            self.types[vi.name] = vi.type
        self.inits: dict[str, Any] = {t.name: t for t in graph.initializer}
        self.inits.update((t.name, t) for t in initializers)
        self.parent = parent
        self._cache: dict[str, Dims] = {}

    def dims(self, name: str) -> Dims:
        if not name:
            return None
        try:
            return self._cache[name]
        except KeyError:
            pass
        if name in self.inits:
            found: Dims = tuple(int(d) for d in self.inits[name].dims)
        elif name in self.types:
            found = tensor_dims(self.types[name])
        elif self.parent is not None:
            found = self.parent.dims(name)
        else:
            found = None
        self._cache[name] = found
        return found

    def known(self, name: str) -> bool:
        """Every dim known (a sequence or optional value counts as known: it has no shape we would use)."""
        dims = self.dims(name)
        if dims is not None:
            return all(d is not None and d >= 0 for d in dims)
        found = self.type_of(name)
        return found is not None and found.WhichOneof("value") not in (None, "tensor_type")

    def type_of(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.types:
                return scope.types[name]
            if name in scope.inits:
                from onnx import helper

                init = scope.inits[name]
                return helper.make_tensor_type_proto(init.data_type, list(init.dims))
            scope = scope.parent
        return None

    def elem_type(self, name: str) -> int:
        """The element type of a tensor value; 0 when unknown or not a tensor."""
        found = self.type_of(name) if name else None
        if found is None or found.WhichOneof("value") != "tensor_type":
            return 0
        return int(found.tensor_type.elem_type)

    def set_type(self, name: str, type_proto: Any) -> None:
        self.types[name] = type_proto
        self._cache.pop(name, None)


def infer_body(
    body: Any,
    input_dims: Sequence[Dims],
    input_elems: Sequence[int],
    outer: Scope,
    model: Any,
    consts: dict[str, Any],
    label: str,
) -> Any:
    """Re-infer a Loop/Scan body as a standalone model with concrete input shapes and outer references typed.

    `input_elems` are the element types of the values the body inputs receive (0 when unknown): a body input
    declared without a type takes its value's type, so strict inference does not trip over a guessed float.
    """
    import onnx

    standalone = onnx.ModelProto()
    standalone.ir_version = model.ir_version
    standalone.opset_import.extend(model.opset_import)
    graph = standalone.graph
    graph.name = body.name
    graph.node.extend(body.node)
    graph.initializer.extend(body.initializer)
    for vi, dims, elem in zip(body.input, input_dims, input_elems):
        copy = graph.input.add()
        copy.CopyFrom(vi)
        bound = known_dims(dims)
        if bound is not None:
            if copy.type.WhichOneof("value") != "tensor_type" or not copy.type.tensor_type.elem_type:
                copy.type.tensor_type.elem_type = elem or 1
            _set_dims(copy.type, bound)
    graph.output.extend(body.output)
    known = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for name in sorted(free_names(body) - known):
        if name in consts:
            graph.initializer.append(consts[name])
            continue
        outer_type = outer.type_of(name)
        dims = known_dims(outer.dims(name))
        vi = graph.input.add()
        vi.name = name
        if outer_type is not None:
            vi.type.CopyFrom(outer_type)
        if dims is not None:
            if vi.type.WhichOneof("value") != "tensor_type":
                vi.type.tensor_type.elem_type = 1
            _set_dims(vi.type, dims)
    for output in graph.output:  # declared body outputs often carry stale symbolic dims from the exporter
        if output.type.WhichOneof("value") == "tensor_type":
            output.type.tensor_type.ClearField("shape")
    return infer(standalone, label).graph


def constant_tensors(model: Any) -> dict[str, Any]:
    """Small initializers and Constant-node values by name: what a body needs to infer shapes from data."""
    import onnx

    found: dict[str, Any] = {}
    for init in model.graph.initializer:
        if not is_external(init) and prod(init.dims) <= SMALL_INITIALIZER:
            found[init.name] = init
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            tensor = _constant_node_tensor(node)
            if tensor is not None and prod(tensor.dims) <= SMALL_INITIALIZER:
                copy = onnx.TensorProto()
                copy.CopyFrom(tensor)
                copy.name = node.output[0]
                found[node.output[0]] = copy
    return found


def _constant_node_tensor(node: Any) -> Any:
    import onnx

    for attr in node.attribute:
        value = attribute_value(attr)
        if attr.name == "value" and attr.type == 4:
            return value
        if attr.name == "value_int":
            return onnx.helper.make_tensor(node.output[0], onnx.TensorProto.INT64, [], [value])
        if attr.name == "value_ints":
            return onnx.helper.make_tensor(node.output[0], onnx.TensorProto.INT64, [len(value)], value)
        if attr.name == "value_float":
            return onnx.helper.make_tensor(node.output[0], onnx.TensorProto.FLOAT, [], [value])
        if attr.name == "value_floats":
            return onnx.helper.make_tensor(node.output[0], onnx.TensorProto.FLOAT, [len(value)], value)
    return None
