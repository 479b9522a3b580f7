"""(domain, op_type) -> formula table for the ONNX backend, versioned by opset.

Keys use the empty string for the default `ai.onnx` domain, as the ONNX protobuf does. Every formula takes a
`NodeContext` and returns a `Cost` built from the shared shape math in `formulas`, so a `Conv` node and an
`aten.convolution` call cost the same. Ops that only move, view or describe data are registered as free; any other
op has no entry: the backend counts it through its schema's function body when it has one (SwiGLU,
RotaryEmbedding, ...) and reports it as skipped otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import floor, prod
from typing import Callable, Union

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.einsum import einsum_cost
from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.onnx.names import text
from pytest_flopbudget._counting.onnx.node import NodeContext, UnknownShape
from pytest_flopbudget._counting.onnx.shapes import broadcast
from pytest_flopbudget._counting.onnx.validate import check_conv_groups
from pytest_flopbudget._counting.registry import FormulaRegistry

ONNX_OPS: FormulaRegistry[tuple[str, str]] = FormulaRegistry("onnx")
MS = "com.microsoft"

OnnxFormula = Callable[[NodeContext], Cost]
#: A resize scale: exact (out/in as a fraction) or as given in a `scales` input.
Scale = Union[Fraction, float]


def register(*ops: str, domain: str = "", since: int = 0) -> Callable[[OnnxFormula], OnnxFormula]:
    return ONNX_OPS.register(*((domain, op) for op in ops), since=since)


def register_free(*ops: str, domain: str = "") -> None:
    ONNX_OPS.register_free(*((domain, op) for op in ops))


# --- matrix products -------------------------------------------------------------------------------------------


def matmul_shapes(a: Sequence[int], b: Sequence[int]) -> Cost:
    """numpy matmul: [..., M, K] @ [..., K, N]; a 1-D operand is a vector (its M or N is 1)."""
    if len(a) == 1:
        a = (1, a[0])
    if len(b) == 1:
        b = (b[0], 1)
    batch = prod(broadcast(a[:-2], b[:-2]))
    return f.matmul(a[-2], b[-1], a[-1], batch)


#: ONNX element types of integer tensors (TensorProto: UINT8, INT8, UINT16, INT16, INT32, INT64, UINT32, UINT64,
#: UINT4, INT4): an op with MACs whose output has one of them does integer arithmetic (`integer_arithmetic`).
INTEGER_TYPES = frozenset({2, 3, 4, 5, 6, 7, 12, 13, 21, 22})


def integer_arithmetic(cost: Cost, output_type: int) -> Cost:
    """The walk's rule for every priced node: MatMul, Gemm or Einsum on integer tensors (its output's element type
    is an integer one) counts integer ops, not FLOPs (`formulas.on_integers`); an unknown type (0) stays FLOPs."""
    return f.on_integers(cost, output_type in INTEGER_TYPES)


@register("MatMul")
def _matmul(n: NodeContext) -> Cost:
    return matmul_shapes(n.input_shape(0), n.input_shape(1))


@register("MatMulInteger")
def _matmul_integer(n: NodeContext) -> Cost:
    """Integer ops: the zero-point subtraction is part of the integer accumulation and not counted."""
    return matmul_shapes(n.input_shape(0), n.input_shape(1)).in_integers()


@register("QLinearMatMul")
def _qlinear_matmul(n: NodeContext) -> Cost:
    """Inputs a, a_scale, a_zp, b, ...: the integer product (integer ops) plus requantising every output element
    (FLOPs: a scale multiply, as QuantizeLinear)."""
    product = matmul_shapes(n.input_shape(0), n.input_shape(3)).in_integers()
    return product + f.elementwise(n.output_numel(), f.QUANTIZE)


@register("Gemm")
def _gemm(n: NodeContext) -> Cost:
    """Y = alpha * A' @ B' + beta * C, with A' = A^T when transA (then A is [K, M])."""
    a, b = n.input_shape(0), n.input_shape(1)
    m, k = (a[1], a[0]) if n.attr("transA", 0) else (a[0], a[1])
    cols = b[0] if n.attr("transB", 0) else b[1]
    return f.gemm(m, cols, k, has_addend=n.has_input(2), alpha=n.attr("alpha", 1.0), beta=n.attr("beta", 1.0))


@register("Einsum")
def _einsum(n: NodeContext) -> Cost:
    shapes = [n.input_shape(i) for i in range(len(n.node.input)) if n.has_input(i)]
    return einsum_cost(str(n.attr("equation", "")), shapes)


# --- convolution -----------------------------------------------------------------------------------------------


def _conv(x: Sequence[int], w: Sequence[int], y: Sequence[int], groups: int, bias: bool) -> Cost:
    """X [N, C, *in], W [M, C/group, *kernel], Y [N, M, *out]."""
    check_conv_groups(groups, x[1], w[0])
    return f.conv(y[0], w[1] * groups, w[0], y[2:], w[2:], groups, bias)


@register("Conv")
def _conv_node(n: NodeContext) -> Cost:
    return _conv(n.input_shape(0), n.input_shape(1), n.output_shape(), n.attr("group", 1), n.has_input(2))


@register("ConvInteger")
def _conv_integer(n: NodeContext) -> Cost:
    """Integer ops, like MatMulInteger."""
    return _conv(n.input_shape(0), n.input_shape(1), n.output_shape(), n.attr("group", 1), False).in_integers()


@register("QLinearConv")
def _qlinear_conv(n: NodeContext) -> Cost:
    """Inputs x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B: conv and int32 bias add (integer ops), then
    requantisation (FLOPs)."""
    y = n.output_shape()
    cost = _conv(n.input_shape(0), n.input_shape(3), y, n.attr("group", 1), n.has_input(8)).in_integers()
    return cost + f.elementwise(prod(y), f.QUANTIZE)


@register("ConvTranspose")
def _conv_transpose(n: NodeContext) -> Cost:
    """W is [C, M/group, *kernel]: the cost follows the input's spatial size (see formulas.conv_transpose)."""
    x, w, y = n.input_shape(0), n.input_shape(1), n.output_shape()
    groups = n.attr("group", 1)
    check_conv_groups(groups, x[1], w[1] * groups if isinstance(groups, int) else w[1])
    return f.conv_transpose(x[0], x[1], w[1] * groups, x[2:], w[2:], groups, n.has_input(2), y[2:])


# --- attention -------------------------------------------------------------------------------------------------


@register("Attention", since=23)
def _attention(n: NodeContext) -> Cost:
    """ONNX Attention: Q [B, Hq, L, E] or [B, L, Hq*E]; K/V [B, Hkv, S, E] or 3-D; past K/V prepend S_past.

    Dense rule as in the PyTorch backend: a causal mask does not reduce the count; a given attn_mask adds one
    FLOP per score; softcap adds three (divide, tanh, multiply).
    """
    q, k, v = n.input_shape(0), n.input_shape(1), n.input_shape(2)
    if len(q) == 3:
        q_heads, kv_heads = n.attr("q_num_heads", 0), n.attr("kv_num_heads", 0)
        if not q_heads or not kv_heads:
            raise UnknownShape("3-D Attention without q_num_heads/kv_num_heads", "malformed node")
        batch, q_len, head = q[0], q[1], q[2] // q_heads
        kv_len, v_head = k[1], v[2] // kv_heads
    else:
        batch, q_heads, q_len, head = q
        kv_len, v_head = k[2], v[3]
    past = n.maybe_input_shape(4)
    if past is not None:
        kv_len += past[2]
    cost = f.attention(batch * q_heads, q_len, kv_len, head, v_head, masked=n.has_input(3))
    if n.attr("softcap", 0.0):
        cost = cost + f.elementwise(batch * q_heads * q_len * kv_len, 3)
    return cost


@register("Attention", domain=MS)
def _ms_attention(n: NodeContext) -> Cost:
    """com.microsoft Attention: the fused q/k/v input projection, then attention (no output projection).

    input [B, S, D_in], weights [D_in, D_q + D_k + D_v], bias [D_q + D_k + D_v], past [2, B, H, S_past, E].
    """
    x, w = n.input_shape(0), n.input_shape(1)
    heads = n.attr("num_heads", 0)
    if not heads:
        raise UnknownShape("com.microsoft Attention without num_heads", "malformed node")
    batch, seq = x[0], x[1]
    sizes = n.attr("qkv_hidden_sizes") or [w[1] // 3] * 3
    q_hidden, _, v_hidden = sizes
    projection = f.linear(batch * seq, w[0], w[1], n.has_input(2))
    past = n.maybe_input_shape(4)
    kv_len = seq + (past[3] if past is not None else 0)
    masked = n.has_input(3) or n.has_input(5)
    return projection + f.attention(batch * heads, seq, kv_len, q_hidden // heads, v_hidden // heads, masked)


@register("MultiHeadAttention", domain=MS)
def _ms_mha(n: NodeContext) -> Cost:
    """com.microsoft MultiHeadAttention: projections are outside; bias adds (if given) plus attention.

    query [B, S, D]; key/value [B, L, D] or [B, H, L, E]; packed forms: query [B, S, H, 3, E] (no key) or key
    [B, L, H, 2, E] (no value); past_key [B, H, L_past, E] prepends L_past.
    """
    q = n.input_shape(0)
    heads = n.attr("num_heads", 0)
    if not heads:
        raise UnknownShape("MultiHeadAttention without num_heads", "malformed node")
    batch, q_len = q[0], q[1]
    if len(q) == 5:  # packed q/k/v
        head = v_head = q[4]
        kv_len = q_len
    else:
        head = q[2] // heads
        k = n.input_shape(1)
        if len(k) == 5:  # packed k/v
            kv_len, v_head = k[1], k[4]
        elif len(k) == 4:
            kv_len, v_head = k[2], n.input_shape(2)[3]
        else:
            kv_len, v_head = k[1], n.input_shape(2)[2] // heads
    past = n.maybe_input_shape(6)
    if past is not None and len(q) != 5 and len(n.input_shape(1)) == 3:
        kv_len += past[2]
    cost = f.attention(batch * heads, q_len, kv_len, head, v_head, masked=n.has_input(4) or n.has_input(5))
    if n.has_input(3):  # bias for q, k and v
        cost = cost + f.elementwise(batch * heads * (q_len * head + kv_len * (head + v_head)))
    return cost


@register("GroupQueryAttention", domain=MS)
def _ms_gqa(n: NodeContext) -> Cost:
    """com.microsoft GroupQueryAttention: per query head over the whole (past + new) key length.

    The total key length is read from the present_key output [B, H_kv, L_total, E]; packed q/k/v when key is absent.
    """
    q = n.input_shape(0)
    heads, kv_heads = n.attr("num_heads", 0), n.attr("kv_num_heads", 0)
    if not heads or not kv_heads:
        raise UnknownShape("GroupQueryAttention without num_heads/kv_num_heads", "malformed node")
    head = q[2] // (heads + 2 * kv_heads) if not n.has_input(1) else q[2] // heads
    kv_len = n.output_shape(1)[2] if n.has_output(1) else (n.input_shape(1)[1] if n.has_input(1) else q[1])
    cost = f.attention(q[0] * heads, q[1], kv_len, head, head, masked=False)
    if n.attr("softcap", 0.0):
        cost = cost + f.elementwise(q[0] * heads * q[1] * kv_len, 3)
    return cost


# --- recurrent -------------------------------------------------------------------------------------------------

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@register("RNN", "GRU", "LSTM")
def _rnn(n: NodeContext) -> Cost:
    """X [T, B, I] (layout 1: [B, T, I]); W [dirs, gates*H, I]: one cell per step and direction.

    LSTM peepholes (input P) add a multiply and an add per gate that uses them (3 gates) per hidden unit.
    `sequence_lens` is a runtime value: every sequence is counted at the full length T (an upper bound).
    """
    x, w = n.input_shape(0), n.input_shape(1)
    steps, batch = (x[1], x[0]) if n.attr("layout", 0) else (x[0], x[1])
    gates = _GATES[n.op_type]
    dirs = w[0]
    hidden = n.attr("hidden_size") or w[1] // gates
    cell = f.rnn_cell(batch, x[2], hidden, gates, n.has_input(3))
    if n.op_type == "LSTM" and n.has_input(7):
        cell = cell + f.elementwise(batch * hidden * 3 * 2)
    return cell.times(steps * dirs)


# --- normalisation ---------------------------------------------------------------------------------------------


@register("BatchNormalization", since=1)
def _batch_norm_v1(n: NodeContext) -> Cost:
    """Opsets 1-6: `is_test=0` (the default) means batch statistics are computed."""
    return f.norm(n.input_numel(0), stats=not n.attr("is_test", 0), weight=True, bias=True)


@register("BatchNormalization", since=7)
def _batch_norm_v7(n: NodeContext) -> Cost:
    """Opsets 7-13: training is implied by asking for the running-statistics outputs."""
    return f.norm(n.input_numel(0), stats=len(n.node.output) > 1, weight=True, bias=True)


@register("BatchNormalization", since=14)
def _batch_norm_v14(n: NodeContext) -> Cost:
    return f.norm(n.input_numel(0), stats=bool(n.attr("training_mode", 0)), weight=True, bias=True)


@register("LayerNormalization")
def _layer_norm(n: NodeContext) -> Cost:
    return f.norm(n.input_numel(0), stats=True, weight=True, bias=n.has_input(2))


@register("GroupNormalization", "InstanceNormalization")
def _group_norm(n: NodeContext) -> Cost:
    return f.norm(n.input_numel(0), stats=True, weight=True, bias=True)


@register("MeanVarianceNormalization")
def _mvn(n: NodeContext) -> Cost:
    return f.norm(n.input_numel(0), stats=True, weight=False, bias=False)


@register("LpNormalization")
def _lp_norm(n: NodeContext) -> Cost:
    """|x|^p summed along the axis (2 per element), then each element divided by the norm (1)."""
    return f.elementwise(n.input_numel(0), 3)


@register("RMSNormalization", since=23)
def _rms_norm(n: NodeContext) -> Cost:
    return f.rms_norm(n.input_numel(0), weight=True)


@register("SimplifiedLayerNormalization")
@register("SimplifiedLayerNormalization", domain=MS)
def _simplified_layer_norm(n: NodeContext) -> Cost:
    return f.rms_norm(n.input_numel(0), weight=n.has_input(1))


@register("SkipLayerNormalization", domain=MS)
def _skip_layer_norm(n: NodeContext) -> Cost:
    """input + skip (+ bias), then layer norm with gamma (and beta): inputs input, skip, gamma, beta, bias."""
    numel = n.input_numel(0)
    adds = f.elementwise(numel * (1 + int(n.has_input(4))))
    return adds + f.norm(numel, stats=True, weight=True, bias=n.has_input(3))


@register("SkipSimplifiedLayerNormalization", domain=MS)
def _skip_rms_norm(n: NodeContext) -> Cost:
    """input + skip (+ bias, input 3), then RMS norm with gamma."""
    numel = n.input_numel(0)
    return f.elementwise(numel * (1 + int(n.has_input(3)))) + f.rms_norm(numel, weight=True)


@register("EmbedLayerNormalization", domain=MS)
def _embed_layer_norm(n: NodeContext) -> Cost:
    """Word + position (+ segment) embedding gathers are free; their sum and the layer norm are counted."""
    numel = n.output_numel(0)
    sums = 1 + int(n.has_input(4))
    return f.elementwise(numel * sums) + f.norm(numel, stats=True, weight=True, bias=True)


# --- softmax, pooling, resampling ------------------------------------------------------------------------------


@register("Softmax", "LogSoftmax")
def _softmax(n: NodeContext) -> Cost:
    return f.softmax(n.input_numel(0))


@register("Hardmax")
def _hardmax(n: NodeContext) -> Cost:
    """An argmax along the axis: one compare per input element."""
    return f.reduction(n.input_numel(0))


@register("TopK")
def _topk(n: NodeContext) -> Cost:
    """The k largest (smallest) along `axis`: one comparison per input element, as ArgMax; with sorted=1 (the
    default) the k picks of each row are sorted too, k * ceil(log2 k) (aten.topk's rule, formulas.py)."""
    x = n.input_shape(0)
    if not x:
        return f.ZERO
    axis = int(n.attr("axis", -1)) % len(x)
    ks = n.const_ints(1) if n.has_input(1) else [int(n.attr("k", 0))]
    k = ks[0] if ks else n.output_shape(0)[axis]
    rows = prod(x) // x[axis] if x[axis] else 0
    cost = f.selection(prod(x))
    return cost + f.comparison_sort(rows, k) if n.attr("sorted", 1) else cost


@register("Unique")
def _unique(n: NodeContext) -> Cost:
    """Distinct values: sort all n elements and compare neighbours (n * ceil(log2 n) + n); along `axis`, r slices
    sorted as rows (numel * ceil(log2 r) + numel), as aten._unique2 / aten.unique_dim."""
    x = n.input_shape(0)
    total = prod(x)
    axis = n.attr("axis")
    if axis is None or not x:
        return f.comparison_sort(1, total) + f.elementwise(total)
    return f.elementwise(total * f.log2_ceil(x[int(axis) % len(x)]) + total)


@register("LRN")
def _lrn(n: NodeContext) -> Cost:
    """X [N, C, *spatial]: see `formulas.local_response_norm` (square, truncated channel-window sum, 4 to apply)."""
    x = n.input_shape(0)
    return f.local_response_norm(x[0] * prod(x[2:]), x[1], int(n.attr("size", 1)))


@register("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(n: NodeContext) -> Cost:
    """scores [N, C, d1..dk], labels [N, d1..dk]: log_softmax over C, then 1 per label (formulas.cross_entropy).

    The optional `log_prob` output is the log_softmax already computed; it adds nothing.
    """
    return f.cross_entropy(n.input_numel(0), n.input_numel(1))


@register("NegativeLogLikelihoodLoss")
def _nll_loss(n: NodeContext) -> Cost:
    """input [N, C, d1..dk] (log-probabilities), target [N, d1..dk]: 1 FLOP per target, the README's NLL rule.

    The op has a function body (a gather, the negation, weights, masking and the reduction, 2-4 ops per target
    depending on the attributes); the explicit rule keeps it equal to PyTorch's `nll_loss` and to the NLL step
    of SoftmaxCrossEntropyLoss.
    """
    return f.elementwise(n.input_numel(1))


@register("MaxPool", "AveragePool", "LpPool")
def _pool(n: NodeContext) -> Cost:
    return f.pool(n.output_numel(0), prod(n.attr("kernel_shape", [1])))


@register("QLinearAveragePool", domain=MS)
def _qlinear_pool(n: NodeContext) -> Cost:
    return f.pool(n.output_numel(0), prod(n.attr("kernel_shape", [1]))) + f.elementwise(n.output_numel(), f.QUANTIZE)


@register("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(n: NodeContext) -> Cost:
    """Every input element is read into its channel's sum or maximum (torch's adaptive pool to 1x1 agrees)."""
    return f.reduction(n.input_numel(0))


@register("QLinearGlobalAveragePool", domain=MS)
def _qlinear_global_pool(n: NodeContext) -> Cost:
    return f.reduction(n.input_numel(0)) + f.elementwise(n.output_numel(), f.QUANTIZE)


_RESIZE_MODES = {
    "nearest": "nearest",
    "linear": "linear",
    "bilinear": "linear",
    "trilinear": "linear",
    "cubic": "cubic",
    "bicubic": "cubic",
}


def _resampled_dims(x: Sequence[int], y: Sequence[int]) -> int:
    """Axes that are interpolated: the spatial axes of an [N, C, ...] tensor, else every axis that changes size."""
    return max(len(_resampled_axes(x, y)), 1)


def _resampled_axes(x: Sequence[int], y: Sequence[int]) -> list[int]:
    """The axes `_resampled_dims` counts, by index (may be empty when no axis changes size)."""
    if len(x) >= 3 and tuple(x[:2]) == tuple(y[:2]):
        return list(range(2, len(x)))
    return [i for i, (a, b) in enumerate(zip(x, y)) if a != b]


@register("Resize", "Upsample")
def _resize(n: NodeContext) -> Cost:
    mode = _RESIZE_MODES.get(str(n.attr("mode", "nearest")).lower(), "linear")
    x, y = n.input_shape(0), n.output_shape()
    if mode != "nearest" and n.attr("antialias", 0) and any(b < a for a, b in zip(x, y)):
        return f.elementwise(prod(y), 2 * antialias_taps(x, y, mode, _resize_scales(n, x, y)) - 1)
    return f.interpolate(prod(y), mode, _resampled_dims(x, y))


def _resize_scales(n: NodeContext, x: Sequence[int], y: Sequence[int]) -> list[Scale]:
    """The scale per axis the antialias filter is stretched by, as the ONNX reference implementation takes it.

    A constant `scales` input gives them directly (the output size is floor(in * scale), so out/in can be
    smaller: 5 * 0.5 -> 2); `sizes` gives size/in, with one common scale under keep_aspect_ratio_policy
    not_larger (the smallest) or not_smaller (the largest); otherwise out/in, read from the shapes.
    """
    rank = len(x)
    axes = [a + rank if a < 0 else a for a in (n.attr("axes") or range(rank))]
    scales: list[Scale] = [Fraction(b, a) if a else Fraction(1) for a, b in zip(x, y)]
    given = n.const_floats(2) if n.has_input(2) else None
    if given and len(given) == len(axes):
        for axis, value in zip(axes, given):
            scales[axis] = value
        return scales
    sizes = n.const_ints(3) if n.has_input(3) else None
    if sizes and len(sizes) == len(axes):
        ratios = [Fraction(size, x[axis]) if x[axis] else Fraction(1) for axis, size in zip(axes, sizes)]
        policy = str(n.attr("keep_aspect_ratio_policy", "stretch"))
        if policy in ("not_larger", "not_smaller"):
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(ratios)
        for axis, ratio in zip(axes, ratios):
            scales[axis] = ratio
    return scales


def antialias_taps(x: Sequence[int], y: Sequence[int], mode: str, scales: Sequence[Scale] | None = None) -> int:
    """Input elements weighed per output element by an antialiased linear or cubic Resize (opset 18+).

    When an axis is downscaled by s < 1 the filter is stretched by 1/s. ONNX's reference implementation takes
    2 - 2*(floor(-1/s) + 1) taps for the triangle (linear) filter and 2 - 2*(floor(-2/s) + 1) for the cubic one,
    i.e. 2*ceil(1/s) and 2*ceil(2/s): at s = 1/2, 4 instead of 2 and 8 instead of 4. An axis that is not
    downscaled keeps the plain 2 or 4. The N-d filter is the outer product of the per-axis ones, so the taps
    multiply, and each output costs one multiply per tap and one fewer adds (2*taps - 1), as plain bilinear
    does (7 = 2*4 - 1). `scales` default to out/in per axis.
    """
    reach = 1 if mode == "linear" else 2
    if scales is None:
        scales = [Fraction(b, a) if a else Fraction(1) for a, b in zip(x, y)]
    taps = 1
    for axis in _resampled_axes(x, y) or [0]:
        scale = scales[axis]
        taps *= -2 * floor(-reach / scale) if 0 < scale < 1 else 2 * reach
    return taps


@register("GridSample")
def _grid_sample(n: NodeContext) -> Cost:
    mode = _RESIZE_MODES.get(str(n.attr("mode", "linear")).lower(), "linear")
    y = n.output_shape()
    return f.interpolate(prod(y), mode, len(y) - 2)


# --- elementwise, reductions, quantisation ---------------------------------------------------------------------

#: One FLOP per output element: arithmetic, comparisons, logic, activations and transcendental functions.
ELEMENTWISE_OPS = (
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Neg",
    "Abs",
    "Reciprocal",
    "Sqrt",
    "Exp",
    "Log",
    "Erf",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Tanh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Elu",
    "Selu",
    "Celu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Softsign",
    "Gelu",
    "Mish",
    "Swish",
    "ThresholdedRelu",
    "Shrink",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Not",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseNot",
    "IsNaN",
    "IsInf",
    "Bernoulli",
)
#: Microsoft activations (one FLOP per element) and fused bias + activation kernels (two: the add and the act).
MS_ELEMENTWISE_OPS = ("Gelu", "FastGelu", "QuickGelu", "BiasAdd", "BiasGelu", "BiasFastGelu")
#: Quantised elementwise ops: the operation plus requantising the output.
MS_QLINEAR_ELEMENTWISE = ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")
REDUCE_OPS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "CumSum",
)


@register(*ELEMENTWISE_OPS)
def _elementwise(n: NodeContext) -> Cost:
    return f.elementwise(n.output_numel(0))


@register("FastGelu", "BiasGelu", "BiasFastGelu", "Gelu", "QuickGelu", domain=MS)
def _ms_activation(n: NodeContext) -> Cost:
    """com.microsoft activations; the fused forms add a bias first (1 more FLOP per element)."""
    return f.elementwise(n.output_numel(0), 1 + int(n.op_type.startswith("Bias") or n.has_input(1)))


@register("BiasAdd", domain=MS)
def _ms_bias_add(n: NodeContext) -> Cost:
    """input + bias + skip: two adds per element."""
    return f.elementwise(n.output_numel(0), 2)


@register(*MS_QLINEAR_ELEMENTWISE, domain=MS)
def _ms_qlinear_elementwise(n: NodeContext) -> Cost:
    per = f.SOFTMAX if n.op_type == "QLinearSoftmax" else f.ELEMENTWISE
    return f.elementwise(n.output_numel(0), per + f.QUANTIZE)


@register("Sum", "Max", "Min")
def _variadic(n: NodeContext) -> Cost:
    return f.variadic(n.output_numel(0), n.input_count)


@register("Mean")
def _mean(n: NodeContext) -> Cost:
    """n - 1 adds and one divide per output element."""
    return f.variadic(n.output_numel(0), n.input_count) + f.elementwise(n.output_numel(0))


#: Reductions whose result is more than the reduction step: with an empty set of axes and
#: `noop_with_empty_axes=1` they still apply their elementwise part (ReduceL2 of one element is |x|).
COMPOSITE_REDUCE_OPS = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
#: The opset from which each reduction takes `axes` as an input and has `noop_with_empty_axes`.
_AXES_INPUT_SINCE = {"ReduceSum": 13}


@register(*REDUCE_OPS)
def _reduce(n: NodeContext) -> Cost:
    """1 per input element; with `noop_with_empty_axes=1` and no axes (absent or empty) nothing is reduced.

    Then ReduceSum/Mean/Max/Min/Prod are the identity (free), and the composite reductions keep their
    elementwise step at 1 FLOP per element (the same price as when they reduce).
    """
    if _reduces_nothing(n):
        return f.elementwise(n.input_numel(0)) if n.op_type in COMPOSITE_REDUCE_OPS else f.ZERO
    return f.reduction(n.input_numel(0))


def _reduces_nothing(n: NodeContext) -> bool:
    if not n.op_type.startswith("Reduce") or n.version < _AXES_INPUT_SINCE.get(n.op_type, 18):
        return False  # ArgMax/ArgMin/CumSum, and the older opsets whose axes were an attribute
    if not n.attr("noop_with_empty_axes", 0):
        return False
    if not n.has_input(1):
        return True
    axes = n.const_ints(1)
    if axes is not None:
        return not axes
    shape = n.input_shape(1)  # a runtime axes tensor: empty only when its shape says so
    return prod(shape) == 0


@register("Clip")
def _clip(n: NodeContext) -> Cost:
    """1 per element for a clamp; without min and max (inputs from opset 11, attributes before) the identity."""
    if n.version < 11:
        bounded = n.attr("min") is not None or n.attr("max") is not None
    else:
        bounded = n.has_input(1) or n.has_input(2)
    return f.elementwise(n.output_numel(0)) if bounded else f.ZERO


@register("QuantizeLinear", "DequantizeLinear")
@register("QuantizeLinear", "DequantizeLinear", domain=MS)
def _quantize(n: NodeContext) -> Cost:
    return f.elementwise(n.input_numel(0), f.QUANTIZE)


@register("DynamicQuantizeLinear")
def _dynamic_quantize(n: NodeContext) -> Cost:
    """A min and a max over the input (one compare each per element), then quantising every element."""
    numel = n.input_numel(0)
    return f.reduction(numel, 2) + f.elementwise(numel, f.QUANTIZE)


@register("MatMulIntegerToFloat", domain=MS)
def _ms_matmul_integer_to_float(n: NodeContext) -> Cost:
    """Integer product (integer ops), then scaling to float (1 per output) and the optional bias (input 6): FLOPs."""
    out = n.output_numel(0)
    product = matmul_shapes(n.input_shape(0), n.input_shape(1)).in_integers()
    return product + f.elementwise(out * (1 + int(n.has_input(6))))


@register("DynamicQuantizeMatMul", domain=MS)
def _ms_dynamic_quantize_matmul(n: NodeContext) -> Cost:
    """Quantise A on the fly (see DynamicQuantizeLinear), integer product (integer ops), scale to float, optional
    bias (4)."""
    a = n.input_shape(0)
    out = n.output_numel(0)
    quantize = f.reduction(prod(a), 2) + f.elementwise(prod(a), f.QUANTIZE)
    product = matmul_shapes(a, n.input_shape(1)).in_integers()
    return quantize + product + f.elementwise(out * (1 + int(n.has_input(4))))


@register("MatMulNBits", domain=MS)
def _ms_matmul_nbits(n: NodeContext) -> Cost:
    """A [..., K] times an N x K block-quantised weight (attributes K, N); dequantising B is per weight element.

    The weight dequantisation (2 FLOPs per weight element) is counted once per call; the optional bias (input 5)
    adds one FLOP per output element.
    """
    a = n.input_shape(0)
    k, cols = n.attr("K", a[-1]), n.attr("N", 0) or n.output_shape()[-1]
    rows = prod(a[:-1])
    cost = f.matmul(rows, cols, k) + f.elementwise(k * cols, f.QUANTIZE)
    return cost + f.elementwise(rows * cols) if n.has_input(5) else cost


@register("FusedMatMul", domain=MS)
def _ms_fused_matmul(n: NodeContext) -> Cost:
    """MatMul with optional transposes of either operand and an alpha scale (1 per output when not 1)."""
    a, b = list(n.input_shape(0)), list(n.input_shape(1))
    if n.attr("transA", 0) and len(a) >= 2:
        a[-1], a[-2] = a[-2], a[-1]
    if n.attr("transB", 0) and len(b) >= 2:
        b[-1], b[-2] = b[-2], b[-1]
    cost = matmul_shapes(a, b)
    return cost + f.elementwise(n.output_numel(0)) if n.attr("alpha", 1.0) != 1.0 else cost


@register("Dropout", since=1)
def _dropout_v1(n: NodeContext) -> Cost:
    """Before opset 12 dropout trains unless `is_test` (opset < 7) is set; from 7 on it is the identity."""
    training = n.version < 7 and not n.attr("is_test", 0)
    return f.elementwise(n.output_numel(0)) if training else f.ZERO


@register("Dropout", since=12)
def _dropout_v12(n: NodeContext) -> Cost:
    """Inference (training_mode absent or constant false) is the identity; training multiplies by the mask."""
    mode = n.const_ints(2) if n.has_input(2) else [0]
    if mode is not None and not any(mode):
        return f.ZERO
    return f.elementwise(n.output_numel(0))


@register("ScatterElements", "ScatterND")
def _scatter(n: NodeContext) -> Cost:
    """A plain scatter is a copy; with reduction add/mul/max/min every update element is combined."""
    if str(n.attr("reduction", "none")) == "none":
        return f.ZERO
    return f.elementwise(n.input_numel(2))


# --- free ops --------------------------------------------------------------------------------------------------

#: Views, copies, casts, shape queries, indexing, padding and constant generation: no arithmetic. Kept in one
#: explicit list so that an op with compute is never treated as free by accident.
FREE_OPS = (
    "Identity",
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Size",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "GatherND",
    "Scatter",
    "Expand",
    "Tile",
    "Pad",
    "Cast",
    "CastLike",
    "Where",
    "Trilu",
    "Range",
    "NonZero",
    "OneHot",
    "DepthToSpace",
    "SpaceToDepth",
    "Compress",
    "ReverseSequence",
    "EyeLike",
    "CenterCropPad",
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "SequenceConstruct",
    "SequenceAt",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SplitToSequence",
    "ConcatFromSequence",
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
)
register_free(*FREE_OPS)
register_free("QLinearConcat", "Trilu", "GatherBlockQuantized", domain=MS)


def op_label(domain: str, op_type: str) -> str:
    """How an op is named in reports: `Conv` for the default domain, `com.microsoft.Attention` otherwise."""
    return text(op_type) if domain in ("", "ai.onnx") else f"{text(domain)}.{text(op_type)}"
