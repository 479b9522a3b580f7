"""jaxpr primitive -> formula table for the JAX engine.

Every formula takes an `EqnContext` (shapes, dtypes and params of one equation, plain Python values) and returns a
`Cost` from the shared shape math in `formulas`, so a `dot_general` costs what `aten.mm` and ONNX `MatMul` cost.
Primitives that only move, view or describe data are registered as free; any other primitive without an entry is
reported as skipped by the walk, never counted as zero. Control flow and call primitives (`scan`, `while`, `cond`,
`jit`, `custom_jvp_call`, `remat`...) are not in this table: the walk (`walk.py`) recurses into their bodies.
This module imports no jax: the walk reads the equation into an `EqnContext` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FormulaRegistry

JAX_OPS: FormulaRegistry[str] = FormulaRegistry("jax")


@dataclass(frozen=True)
class EqnContext:
    """One jaxpr equation as the formulas see it: operand and result shapes, whether each result is an integer
    tensor, and the primitive's params (as jax gives them)."""

    primitive: str
    in_shapes: Sequence[tuple[int, ...]]
    out_shapes: Sequence[tuple[int, ...]]
    params: Mapping[str, Any] = field(default_factory=dict)
    out_integer: bool = False

    def in_numel(self, index: int = 0) -> int:
        return prod(self.in_shapes[index])

    def out_numel(self, index: int = 0) -> int:
        return prod(self.out_shapes[index])


JaxFormula = Callable[[EqnContext], Cost]


def register(*primitives: str) -> Callable[[JaxFormula], JaxFormula]:
    return JAX_OPS.register(*primitives)


# --- matrix products and convolutions ---------------------------------------------------------------------------


def dot_general_cost(lhs: Sequence[int], rhs: Sequence[int], dimension_numbers: Any) -> Cost:
    """`lax.dot_general`: batch dims B, contracting dims K, free dims M (lhs) and N (rhs): B*M*N*K MACs."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    batch = prod(lhs[d] for d in lhs_batch)
    k = prod(lhs[d] for d in lhs_contract)
    m = prod(size for d, size in enumerate(lhs) if d not in (*lhs_contract, *lhs_batch))
    n = prod(size for d, size in enumerate(rhs) if d not in (*rhs_contract, *rhs_batch))
    return f.matmul(m, n, k, batch)


@register("dot_general")
def _dot_general(e: EqnContext) -> Cost:
    """On integer operands (an integer result) the whole cost is integer ops, as torch's integer matmuls."""
    cost = dot_general_cost(e.in_shapes[0], e.in_shapes[1], e.params["dimension_numbers"])
    return f.on_integers(cost, e.out_integer)


def conv_general_dilated_cost(
    lhs: Sequence[int],
    rhs: Sequence[int],
    out: Sequence[int],
    dimension_numbers: Any,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    lhs_dilation: Sequence[int] = (),
) -> Cost:
    """`lax.conv_general_dilated`, full taps (the conventions' rule: padding and dilation do not remove taps).

    Each output element is a dot product over the kernel's input features (already divided by the groups) times
    its spatial taps, whatever the padding, stride or `rhs_dilation`. With `lhs_dilation` > 1 (a transposed
    convolution, as `lax.conv_transpose` writes it) the cost follows the *input* positions, as
    `formulas.conv_transpose` and torch's `conv_transpose` rule: each input element is scattered through the kernel.
    """
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    kernel = [rhs[d] for d in rhs_spec[2:]]
    kernel_in = rhs[rhs_spec[1]]
    kernel_out = rhs[rhs_spec[0]]
    if any(d > 1 for d in lhs_dilation) and batch_group_count == 1:
        in_spatial = [lhs[d] for d in lhs_spec[2:]]
        batch, in_channels = lhs[lhs_spec[0]], lhs[lhs_spec[1]]
        return f.conv_transpose(batch, in_channels, kernel_out, in_spatial, kernel, groups=feature_group_count)
    return _full_taps(out, out_spec, kernel_in, kernel)


def _full_taps(out: Sequence[int], out_spec: Sequence[int], kernel_in: int, kernel: Sequence[int]) -> Cost:
    spatial = [out[d] for d in out_spec[2:]]
    return f.conv(out[out_spec[0]], kernel_in, out[out_spec[1]], spatial, kernel)


@register("conv_general_dilated")
def _conv(e: EqnContext) -> Cost:
    p = e.params
    cost = conv_general_dilated_cost(
        e.in_shapes[0],
        e.in_shapes[1],
        e.out_shapes[0],
        p["dimension_numbers"],
        int(p.get("feature_group_count", 1)),
        int(p.get("batch_group_count", 1)),
        tuple(p.get("lhs_dilation") or ()),
    )
    return f.on_integers(cost, e.out_integer)


# --- elementwise ------------------------------------------------------------------------------------------------

#: One FLOP per output element (`formulas.ELEMENTWISE`), as the torch and ONNX tables price add, exp, tanh, ...
#: JAX writes composite activations (gelu, silu, softplus) as several of these, each counted.
ELEMENTWISE_PRIMITIVES = (
    "add",
    "add_any",
    "sub",
    "mul",
    "div",
    "rem",
    "pow",
    "integer_pow",
    "square",
    "max",
    "min",
    "neg",
    "abs",
    "sign",
    "floor",
    "ceil",
    "round",
    "nextafter",
    "exp",
    "exp2",
    "log",
    "log1p",
    "expm1",
    "tanh",
    "logistic",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "sqrt",
    "rsqrt",
    "cbrt",
    "erf",
    "erfc",
    "erf_inv",
    "lgamma",
    "digamma",
    "igamma",
    "igammac",
    "is_finite",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and",
    "or",
    "xor",
    "not",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "population_count",
    "clz",
    "clamp",
)


@register(*ELEMENTWISE_PRIMITIVES)
def _elementwise(e: EqnContext) -> Cost:
    return f.elementwise(e.out_numel(0))


# --- reductions, scans, selection and sorting --------------------------------------------------------------------

#: One FLOP per *input* element (`formulas.REDUCTION`), as torch's sum/amax/argmax and ONNX's Reduce*/ArgMax.
REDUCTION_PRIMITIVES = (
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_and",
    "reduce_or",
    "reduce_xor",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "cumlogsumexp",
)


@register(*REDUCTION_PRIMITIVES)
def _reduction(e: EqnContext) -> Cost:
    return f.reduction(e.in_numel(0))


@register("reduce_window_max", "reduce_window_min", "reduce_window_sum")
def _reduce_window(e: EqnContext) -> Cost:
    """Pooling: one compare or add per window element per output (`formulas.pool`, torch's max_pool rule)."""
    return f.pool(e.out_numel(0), prod(e.params["window_dimensions"]))


@register("select_and_scatter_add")
def _max_pool_gradient(e: EqnContext) -> Cost:
    """Max pooling's gradient: the window size per output-gradient element (operand 0, `source`), torch's
    `max_pool2d_with_indices_backward` and TensorFlow's `MaxPoolGrad` rule."""
    return f.pool(e.in_numel(0), prod(e.params["window_dimensions"]))


@register("sort")
def _sort(e: EqnContext) -> Cost:
    """Rows along `dimension` sorted by a comparison sort (`formulas.comparison_sort`); the other operands sorted
    along (argsort's iota) move with the keys and add nothing."""
    shape = e.in_shapes[0]
    if not shape:
        return f.ZERO
    length = shape[int(e.params.get("dimension", len(shape) - 1))]
    return f.comparison_sort(prod(shape) // max(length, 1), length)


@register("top_k")
def _top_k(e: EqnContext) -> Cost:
    """`lax.top_k` along the last axis: one comparison per input element (`formulas.selection`), then each row's
    k picks sorted (k * ceil(log2 k)), as torch's topk and ONNX TopK (sorted=1)."""
    shape = e.in_shapes[0]
    k = e.out_shapes[0][-1] if e.out_shapes[0] else 1
    rows = prod(shape[:-1])
    return f.selection(prod(shape)) + f.comparison_sort(rows, k)


# --- free primitives --------------------------------------------------------------------------------------------

#: Layout, copies, casts, indexing, constant generation and autodiff bookkeeping: no arithmetic (the ONNX table's
#: Reshape/Transpose/Cast/Gather/Where/Pad/Range/RandomNormal and torch's views and copies are free too).
FREE_PRIMITIVES = (
    "reshape",
    "broadcast_in_dim",
    "transpose",
    "convert_element_type",
    "bitcast_convert_type",
    "reduce_precision",
    "squeeze",
    "expand_dims",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "concatenate",
    "split",
    "pad",
    "rev",
    "gather",
    "scatter",
    "select_n",
    "iota",
    "copy",
    "copy_p",
    "device_put",
    "stop_gradient",
    "optimization_barrier",
    "sharding_constraint",
    "mesh_cast",
    "pvary",
    "real",
    "imag",
    "conj",
    "complex",
    "random_bits",
    "random_seed",
    "random_wrap",
    "random_unwrap",
    "random_fold_in",
    "random_split",
    "threefry2x32",
    "zeros_like",
    "empty",
    "name",
    "axis_index",
)
JAX_OPS.register_free(*FREE_PRIMITIVES)


@register("scatter-add", "scatter_add", "scatter_mul", "scatter_min", "scatter_max")
def _scatter_combine(e: EqnContext) -> Cost:
    """A scatter that combines: one op per update element (ONNX ScatterElements with a reduction; torch
    index_add/scatter_add)."""
    return f.elementwise(e.in_numel(2))


# --- named composites -------------------------------------------------------------------------------------------

#: A composite's backward is priced under its name and this suffix (`jax.nn.gelu_backward`), as PyTorch's
#: `aten.gelu_backward`.
BACKWARD = "_backward"

#: Library functions and modules priced by what they mean, not by the primitives JAX writes them with
#: (`composites.py` finds their calls). For these a context's `in_shapes` are the shapes of the composite's array
#: arguments as called (`x`; `query`, `key`, `value`; none for `arange`) and `out_shapes` those of its results; in
#: a backward, the cotangents of its results. A jitted composite's context is its `jit` equation's operands and
#: results (in a training count's forward, its results are followed by the residuals jax saves), so its formula
#: reads `out_shapes[0]` alone.
#: Activations are those PyTorch prices as one op (`aten.silu`, `aten.elu`, ...); `jax.nn.relu`, `sigmoid` and
#: `tanh` are one primitive already, and `swish` and `hard_swish` are `silu` and `hard_silu`.
ACTIVATIONS = (
    "silu",
    "gelu",
    "softplus",
    "log_sigmoid",
    "elu",
    "celu",
    "selu",
    "leaky_relu",
    "hard_tanh",
    "hard_sigmoid",
    "hard_silu",
    "mish",
)
ACTIVATION_COMPOSITES = tuple(f"jax.nn.{name}" for name in ACTIVATIONS)
SOFTMAX_COMPOSITES = ("jax.nn.softmax", "jax.nn.log_softmax")
#: Normalisation layers computing statistics over their input (LayerNorm, GroupNorm) or, in training mode, over
#: the batch (BatchNorm; `info["stats"]` says which).
NORM_COMPOSITES = tuple(f"flax.{lib}.{cls}" for lib in ("nnx", "linen") for cls in ("LayerNorm", "GroupNorm"))
BATCH_NORM_COMPOSITES = ("flax.nnx.BatchNorm", "flax.linen.BatchNorm")
RMS_NORM_COMPOSITES = ("flax.nnx.RMSNorm", "flax.linen.RMSNorm")
EMBED_COMPOSITES = ("flax.nnx.Embed", "flax.linen.Embed")


#: The identity primitive a hooked composite's arguments and results pass through (`composites.py`): the walk
#: prices the results' side by the composite's formula; the arguments' side is free.
COMPOSITE_PRIMITIVE = "flopbudget_composite"
JAX_OPS.register_free(COMPOSITE_PRIMITIVE)


def backward_of(*names: str) -> tuple[str, ...]:
    return tuple(name + BACKWARD for name in names)


@register(*ACTIVATION_COMPOSITES, *backward_of(*ACTIVATION_COMPOSITES))
def _activation_composite(e: EqnContext) -> Cost:
    """An activation: 1 per element (`formulas.ELEMENTWISE`), as `aten.silu`; its backward 1 per element, as
    `aten.silu_backward`."""
    return f.elementwise(e.out_numel(0))


@register(*SOFTMAX_COMPOSITES)
def _softmax_composite(e: EqnContext) -> Cost:
    """5 per element (`formulas.SOFTMAX`): max, subtract, exp, sum, divide (log instead of divide); the guard JAX
    adds per row (`max(-inf, row max)`) is part of it."""
    return f.softmax(e.out_numel(0))


@register(*backward_of(*SOFTMAX_COMPOSITES))
def _softmax_composite_backward(e: EqnContext) -> Cost:
    return f.elementwise(e.out_numel(0), f.SOFTMAX_BACKWARD)


@register("jax.numpy.mean", "jax.numpy.mean_backward")
def _mean_composite(e: EqnContext) -> Cost:
    """A reduction: 1 per input element (the divide by the count is part of it); its backward spreads the
    gradient over the input and divides it, 1 per input element, as torch's `mean` backward (an `aten.div`)."""
    return f.reduction(e.in_numel(0))


#: `jnp.arange` generates values (`iota`, then `* step + start`): free, as `aten.arange` and ONNX `Range`.
JAX_OPS.register_free("jax.numpy.arange", *backward_of("jax.numpy.arange"))


def _attention_shapes(e: EqnContext) -> tuple[int, int, int, int, int]:
    """`jax.nn.dot_product_attention`'s query [B..., T, N, H], key [B..., S, K, H], value [B..., S, K, Hv]:
    batch x query heads, T, S, H, Hv (grouped k/v heads, K < N, serve N / K query heads each)."""
    query, key, value = e.in_shapes[0], e.in_shapes[1], e.in_shapes[2]
    return prod(query[:-3]) * query[-2], query[-3], key[-3], query[-1], value[-1]


@register("jax.nn.dot_product_attention")
def _attention_composite(e: EqnContext) -> Cost:
    """`formulas.attention`, as torch's `scaled_dot_product_attention`: QK^T and AV, the scale and softmax per score,
    and a mask or bias add when one is given. A causal mask (`is_causal=True`) costs nothing, as in PyTorch: the
    convention prices the dense product, and the mask jax builds for it is part of the composite."""
    batch_heads, q_len, kv_len, head_dim, v_dim = _attention_shapes(e)
    return f.attention(batch_heads, q_len, kv_len, head_dim, v_dim, masked=bool(e.params.get("masked")))


@register(*backward_of("jax.nn.dot_product_attention"))
def _attention_composite_backward(e: EqnContext) -> Cost:
    return f.attention_backward(*_attention_shapes(e))


@register(*NORM_COMPOSITES, *BATCH_NORM_COMPOSITES)
def _norm_composite(e: EqnContext) -> Cost:
    """`formulas.norm`, as `aten.native_layer_norm` / `native_batch_norm`: statistics (unless BatchNorm uses its
    running averages), normalise, and the scale and bias the module has. Running-average updates are part of it."""
    p = e.params
    stats = bool(p.get("stats", True))
    return f.norm(e.out_numel(0), stats=stats, weight=bool(p.get("weight")), bias=bool(p.get("bias")))


@register(*backward_of(*NORM_COMPOSITES, *BATCH_NORM_COMPOSITES))
def _norm_composite_backward(e: EqnContext) -> Cost:
    """Twice the forward per element with statistics, scale and bias, as torch's `native_layer_norm_backward`."""
    return f.norm(e.out_numel(0), stats=True, weight=True, bias=True).times(f.NORM_BACKWARD_FACTOR)


@register(*RMS_NORM_COMPOSITES)
def _rms_norm_composite(e: EqnContext) -> Cost:
    return f.rms_norm(e.out_numel(0), weight=bool(e.params.get("weight")))


@register(*backward_of(*RMS_NORM_COMPOSITES))
def _rms_norm_composite_backward(e: EqnContext) -> Cost:
    return f.rms_norm(e.out_numel(0), weight=True).times(f.NORM_BACKWARD_FACTOR)


#: An embedding lookup is a gather: free, as `aten.embedding` (`jnp.take`'s wrap of negative ids is part of it).
JAX_OPS.register_free(*EMBED_COMPOSITES)


@register(*backward_of(*EMBED_COMPOSITES))
def _embed_composite_backward(e: EqnContext) -> Cost:
    """The output gradient's rows are added into the table's gradient: 1 per gradient element, as torch's
    `embedding_dense_backward`."""
    return f.elementwise(e.out_numel(0))


# --- Pallas kernels ---------------------------------------------------------------------------------------------

#: A Pallas kernel: its body works on memory references (`Ref` loads and stores, program ids), not on the arrays
#: the formulas price, so it is never walked. The walk counts what its `CostEstimate` declares, listed as estimated.
PALLAS_CALL = "pallas_call"
#: The rule an estimated `pallas_call` rests on (`Report.estimated_ops`).
DECLARED_COST = (
    "a Pallas kernel counts the FLOPs its CostEstimate declares (flops + transcendentals), not its body; it "
    "declares no MACs"
)
#: The skip reason of a `pallas_call` that declares no cost.
NO_COST_ESTIMATE = "Pallas kernel without a cost_estimate (its body is not counted; declare pl.CostEstimate)"


def declared_cost(estimate: Any) -> Cost | None:
    """What a `pl.CostEstimate(flops=, transcendentals=, bytes_accessed=)` declares, as a `Cost`: its `flops` plus
    its `transcendentals` (this table counts an `exp` or a `tanh` as 1 FLOP per element, where XLA's cost analysis
    counts them apart), no MACs (a kernel does not say which of its FLOPs multiply-accumulate). None when there is
    no estimate or its figures are not non-negative integers."""
    if estimate is None:
        return None
    declared = (getattr(estimate, "flops", None), getattr(estimate, "transcendentals", None) or 0)
    counts = [v for v in declared if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    return Cost(counts[0] + counts[1], 0) if len(counts) == 2 else None
