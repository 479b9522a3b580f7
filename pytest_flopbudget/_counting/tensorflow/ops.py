"""TensorFlow op type -> formula table for the TensorFlow engine.

Every formula takes an `OpContext` (shapes, integer-ness and attributes of one graph op, plain Python values) and
returns a `Cost` from the shared shape math in `formulas`, so a `MatMul` costs what `aten.mm`, ONNX `MatMul` and
jax's `dot_general` cost. Ops that only move, view, read or describe data are registered as free; any other op
without an entry is reported as skipped by the walk, never counted as zero. Control flow and call ops (`While`,
`If`, `PartitionedCall`, ...) are not in this table: the walk (`walk.py`) recurses into their bodies.
This module imports no tensorflow: the walk reads each op into an `OpContext` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.einsum import einsum_cost
from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FormulaRegistry

TF_OPS: FormulaRegistry[str] = FormulaRegistry("tensorflow")


@dataclass(frozen=True)
class OpContext:
    """One graph op as the formulas see it: input and output shapes (every dim known), whether the first output
    is an integer tensor, and the op's attributes (strings decoded, as `op.get_attr` gives them otherwise)."""

    op_type: str
    in_shapes: Sequence[tuple[int, ...]]
    out_shapes: Sequence[tuple[int, ...]]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    out_integer: bool = False

    def in_numel(self, index: int = 0) -> int:
        return prod(self.in_shapes[index])

    def out_numel(self, index: int = 0) -> int:
        return prod(self.out_shapes[index])

    def attr(self, name: str, default: Any = None) -> Any:
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value


TfFormula = Callable[[OpContext], Cost]


def register(*op_types: str) -> Callable[[TfFormula], TfFormula]:
    return TF_OPS.register(*op_types)


# --- matrix products ---------------------------------------------------------------------------------------------


@register("MatMul")
def _matmul(o: OpContext) -> Cost:
    """[M, K] @ [K, N] (`transpose_a`/`transpose_b` read): M*N*K MACs, 2*M*N*K FLOPs."""
    a = o.in_shapes[0]
    k = a[0] if o.attr("transpose_a", False) else a[1]
    m, n = o.out_shapes[0]
    return f.on_integers(f.matmul(m, n, k), o.out_integer)


@register("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(o: OpContext) -> Cost:
    """[..., M, K] @ [..., K, N], `adj_x`/`adj_y` read, the batch dims broadcast (the output's leading dims)."""
    a = o.in_shapes[0]
    k = a[-2] if o.attr("adj_x", False) else a[-1]
    out = o.out_shapes[0]
    return f.on_integers(f.matmul(out[-2], out[-1], k, prod(out[:-2])), o.out_integer)


@register("Einsum")
def _einsum(o: OpContext) -> Cost:
    """Pairwise contractions left to right, the ONNX `Einsum` rule (`einsum.einsum_cost`)."""
    return f.on_integers(einsum_cost(str(o.attr("equation", "")), o.in_shapes), o.out_integer)


# --- convolutions ------------------------------------------------------------------------------------------------


def _channels_first(o: OpContext) -> bool:
    return str(o.attr("data_format", "NHWC")).startswith("NC")


def conv_cost(out: Sequence[int], kernel: Sequence[int], kernel_in: int, channels_first: bool) -> Cost:
    """Full taps: each output element is a dot product over the kernel's input channels (already divided by the
    groups: TF's filter holds in / groups) times its spatial taps, whatever the padding, stride or dilation."""
    if channels_first:
        batch, channels, spatial = out[0], out[1], out[2:]
    else:
        batch, channels, spatial = out[0], out[-1], out[1:-1]
    return f.conv(batch, kernel_in, channels, spatial, kernel)


@register("Conv2D", "Conv3D", "Conv1D")
def _conv(o: OpContext) -> Cost:
    """Filter [*kernel, in / groups, out]."""
    w = o.in_shapes[1]
    cost = conv_cost(o.out_shapes[0], w[:-2], w[-2], _channels_first(o))
    return f.on_integers(cost, o.out_integer)


@register("DepthwiseConv2dNative")
def _depthwise(o: OpContext) -> Cost:
    """Filter [kh, kw, in, multiplier]: each output channel reads one input channel, kh*kw taps per element."""
    w = o.in_shapes[1]
    return f.on_integers(conv_cost(o.out_shapes[0], w[:-2], 1, _channels_first(o)), o.out_integer)


@register("Conv2DBackpropInput", "Conv3DBackpropInputV2")
def _conv_transpose(o: OpContext) -> Cost:
    """A transposed convolution (Keras `Conv2DTranspose`): the cost follows the *input* (the op's third operand,
    the gradient it scatters), as PyTorch's transposed convolution: filter [*kernel, out, in]."""
    w, x = o.in_shapes[1], o.in_shapes[2]
    channels_first = _channels_first(o)
    batch, channels, spatial = (x[0], x[1], x[2:]) if channels_first else (x[0], x[-1], x[1:-1])
    return f.conv_transpose(batch, channels, w[-2], spatial, w[:-2])


@register("Conv2DBackpropFilter", "Conv3DBackpropFilterV2")
def _conv_filter_gradient(o: OpContext) -> Cost:
    """A convolution's weight gradient (input, filter sizes, output gradient): one forward convolution, as
    torch's `convolution_backward` prices each gradient; the filter's shape is the op's output."""
    w = o.out_shapes[0]
    return conv_cost(o.in_shapes[2], w[:-2], w[-2], _channels_first(o))


@register("DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")
def _depthwise_gradient(o: OpContext) -> Cost:
    """A depthwise convolution's input or filter gradient: one forward depthwise convolution (kh*kw taps per
    output-gradient element); the filter is the second operand or, for the filter gradient, the output."""
    w = o.out_shapes[0] if o.op_type.endswith("Filter") else o.in_shapes[1]
    return conv_cost(o.in_shapes[2], w[:-2], 1, _channels_first(o))


# --- normalisation and softmax ----------------------------------------------------------------------------------


@register("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _fused_batch_norm(o: OpContext) -> Cost:
    """Scale and offset always (the shared norm rule: 2 to normalise + 1 + 1 for the affine); the batch
    statistics (4 per element) only with `is_training`."""
    return f.norm(o.in_numel(0), stats=bool(o.attr("is_training", True)), weight=True, bias=True)


@register("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
def _fused_batch_norm_gradient(o: OpContext) -> Cost:
    """Twice the forward with statistics (`formulas.NORM_BACKWARD_FACTOR`), as torch's batch norm backward."""
    return f.norm(o.in_numel(0), stats=True, weight=True, bias=True).times(f.NORM_BACKWARD_FACTOR)


@register("Softmax", "LogSoftmax")
def _softmax(o: OpContext) -> Cost:
    return f.softmax(o.in_numel(0))


# --- elementwise ------------------------------------------------------------------------------------------------

#: One FLOP per output element (`formulas.ELEMENTWISE`), as the torch, ONNX and JAX tables price them.
ELEMENTWISE_OPS = (
    "Add",
    "AddV2",
    "BiasAdd",
    "Sub",
    "Mul",
    "MulNoNan",
    "Div",
    "RealDiv",
    "DivNoNan",
    "FloorDiv",
    "FloorMod",
    "Mod",
    "TruncateDiv",
    "TruncateMod",
    "Pow",
    "Maximum",
    "Minimum",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Rint",
    "Reciprocal",
    "Inv",
    "Square",
    "Sqrt",
    "Rsqrt",
    "Exp",
    "Expm1",
    "Log",
    "Log1p",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Atan2",
    "Sinh",
    "Cosh",
    "Tanh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Erf",
    "Erfc",
    "Erfinv",
    "Lgamma",
    "Digamma",
    "Sigmoid",
    "Relu",
    "Relu6",
    "Elu",
    "Selu",
    "LeakyRelu",
    "Softplus",
    "Softsign",
    "Gelu",
    "ClipByValue",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "LogicalNot",
    "IsNan",
    "IsInf",
    "IsFinite",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Invert",
    "LeftShift",
    "RightShift",
)


@register(*ELEMENTWISE_OPS)
def _elementwise(o: OpContext) -> Cost:
    return f.elementwise(o.out_numel(0))


#: Activation gradients: 1 FLOP per element, torch's `threshold_backward`, `sigmoid_backward`, ... rule.
ACTIVATION_GRADIENT_OPS = (
    "ReluGrad",
    "Relu6Grad",
    "EluGrad",
    "SeluGrad",
    "LeakyReluGrad",
    "SigmoidGrad",
    "TanhGrad",
    "SoftplusGrad",
    "SoftsignGrad",
    "RsqrtGrad",
    "SqrtGrad",
    "ReciprocalGrad",
    "InvGrad",
)


@register(*ACTIVATION_GRADIENT_OPS)
def _activation_gradient(o: OpContext) -> Cost:
    return f.elementwise(o.out_numel(0))


@register("SquaredDifference")
def _squared_difference(o: OpContext) -> Cost:
    """(x - y)**2: a subtract and a square per element, as the two ops torch and ONNX write it with."""
    return f.elementwise(o.out_numel(0), 2)


@register("AddN")
def _add_n(o: OpContext) -> Cost:
    """n - 1 adds per output element (ONNX `Sum`)."""
    return f.variadic(o.out_numel(0), len(o.in_shapes))


# --- reductions and pooling -------------------------------------------------------------------------------------

#: One FLOP per *input* element (`formulas.REDUCTION`), as ONNX's Reduce*/ArgMax and torch's sum/mean/amax.
REDUCTION_OPS = (
    "Sum",
    "Mean",
    "Max",
    "Min",
    "Prod",
    "All",
    "Any",
    "ArgMax",
    "ArgMin",
    "Cumsum",
    "Cumprod",
    "EuclideanNorm",
)


@register(*REDUCTION_OPS)
def _reduction(o: OpContext) -> Cost:
    return f.reduction(o.in_numel(0))


@register("BiasAddGrad")
def _bias_add_gradient(o: OpContext) -> Cost:
    """The bias gradient sums the output gradient (1 per input element), as torch's."""
    return f.reduction(o.in_numel(0))


@register("MaxPoolGrad", "MaxPool3DGrad")
def _max_pool_gradient(o: OpContext) -> Cost:
    """Window size per output-gradient element (operand 2), torch's `max_pool2d_with_indices_backward` rule."""
    return f.pool(o.in_numel(2), prod(int(k) for k in o.attr("ksize", [1])))


@register("AvgPoolGrad", "AvgPool3DGrad")
def _avg_pool_gradient(o: OpContext) -> Cost:
    """Window size per output-gradient element (operand 1), torch's `avg_pool2d_backward` rule."""
    return f.pool(o.in_numel(1), prod(int(k) for k in o.attr("ksize", [1])))


@register("MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D")
def _pool(o: OpContext) -> Cost:
    """Window size per output element (`formulas.pool`); `ksize` holds 1 for the batch and channel dims."""
    return f.pool(o.out_numel(0), prod(int(k) for k in o.attr("ksize", [1])))


@register("TopKV2")
def _top_k(o: OpContext) -> Cost:
    """1 per input element, then each row's k picks sorted (torch's topk, ONNX TopK, jax's top_k)."""
    shape = o.in_shapes[0]
    k = o.out_shapes[0][-1] if o.out_shapes[0] else 1
    return f.selection(prod(shape)) + f.comparison_sort(prod(shape[:-1]), k)


# --- free ops ---------------------------------------------------------------------------------------------------

#: Layout, copies, casts, indexing, variable reads and writes, constants, shapes and random bits: no arithmetic
#: (ONNX's Reshape/Transpose/Cast/Gather/Where/Pad/Range and jax's layout primitives are free too).
FREE_OPS = (
    "Const",
    "Placeholder",
    "PlaceholderWithDefault",
    "NoOp",
    "Identity",
    "IdentityN",
    "Snapshot",
    "StopGradient",
    "PreventGradient",
    "EnsureShape",
    "CheckNumerics",
    "ReadVariableOp",
    "ResourceGather",
    "VarHandleOp",
    "VarIsInitializedOp",
    "AssignVariableOp",
    "Reshape",
    "Transpose",
    "ConjugateTranspose",
    "Squeeze",
    "ExpandDims",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "Cast",
    "Bitcast",
    "ConcatV2",
    "Concat",
    "Pack",
    "Unpack",
    "Split",
    "SplitV",
    "Slice",
    "StridedSlice",
    "Gather",
    "GatherV2",
    "GatherNd",
    "Pad",
    "PadV2",
    "MirrorPad",
    "Tile",
    "BroadcastTo",
    "BroadcastArgs",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "Range",
    "Select",
    "SelectV2",
    "Where",
    "ReverseV2",
    "OneHot",
    "DepthToSpace",
    "SpaceToDepth",
    "RandomUniform",
    "RandomStandardNormal",
    "StatelessRandomUniformV2",
    "StatelessRandomNormalV2",
    "StatelessRandomGetKeyCounter",
    "StatelessRandomUniformIntV2",
    "StatelessRandomGetKeyCounterAlg",
    "RngReadAndSkip",
    "TensorListReserve",
    "TensorListSetItem",
    "TensorListGetItem",
    "TensorListStack",
    "TensorListFromTensor",
    "TensorListElementShape",
    "TensorListLength",
)
TF_OPS.register_free(*FREE_OPS)
