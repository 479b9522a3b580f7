"""ATen op -> formula table for the PyTorch backend.

Keys are `namespace.op` without the overload and without the in-place underscore (`aten.add_.Tensor` and
`aten.add.out` are both `aten.add`). Each formula receives the op's arguments bound to their schema names (with
defaults filled in) and the op's output, and reads only shapes and arguments, never values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FormulaRegistry

TORCH_OPS: FormulaRegistry[str] = FormulaRegistry("torch")
register = TORCH_OPS.register

Args = Mapping[str, Any]


def shape(tensor: Any) -> tuple[int, ...]:
    """Concrete sizes; an unbacked symbolic size (data-dependent) raises, and the op is reported as skipped."""
    return tuple(int(s) for s in tensor.shape)


def numel(tensor: Any) -> int:
    return prod(shape(tensor))


def first_tensor(value: Any) -> Any:
    return value[0] if isinstance(value, (tuple, list)) else value


def out_numel(out: Any) -> int:
    return numel(first_tensor(out))


def integer_output(out: Any) -> bool:
    """Whether the op's (first) output is an integer tensor, quantized ones included: an op with MACs that writes
    one did integer arithmetic (`formulas.on_integers`)."""
    dtype = getattr(first_tensor(out), "dtype", None)
    return dtype is not None and not (dtype.is_floating_point or dtype.is_complex) and str(dtype) != "torch.bool"


# --- matrix products -------------------------------------------------------------------------------------------


@register("aten.mm", "aten._int_mm")
def _mm(a: Args, out: Any) -> Cost:
    """[M, K] @ [K, N]; `torch._int_mm` (int8 x int8 -> int32) is the same product in integers (`integer_output`)."""
    m, k = shape(a["self"])
    n = shape(a["mat2"])[-1]
    return f.matmul(m, n, k)


@register("aten.addmm")
def _addmm(a: Args, out: Any) -> Cost:
    """bias + [M, K] @ [K, N]: the bias add is 1 FLOP per output element."""
    m, k = shape(a["mat1"])
    n = shape(a["mat2"])[-1]
    return f.matmul(m, n, k) + _scaled_add(m * n, a)


def _scaled_add(elements: int, a: Args) -> Cost:
    """beta*self + alpha*product: the add, plus one multiply for each scale that is not 1."""
    beta, alpha = a.get("beta", 1), a.get("alpha", 1)
    if beta == 0:
        return f.elementwise(elements * int(alpha != 1))
    return f.elementwise(elements * (1 + int(beta != 1) + int(alpha != 1)))


@register("aten.bmm")
def _bmm(a: Args, out: Any) -> Cost:
    """[B, M, K] @ [B, K, N]"""
    b, m, k = shape(a["self"])
    n = shape(a["mat2"])[-1]
    return f.matmul(m, n, k, b)


@register("aten.baddbmm")
def _baddbmm(a: Args, out: Any) -> Cost:
    b, m, k = shape(a["batch1"])
    n = shape(a["batch2"])[-1]
    return f.matmul(m, n, k, b) + _scaled_add(b * m * n, a)


@register("aten.addbmm")
def _addbmm(a: Args, out: Any) -> Cost:
    """sum over b of batch1[b] @ batch2[b], added to self: the b products are summed into M*N outputs."""
    b, m, k = shape(a["batch1"])
    n = shape(a["batch2"])[-1]
    return f.matmul(m, n, k, b) + _scaled_add(m * n, a)


@register("aten.mv")
def _mv(a: Args, out: Any) -> Cost:
    m, k = shape(a["self"])
    return f.matmul(m, 1, k)


@register("aten.addmv")
def _addmv(a: Args, out: Any) -> Cost:
    m, k = shape(a["mat"])
    return f.matmul(m, 1, k) + _scaled_add(m, a)


@register("aten.dot", "aten.vdot")
def _dot(a: Args, out: Any) -> Cost:
    return f.matmul(1, 1, numel(a["self"]))


@register("aten._grouped_mm")
def _grouped_mm(a: Args, out: Any) -> Cost:
    """Grouped GEMM (`torch.nn.functional.grouped_mm`, used by mixture-of-experts layers): one product per group.

    A 2-D operand is jagged along one dimension, cut into groups by `offs`; the MACs are counted from the shapes,
    never from `offs` (which is data):

    - [S, K] x [G, K, N] (rows per expert): every one of the S rows meets one [K, N] weight: S*K*N MACs. Rows
      beyond offs[-1] (padding, or the expert-parallel sentinel rows) are counted too.
    - [G, M, K] x [G, K, N] (no offs): G independent products, like bmm: G*M*K*N.
    - [G, M, K] x [K, N] (N cut into groups): group g multiplies a[g] by its slice of N columns: M*K*N in total.
    - [M, K] x [K, N] (K cut into groups, output [G, M, N]): each group contracts its slice of K: M*K*N in total.

    So MACs = a[-2] * a[-1] * b[-1], times G when both operands are 3-D; a bias is 1 FLOP per output element.
    """
    x, w = shape(a["self"]), shape(a["mat2"])
    groups = x[0] if len(x) == 3 and len(w) == 3 else 1
    cost = f.matmul(x[-2], w[-1], x[-1], groups)
    if a.get("bias") is not None:
        cost = cost + f.elementwise(out_numel(out))
    return cost


@register("aten.linear")
def _linear(a: Args, out: Any) -> Cost:
    """Only seen when linear is not decomposed (e.g. some export paths): rows x in -> out features."""
    x, w = shape(a["input"]), shape(a["weight"])
    rows = prod(x[:-1])
    return f.linear(rows, x[-1], w[0], a.get("bias") is not None)


# --- convolution -----------------------------------------------------------------------------------------------


def _conv_cost(x: Sequence[int], w: Sequence[int], y: Sequence[int], transposed: bool, groups: int) -> Cost:
    """MACs of one convolution, forward or transposed, from input, weight and output shapes."""
    if transposed:
        # weight: [C_in, C_out / groups, *kernel]
        return f.conv_transpose(x[0], x[1], w[1] * groups, x[2:], w[2:], groups)
    # weight: [C_out, C_in / groups, *kernel]
    return f.conv(y[0], x[1], w[0], y[2:], w[2:], groups)


def _unbatched(x: Sequence[int], w: Sequence[int]) -> Sequence[int]:
    """Convolutions accept unbatched input ([C, *spatial]); cost them as a batch of one."""
    return (1, *x) if len(x) == len(w) - 1 else x


@register("aten.convolution", "aten._convolution", "aten.convolution_overrideable", "aten.mkldnn_convolution")
def _convolution(a: Args, out: Any) -> Cost:
    w = shape(a["weight"])
    x = _unbatched(shape(a["input"] if "input" in a else a["self"]), w)
    y = _unbatched(shape(first_tensor(out)), w)
    transposed = bool(a.get("transposed", False))
    cost = _conv_cost(x, w, y, transposed, int(a.get("groups", 1)))
    if a.get("bias") is not None:
        cost = cost + f.elementwise(prod(y))
    return cost


@register("aten.convolution_backward")
def _convolution_backward(a: Args, out: Any) -> Cost:
    """Input gradient and weight gradient each cost one forward convolution; the bias gradient is a sum."""
    w = shape(a["weight"])
    x = _unbatched(shape(a["input"]), w)
    gy = _unbatched(shape(a["grad_output"]), w)
    forward = _conv_cost(x, w, gy, bool(a["transposed"]), int(a["groups"]))
    mask = list(a["output_mask"])
    cost = forward.times(int(mask[0]) + int(mask[1]))
    if mask[2]:
        cost = cost + f.reduction(prod(gy))
    return cost


# --- attention -------------------------------------------------------------------------------------------------


def _sdpa(q: Sequence[int], k: Sequence[int], v: Sequence[int], masked: bool, heads_first: bool = True) -> Cost:
    """q: [..., L, E] (heads_first) or [B, L, H, E]; one dense attention per query head."""
    if heads_first:
        batch_heads, q_len, head_dim = prod(q[:-2]), q[-2], q[-1]
        kv_len, v_dim = k[-2], v[-1]
    else:
        batch_heads, q_len, head_dim = q[0] * q[2], q[1], q[3]
        kv_len, v_dim = k[1], v[-1]
    return f.attention(batch_heads, q_len, kv_len, head_dim, v_dim, masked)


def _sdpa_backward(q: Sequence[int], k: Sequence[int], v: Sequence[int], heads_first: bool = True) -> Cost:
    if heads_first:
        return f.attention_backward(prod(q[:-2]), q[-2], k[-2], q[-1], v[-1])
    return f.attention_backward(q[0] * q[2], q[1], k[1], q[3], v[-1])


@register(
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_cudnn_attention",
    "aten._scaled_dot_product_fused_attention_overrideable",
)
def _sdpa_fused(a: Args, out: Any) -> Cost:
    masked = a.get("attn_mask") is not None or a.get("attn_bias") is not None
    return _sdpa(shape(a["query"]), shape(a["key"]), shape(a["value"]), masked)


@register("aten._scaled_dot_product_efficient_attention")
def _sdpa_efficient(a: Args, out: Any) -> Cost:
    return _sdpa(shape(a["query"]), shape(a["key"]), shape(a["value"]), a.get("attn_bias") is not None)


@register("aten._flash_attention_forward", "aten._efficient_attention_forward")
def _flash_forward(a: Args, out: Any) -> Cost:
    """These kernels take [B, L, H, E]."""
    masked = a.get("bias") is not None
    return _sdpa(shape(a["query"]), shape(a["key"]), shape(a["value"]), masked, heads_first=False)


@register(
    "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    "aten._scaled_dot_product_flash_attention_backward",
    "aten._scaled_dot_product_efficient_attention_backward",
    "aten._scaled_dot_product_cudnn_attention_backward",
    "aten._scaled_dot_product_fused_attention_overrideable_backward",
)
def _sdpa_fused_backward(a: Args, out: Any) -> Cost:
    return _sdpa_backward(shape(a["query"]), shape(a["key"]), shape(a["value"]))


@register("aten._flash_attention_backward", "aten._efficient_attention_backward")
def _flash_backward(a: Args, out: Any) -> Cost:
    return _sdpa_backward(shape(a["query"]), shape(a["key"]), shape(a["value"]), heads_first=False)


@register("aten._native_multi_head_attention")
def _native_mha(a: Args, out: Any) -> Cost:
    """nn.MultiheadAttention's fused inference kernel: in-projection, attention, out-projection.

    Costed as exactly the ops the unfused path runs (linear with bias, attention, linear with bias), so eval mode
    under no_grad counts the same as training-mode attention.
    """
    q, k = shape(a["query"]), shape(a["key"])
    embed, heads = int(a["embed_dim"]), int(a["num_head"])
    batch, q_len, kv_len = q[0], q[1], k[1]
    bias = a.get("qkv_bias") is not None
    if a["query"] is a["key"] and a["key"] is a["value"]:
        in_proj = f.linear(batch * q_len, embed, 3 * embed, bias)
    else:
        in_proj = f.linear(batch * q_len, embed, embed, bias) + f.linear(batch * kv_len, embed, embed, bias).times(2)
    masked = a.get("mask") is not None
    if a.get("need_weights", True):
        # explicit path: q scaled per element, two bmm, softmax; weights averaged over heads
        bh, hd, scores = batch * heads, embed // heads, batch * heads * q_len * kv_len
        attention = (
            f.matmul(q_len, kv_len, hd, bh)
            + f.matmul(q_len, hd, kv_len, bh)
            + f.elementwise(batch * q_len * embed)
            + f.softmax(scores)
            + f.elementwise(scores * int(masked))
        )
        if a.get("average_attn_weights", True):
            attention = attention + f.reduction(scores)
    else:
        attention = f.attention(batch * heads, q_len, kv_len, embed // heads, masked=masked)
    out_proj = f.linear(batch * q_len, embed, embed, a.get("proj_bias") is not None)
    return in_proj + attention + out_proj


# --- normalisation ---------------------------------------------------------------------------------------------


def _has(a: Args, name: str) -> bool:
    return a.get(name) is not None


@register(
    "aten.native_batch_norm",
    "aten._native_batch_norm_legit",
    "aten.cudnn_batch_norm",
    "aten.miopen_batch_norm",
    "aten._batch_norm_with_update",
    "aten._native_batch_norm_legit_functional",
)
def _batch_norm(a: Args, out: Any) -> Cost:
    """Training mode computes batch statistics; evaluation uses the running ones."""
    stats = bool(a.get("training", True))
    return f.norm(numel(a["input"]), stats=stats, weight=_has(a, "weight"), bias=_has(a, "bias"))


@register("aten._native_batch_norm_legit_no_training", "aten._batch_norm_no_update")
def _batch_norm_eval(a: Args, out: Any) -> Cost:
    return f.norm(numel(a["input"]), stats=False, weight=_has(a, "weight"), bias=_has(a, "bias"))


@register("aten.native_layer_norm", "aten.native_group_norm")
def _layer_norm(a: Args, out: Any) -> Cost:
    return f.norm(numel(a["input"]), stats=True, weight=_has(a, "weight"), bias=_has(a, "bias"))


@register("aten._fused_rms_norm")
def _rms_norm(a: Args, out: Any) -> Cost:
    return f.rms_norm(numel(a["input"]), weight=_has(a, "weight"))


@register(
    "aten.native_batch_norm_backward",
    "aten.batch_norm_backward",
    "aten.native_layer_norm_backward",
    "aten.native_group_norm_backward",
    "aten.cudnn_batch_norm_backward",
    "aten.miopen_batch_norm_backward",
)
def _norm_backward(a: Args, out: Any) -> Cost:
    forward = f.norm(numel(a["input"]), stats=True, weight=True, bias=True)
    return forward.times(f.NORM_BACKWARD_FACTOR)


@register("aten._fused_rms_norm_backward")
def _rms_norm_backward(a: Args, out: Any) -> Cost:
    return f.rms_norm(numel(a["input"]), weight=True).times(f.NORM_BACKWARD_FACTOR)


# --- softmax ---------------------------------------------------------------------------------------------------


@register("aten._softmax", "aten._log_softmax", "aten._safe_softmax", "aten.softmax", "aten.log_softmax")
def _softmax(a: Args, out: Any) -> Cost:
    return f.softmax(numel(a["self"]))


@register("aten._softmax_backward_data", "aten._log_softmax_backward_data")
def _softmax_backward(a: Args, out: Any) -> Cost:
    return f.elementwise(numel(a["grad_output"]), f.SOFTMAX_BACKWARD)


# --- pooling ---------------------------------------------------------------------------------------------------


def _window(kernel: Sequence[int], dims: int) -> int:
    kernel = list(kernel)
    return prod(kernel * dims if len(kernel) == 1 else kernel)


def _pool_dims(name: str) -> int:
    return 1 if "1d" in name else 3 if "3d" in name else 2


def _register_pools() -> None:
    for name in (
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "max_pool1d_with_indices",
        "max_pool2d_with_indices",
        "max_pool3d_with_indices",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "mkldnn_max_pool2d",
        "mkldnn_max_pool3d",
        "quantized_max_pool2d",
    ):
        dims = _pool_dims(name)
        register(f"aten.{name}")(lambda a, out, dims=dims: f.pool(out_numel(out), _window(a["kernel_size"], dims)))
    for name in (
        "max_pool2d_with_indices_backward",
        "max_pool3d_with_indices_backward",
        "avg_pool2d_backward",
        "avg_pool3d_backward",
    ):
        dims = _pool_dims(name)
        register(f"aten.{name}")(
            lambda a, out, dims=dims: f.pool(numel(a["grad_output"]), _window(a["kernel_size"], dims))
        )
    for name in (
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool3d",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
        "adaptive_avg_pool1d",
        "adaptive_max_pool1d",
    ):
        register(f"aten.{name}")(_adaptive_pool)
    for name in (
        "_adaptive_avg_pool2d_backward",
        "_adaptive_avg_pool3d_backward",
        "adaptive_max_pool2d_backward",
        "adaptive_max_pool3d_backward",
    ):
        dims = _pool_dims(name)
        register(f"aten.{name}")(lambda a, out, dims=dims: _adaptive_pool_backward(a, dims))


def _adaptive_pool(a: Args, out: Any) -> Cost:
    x, y = shape(a["self"]), shape(first_tensor(out))
    dims = len(a["output_size"])
    return f.adaptive_pool(prod(x[:-dims]), x[-dims:], y[-dims:])


def _adaptive_pool_backward(a: Args, dims: int) -> Cost:
    x, gy = shape(a["self"]), shape(a["grad_output"])
    return f.adaptive_pool(prod(x[:-dims]), x[-dims:], gy[-dims:])


_register_pools()


# --- interpolation ---------------------------------------------------------------------------------------------


#: upsampling op -> (mode, spatial dims); the vec overloads share the key
UPSAMPLE_OPS = {
    "upsample_nearest1d": ("nearest", 1),
    "upsample_nearest2d": ("nearest", 2),
    "upsample_nearest3d": ("nearest", 3),
    "_upsample_nearest_exact1d": ("nearest", 1),
    "_upsample_nearest_exact2d": ("nearest", 2),
    "_upsample_nearest_exact3d": ("nearest", 3),
    "upsample_linear1d": ("linear", 1),
    "upsample_bilinear2d": ("linear", 2),
    "upsample_trilinear3d": ("linear", 3),
    "upsample_bicubic2d": ("cubic", 2),
    "_upsample_bilinear2d_aa": ("linear", 2),
    "_upsample_bicubic2d_aa": ("cubic", 2),
}


def _register_upsampling() -> None:
    for base, (mode, dims) in UPSAMPLE_OPS.items():
        register(f"aten.{base}")(lambda a, out, mode=mode, dims=dims: f.interpolate(out_numel(out), mode, dims))
        register(f"aten.{base}_backward")(
            lambda a, out, mode=mode, dims=dims: (
                f.interpolate(numel(a["grad_output"]), mode, dims)
                if mode != "nearest"
                else f.elementwise(numel(a["grad_output"]))
            )
        )


_register_upsampling()


# --- elementwise, reductions, indexing with arithmetic ---------------------------------------------------------

#: Ops costing ELEMENTWISE per output element: arithmetic, comparisons, activations, their backwards.
ELEMENTWISE_OPS = (
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "neg",
    "abs",
    "reciprocal",
    "pow",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "erfinv",
    "sigmoid",
    "logit",
    "relu",
    "relu6",
    "gelu",
    "silu",
    "mish",
    "elu",
    "selu",
    "celu",
    "leaky_relu",
    "hardtanh",
    "hardswish",
    "hardsigmoid",
    "softplus",
    "softshrink",
    "hardshrink",
    "threshold",
    "log_sigmoid_forward",
    "_prelu_kernel",
    "rrelu_with_noise",
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "max.other",
    "min.other",
    "sign",
    "sgn",
    "signbit",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "isnan",
    "isinf",
    "isfinite",
    "nan_to_num",
    "copysign",
    "hypot",
    "xlogy",
    "special_xlog1py",
    "heaviside",
    "lgamma",
    "digamma",
    "polygamma",
    "i0",
    "sinc",
    "deg2rad",
    "rad2deg",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "elu_backward",
    "leaky_relu_backward",
    "hardtanh_backward",
    "hardswish_backward",
    "hardsigmoid_backward",
    "mish_backward",
    "softplus_backward",
    "log_sigmoid_backward",
    "_prelu_kernel_backward",
    "logit_backward",
    "native_dropout",
    "native_dropout_backward",
    "bernoulli",
    "_masked_scale",
    "hardshrink_backward",
    "softshrink_backward",
    "rrelu_with_noise_backward",
)
#: Fused elementwise kernels: FLOPs per output element.
FUSED_ELEMENTWISE = {"addcmul": 2, "addcdiv": 2, "lerp": 2, "glu": 2, "glu_backward": 3}
#: Reductions, per input element.
REDUCTION_OPS = (
    "sum",
    "mean",
    "nansum",
    "nanmean",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "aminmax",
    "argmax",
    "argmin",
    "all",
    "any",
    "norm",
    "linalg_vector_norm",
    "logsumexp",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "count_nonzero",
    "cummax",
    "cummin",
    "_is_all_true",
    "_is_any_true",
)
VARIANCE_OPS = ("var", "std", "var_mean", "std_mean")


#: Elementwise ops whose in-place form leaves `self`'s shape as it is (the fake-tensor fast path relies on it).
SAME_SHAPE_INPLACE = frozenset(
    f"aten.{name}"
    for name in (*ELEMENTWISE_OPS, *FUSED_ELEMENTWISE, "fill", "zero", "copy", "masked_fill")
    if "." not in name and not name.endswith("_backward")
)


def _elementwise_formula(per_element: int) -> Callable[[Args, Any], Cost]:
    def formula(a: Args, out: Any) -> Cost:
        return f.elementwise(out_numel(out), per_element)

    return formula


def _reduction_formula(per_element: int) -> Callable[[Args, Any], Cost]:
    def formula(a: Args, out: Any) -> Cost:
        source = a.get("self", a.get("input"))
        return f.reduction(numel(source) if source is not None else out_numel(out), per_element)

    return formula


def _register_elementwise() -> None:
    one = _elementwise_formula(f.ELEMENTWISE)
    for name in ELEMENTWISE_OPS:
        if "." not in name:
            register(f"aten.{name}")(one)
    for name, per in FUSED_ELEMENTWISE.items():
        register(f"aten.{name}")(_elementwise_formula(per))
    reduce = _reduction_formula(f.REDUCTION)
    for name in REDUCTION_OPS:
        register(f"aten.{name}")(reduce)
    variance = _reduction_formula(f.VARIANCE)
    for name in VARIANCE_OPS:
        register(f"aten.{name}")(variance)


_register_elementwise()


@register("aten.embedding_dense_backward", "aten.embedding_backward")
def _embedding_backward(a: Args, out: Any) -> Cost:
    """The gradient rows are summed into the weight gradient: one add per gradient element."""
    return f.elementwise(numel(a["grad_output"]))


@register("aten.index_add", "aten.scatter_add", "aten.scatter_reduce", "aten.index_reduce")
def _scatter_add(a: Args, out: Any) -> Cost:
    source = a.get("source", a.get("src"))
    return f.elementwise(numel(source))


@register("aten.index_put", "aten._index_put_impl")
def _index_put(a: Args, out: Any) -> Cost:
    """A plain index_put is a copy; with accumulate=True every value is added."""
    return f.elementwise(numel(a["values"])) if a.get("accumulate") else f.ZERO


@register("aten.polar")
def _polar(a: Args, out: Any) -> Cost:
    """abs * (cos(angle) + i sin(angle)): cos, sin and two multiplies per complex output element (complex rotary
    tables: DeepSeek-V2, Llama 4)."""
    return f.elementwise(out_numel(out), 4)


@register("aten.linalg_solve_triangular")
def _solve_triangular(a: Args, out: Any) -> Cost:
    """A [*, m, m] triangular, one substitution per right-hand-side vector of m (a column of B when left, a row of B
    otherwise): m * (m - 1) / 2 multiply-accumulates and, unless unitriangular, m divides."""
    m = shape(a["self"])[-1]
    vectors = out_numel(out) // m if m else 0
    macs = vectors * (m * (m - 1) // 2)
    return Cost(2 * macs + (0 if a.get("unitriangular") else vectors * m), macs)


# --- selection, sorting, searching, histograms: comparisons, 1 FLOP each (see formulas.py) ------------------------


def _along(tensor: Any, dim: Any) -> tuple[int, int]:
    """(rows, length) of a tensor cut into independent rows along `dim` (a 0-d tensor is one row of one)."""
    dims = shape(tensor)
    if not dims:
        return 1, 1
    length = dims[int(dim) % len(dims)]
    return (prod(dims) // length if length else 0), length


def _count_of(value: Any) -> int:
    """Elements of a tensor argument; 1 for a Python scalar (the `.Scalar` overloads)."""
    return numel(value) if hasattr(value, "shape") else 1


@register("aten.sort", "aten.argsort", "aten.msort")
def _sort(a: Args, out: Any) -> Cost:
    """Rows of n along dim: n * ceil(log2 n) comparisons each (sort, argsort, msort, stable or not)."""
    return f.comparison_sort(*_along(a["self"], a.get("dim", -1) if "dim" in a else 0))


@register("aten.topk")
def _topk(a: Args, out: Any) -> Cost:
    """Select the k largest (smallest) of each row: one comparison per input element, as max; returned sorted
    (the default), the k picks of each row are sorted too: k * ceil(log2 k). So top-1 costs what argmax costs."""
    rows, _ = _along(a["self"], a["dim"])
    k = int(a["k"])
    cost = f.selection(numel(a["self"]))
    return cost + f.comparison_sort(rows, k) if a.get("sorted", True) else cost


@register("aten.kthvalue", "aten.median", "aten.nanmedian")
def _select(a: Args, out: Any) -> Cost:
    """One value by rank per row (or of all elements): one comparison per input element, as max."""
    return f.selection(numel(a["self"]))


@register("aten.mode")
def _mode(a: Args, out: Any) -> Cost:
    """The most frequent value of each row: sort the row, then compare each element with its neighbour."""
    rows, length = _along(a["self"], a["dim"])
    return f.comparison_sort(rows, length) + f.elementwise(rows * length)


@register("aten._unique", "aten._unique2")
def _unique(a: Args, out: Any) -> Cost:
    """Distinct values of all n elements: sort them (n * ceil(log2 n)), then compare neighbours (n)."""
    n = numel(a["self"])
    return f.comparison_sort(1, n) + f.elementwise(n)


@register("aten.unique_dim")
def _unique_dim(a: Args, out: Any) -> Cost:
    """Distinct slices along dim: r slices of m elements sorted as rows (r * ceil(log2 r) slice comparisons of m
    elements each), then neighbours compared (r * m)."""
    total = numel(a["self"])
    slices = shape(a["self"])[int(a["dim"]) % len(shape(a["self"]))]
    return f.elementwise(total * f.log2_ceil(slices) + total)


@register("aten.unique_consecutive")
def _unique_consecutive(a: Args, out: Any) -> Cost:
    """Each element compared with its neighbour."""
    return f.elementwise(numel(a["self"]))


@register("aten.isin")
def _isin(a: Args, out: Any) -> Cost:
    """Each element compared with each test element (a Python scalar on either side is one): `generate`'s
    end-of-sequence check."""
    elements = a["elements"] if "elements" in a else a.get("element")
    tests = a["test_elements"] if "test_elements" in a else a.get("test_element")
    return f.elementwise(_count_of(elements) * _count_of(tests))


@register("aten.searchsorted")
def _searchsorted(a: Args, out: Any) -> Cost:
    """A binary search per value among the last dim of `sorted_sequence`."""
    return f.binary_search(_count_of(a["self"]), shape(a["sorted_sequence"])[-1])


@register("aten.bucketize")
def _bucketize(a: Args, out: Any) -> Cost:
    """A binary search per value among the 1-D `boundaries`."""
    return f.binary_search(_count_of(a["self"]), numel(a["boundaries"]))


@register("aten.histc")
def _histc(a: Args, out: Any) -> Cost:
    """Each element is binned and counted: 1; with min == max (the default 0, 0) the range is the data's, found
    first as aminmax finds it: 1 more per element."""
    n = numel(a["self"])
    from_data = float(a.get("min", 0)) == float(a.get("max", 0))
    return f.elementwise(n * (1 + int(from_data)))


@register("aten.histogram")
def _histogram(a: Args, out: Any) -> Cost:
    """bins as a count: as histc (the range is the data's unless `range` is given); bins as a tensor of edges: a
    binary search per element among the edges, then the count."""
    n = numel(a["self"])
    edges = a["bins"]
    if hasattr(edges, "shape"):
        return f.binary_search(n, numel(edges)) + f.elementwise(n)
    return f.elementwise(n * (1 + int(a.get("range") is None)))


@register("aten.bincount")
def _bincount(a: Args, out: Any) -> Cost:
    """Each value counted (or its weight added) once."""
    return f.elementwise(numel(a["self"]))


# --- free ops --------------------------------------------------------------------------------------------------

#: Views, copies, dtype/device moves, allocation, indexing and metadata: no arithmetic.
#: Ops that read or write no tensor data at all: sizes, asserts, storage bookkeeping. Free of FLOPs, and they move
#: no bytes either (counting/torch/traffic.py).
BOOKKEEPING_OPS = (
    "aten.sym_size",
    "aten.sym_stride",
    "aten.sym_numel",
    "aten.sym_storage_offset",
    "aten.is_same_size",
    "aten._has_compatible_shallow_copy_type",
    "aten.set",
    "aten.resize",
    "aten.resize_as",
    "aten.record_stream",
    "aten._assert_async",
    "aten._assert_scalar",
    "aten._functional_assert_async",
    "aten._functional_assert_scalar",
    "aten.sym_constrain_range",
    "aten.sym_constrain_range_for_size",
    "aten._assert_tensor_metadata",
)

FREE_OPS = (
    "aten.view",
    "aten._unsafe_view",
    "aten.reshape",
    "aten._reshape_alias",
    "aten.view_as",
    "aten.as_strided",
    "aten.permute",
    "aten.transpose",
    "aten.t",
    "aten.expand",
    "aten.expand_as",
    "aten.squeeze",
    "aten.unsqueeze",
    "aten.flatten",
    "aten.unflatten",
    "aten.slice",
    "aten.select",
    "aten.narrow",
    "aten.split",
    "aten.split_with_sizes",
    "aten.unbind",
    "aten.chunk",
    "aten.tensor_split",
    "aten.movedim",
    "aten.diagonal",
    "aten.unfold",
    "aten.alias",
    "aten.detach",
    "aten.lift_fresh",
    "aten.lift_fresh_copy",
    "aten.clone",
    "aten.copy",
    "aten._to_copy",
    "aten.to",
    "aten.contiguous",
    "aten._copy_from",
    "aten._copy_from_and_resize",
    "aten.cat",
    "aten.stack",
    "aten.hstack",
    "aten.vstack",
    "aten.repeat",
    "aten.repeat_interleave",
    "aten.tile",
    "aten.roll",
    "aten.flip",
    "aten.tril",
    "aten.triu",
    "aten.masked_fill",
    "aten.where",
    "aten.fill",
    "aten.zero",
    "aten.empty",
    "aten.empty_like",
    "aten.empty_strided",
    "aten.new_empty",
    "aten.new_empty_strided",
    "aten.zeros",
    "aten.zeros_like",
    "aten.new_zeros",
    "aten.ones",
    "aten.ones_like",
    "aten.new_ones",
    "aten.full",
    "aten.full_like",
    "aten.new_full",
    "aten.scalar_tensor",
    "aten.arange",
    "aten.linspace",
    "aten.eye",
    "aten.tril_indices",
    "aten.triu_indices",
    "aten.constant_pad_nd",
    "aten.pad",
    "aten.reflection_pad1d",
    "aten.reflection_pad2d",
    "aten.reflection_pad3d",
    "aten.replication_pad1d",
    "aten.replication_pad2d",
    "aten.replication_pad3d",
    "aten.embedding",
    "aten.index",
    "aten._unsafe_index",
    "aten.index_select",
    "aten.gather",
    "aten.take",
    "aten.take_along_dim",
    "aten.masked_select",
    "aten.nonzero",
    "aten.slice_scatter",
    "aten.select_scatter",
    "aten.diagonal_scatter",
    "aten.as_strided_scatter",
    "aten.index_copy",
    "aten.index_fill",
    "aten.masked_scatter",
    "aten.pixel_shuffle",
    "aten.pixel_unshuffle",
    "aten.channel_shuffle",
    "aten.native_channel_shuffle",
    "aten._local_scalar_dense",
    "aten.item",
    *BOOKKEEPING_OPS,
    "aten.uniform",
    "aten.normal",
    "aten.rand",
    "aten.rand_like",
    "aten.randn",
    "aten.randn_like",
    "aten.randint",
    "aten.randint_like",
    "aten.randperm",
    "aten.exponential",
    "aten.random",
    "aten.dropout",
    "aten.feature_dropout",
    "aten.alpha_dropout",
    "aten.lift",
    "aten.view_as_real",
    "aten.view_as_complex",
    "aten._conj",
    "aten.conj",
    "aten.resolve_conj",
    "aten.resolve_neg",
    "aten._neg_view",
    "aten.type_as",
    "aten.split_copy",
    "aten.unbind_copy",
    "aten.im2col",
    "aten.clamp_min_",
    "aten.one_hot",
    "aten.is_nonzero",
    "aten.equal",
    "aten.allclose",
    "prim.device",
    "prim.layout",
    "prim.dtype",
    "prim.data",
    "aten.detach_copy",
    "aten.alias_copy",
    "aten.view_copy",
    "aten.permute_copy",
    "aten.transpose_copy",
    "aten.t_copy",
    "aten.expand_copy",
    "aten.squeeze_copy",
    "aten.unsqueeze_copy",
    "aten.slice_copy",
    "aten.select_copy",
    "aten.as_strided_copy",
    "aten._reshape_copy",
    "aten.unfold_copy",
    "aten.diagonal_copy",
    "aten.split_with_sizes_copy",
    # Backward of views and indexing: the gradient is copied into a zero tensor of the input's shape.
    "aten.select_backward",
    "aten.slice_backward",
    "aten.diagonal_backward",
    "aten.unsafe_split",
    "aten.unsafe_split_with_sizes",
    "aten.unsafe_chunk",
    "aten._linalg_check_errors",
)
TORCH_OPS.register_free(*(name for name in FREE_OPS if name != "aten.clamp_min_"))


_OP_KEYS: dict[Any, str] = {}


def op_key(func: Any) -> str:
    """`aten.add_.Tensor` -> `aten.add`: registry key of an OpOverload (remembered: it runs for every op)."""
    key = _OP_KEYS.get(func)
    if key is None:
        name = func.overloadpacket.__name__
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
        key = _OP_KEYS[func] = f"{func.namespace}.{name}"
    return key


@register("aten.scatter")
def _scatter(a: Args, out: Any) -> Cost:
    """A plain scatter is a copy; scatter(reduce='add'|'multiply') combines every source element."""
    if a.get("reduce") is None:
        return f.ZERO
    source = a.get("src")
    return f.elementwise(numel(source) if source is not None else numel(a["index"]))


@register(
    "aten.reflection_pad1d_backward",
    "aten.reflection_pad2d_backward",
    "aten.reflection_pad3d_backward",
    "aten.replication_pad1d_backward",
    "aten.replication_pad2d_backward",
    "aten.replication_pad3d_backward",
    "aten.unfold_backward",
)
def _gradient_fold(a: Args, out: Any) -> Cost:
    """Gradients of duplicated positions are summed: one add per incoming gradient element."""
    return f.elementwise(numel(a.get("grad_output", a.get("grad_in"))))


@register("aten.col2im")
def _col2im(a: Args, out: Any) -> Cost:
    return f.elementwise(numel(a["self"]))


@register("aten.trace")
def _trace(a: Args, out: Any) -> Cost:
    return f.reduction(min(shape(a["self"])))


@register("aten.mkldnn_rnn_layer")
def _mkldnn_rnn_layer(a: Args, out: Any) -> Cost:
    """One layer, one direction of nn.LSTM / nn.GRU / nn.RNN on CPU: `seq` steps of one cell."""
    x = shape(a["input"])
    seq, batch = (x[1], x[0]) if a["batch_first"] else (x[0], x[1])
    gates = {0: 1, 1: 1, 2: 4, 3: 3}[int(a["mode"])]
    return f.rnn_cell(batch, x[-1], int(a["hidden_size"]), gates, bool(a["has_biases"])).times(seq)


@register("aten.mkldnn_rnn_layer_backward")
def _mkldnn_rnn_layer_backward(a: Args, out: Any) -> Cost:
    return _mkldnn_rnn_layer(a, out).times(2)


@register(
    "aten.mse_loss",
    "aten.smooth_l1_loss",
    "aten.huber_loss",
    "aten.binary_cross_entropy",
    "aten.binary_cross_entropy_with_logits",
    "aten.mse_loss_backward",
    "aten.smooth_l1_loss_backward",
    "aten.huber_loss_backward",
    "aten.binary_cross_entropy_backward",
)
def _pointwise_loss(a: Args, out: Any) -> Cost:
    return f.elementwise(numel(a["self"] if "self" in a else a["input"]), 3)


@register("aten.nll_loss_forward", "aten.nll_loss2d_forward", "aten.nll_loss_backward", "aten.nll_loss2d_backward")
def _nll_loss(a: Args, out: Any) -> Cost:
    return f.elementwise(numel(a["target"]))
