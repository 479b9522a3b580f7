"""The TensorFlow formula table, one op type at a time, each figure derived by hand from the shared conventions."""

from __future__ import annotations

from typing import Any, Callable

import pytest

tf = pytest.importorskip("tensorflow")

from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.registry import FREE  # noqa: E402
from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.ops import TF_OPS, OpContext  # noqa: E402
from pytest_flopbudget._metrics import BYTES  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


def spec(*shape: int, dtype: Any = tf.float32) -> Any:
    return tf.TensorSpec(shape, dtype)


def count(fn: Callable[..., Any], *args: Any) -> Report:
    return count_tf(tf.function(fn), args)


def only_op(report: Report) -> tuple[str, Cost]:
    """The one priced op of a report and its cost."""
    # free ops that only move bytes (an argsort's iota, a concat) are in the layers too: not priced
    ops = {op: cost for layer in report.layers.values() for op, cost in layer.ops.items() if set(cost.values) - {BYTES}}
    assert len(ops) == 1, ops
    [(name, cost)] = ops.items()
    return name, Cost(cost.flops, cost.macs, cost.int_ops)


def formula(op_type: str, ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], **attrs: Any) -> Cost:
    entry = TF_OPS.lookup(op_type)
    assert entry is not None and entry is not FREE
    return entry(OpContext(op_type, ins, outs, attrs))  # type: ignore[operator]


# --- matrix products ---------------------------------------------------------------------------------------------


def test_matmul_is_two_m_n_k() -> None:
    # 2*M*N*K = 2*4*5*6 = 240 FLOPs, M*N*K = 120 MACs
    assert only_op(count(tf.matmul, spec(4, 6), spec(6, 5))) == ("MatMul", Cost(240, 120))


def test_matmul_reads_transpose_a() -> None:
    # a is [K, M] = [6, 4]: still 2*4*5*6 = 240
    report = count(lambda a, b: tf.matmul(a, b, transpose_a=True), spec(6, 4), spec(6, 5))
    assert only_op(report) == ("MatMul", Cost(240, 120))


def test_batch_matmul_multiplies_the_batch() -> None:
    # B*M*N*K = 3*4*5*6 = 360 MACs, 720 FLOPs
    assert only_op(count(tf.matmul, spec(3, 4, 6), spec(3, 6, 5))) == ("BatchMatMulV2", Cost(720, 360))


def test_batch_matmul_reads_adj_x_and_broadcasts() -> None:
    # a is [1, K, M] = [1, 6, 4] adjointed, b [3, 6, 5]: batch 3 from the broadcast, 3*4*5*6 = 360 MACs
    report = count(lambda a, b: tf.matmul(a, b, adjoint_a=True), spec(1, 6, 4), spec(3, 6, 5))
    assert only_op(report) == ("BatchMatMulV2", Cost(720, 360))


def test_batch_matmul_reads_adj_y() -> None:
    assert formula("BatchMatMulV3", [(2, 4, 6), (2, 5, 6)], [(2, 4, 5)], adj_y=True) == Cost(480, 240)


def test_einsum_as_onnx_prices_it() -> None:
    # one contraction over j: B*I*K*J = 3*4*5*6 = 360 MACs
    assert formula("Einsum", [(3, 4, 6), (3, 6, 5)], [(3, 4, 5)], equation=b"bij,bjk->bik") == Cost(720, 360)


def test_integer_matmul_is_integer_ops() -> None:
    # 2*4*5*6 = 240 integer ops, no FLOPs or MACs
    report = count(tf.matmul, spec(4, 6, dtype=tf.int32), spec(6, 5, dtype=tf.int32))
    assert only_op(report) == ("MatMul", Cost(0, 0, 240))


# --- convolutions ------------------------------------------------------------------------------------------------


def conv2d(strides: int = 1, padding: str = "SAME", dilations: int = 1, data_format: str = "NHWC") -> Any:
    return lambda x, w: tf.nn.conv2d(x, w, strides, padding, data_format=data_format, dilations=dilations)


def test_conv2d_nhwc() -> None:
    # out 1*8*8*4 = 256 elements, each 3*3*3 = 27 taps: 6912 MACs, 13824 FLOPs
    assert only_op(count(conv2d(), spec(1, 8, 8, 3), spec(3, 3, 3, 4))) == ("Conv2D", Cost(13824, 6912))


def test_conv2d_nchw() -> None:
    # the same convolution channels first: out [1, 4, 8, 8], 256 elements * 27 = 6912 MACs
    report = count(conv2d(data_format="NCHW"), spec(1, 3, 8, 8), spec(3, 3, 3, 4))
    assert only_op(report) == ("Conv2D", Cost(13824, 6912))


def test_strided_valid_conv() -> None:
    # 7x7 VALID stride 2 with a 3x3 kernel: 3x3 out, 3*3*5 = 45 elements * 3*3*2 = 18 taps = 810 MACs
    report = count(conv2d(strides=2, padding="VALID"), spec(1, 7, 7, 2), spec(3, 3, 2, 5))
    assert only_op(report) == ("Conv2D", Cost(1620, 810))


def test_padding_and_dilation_keep_full_taps() -> None:
    # 8x8 SAME, dilation 2, 3x3 kernel: 64 outputs * 9 taps = 576 MACs (the padded taps count)
    report = count(conv2d(dilations=2), spec(1, 8, 8, 1), spec(3, 3, 1, 1))
    assert only_op(report) == ("Conv2D", Cost(1152, 576))


def test_grouped_conv_reads_in_per_group_from_the_filter() -> None:
    # 4 input channels in 2 groups (filter [1, 1, 2, 6]): 25*6 = 150 outputs * 2 taps = 300 MACs
    report = count(conv2d(), spec(1, 5, 5, 4), spec(1, 1, 2, 6))
    assert only_op(report) == ("Conv2D", Cost(600, 300))


def test_conv3d() -> None:
    # 4x4x4 VALID with 2x2x2: 3x3x3 out * 3 channels = 81 elements * 2*2*2*2 = 16 taps = 1296 MACs
    report = count(lambda x, w: tf.nn.conv3d(x, w, [1] * 5, "VALID"), spec(1, 4, 4, 4, 2), spec(2, 2, 2, 2, 3))
    assert only_op(report) == ("Conv3D", Cost(2592, 1296))


def test_depthwise_conv() -> None:
    # 3 channels * multiplier 2 = 6 out channels, 6*6*6 = 216 elements * 3*3 taps = 1944 MACs
    report = count(lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"), spec(1, 6, 6, 3), spec(3, 3, 3, 2))
    assert only_op(report) == ("DepthwiseConv2dNative", Cost(3888, 1944))


def test_transposed_conv_follows_the_input() -> None:
    # input 1x3x3x4 scattered through a 2x2 kernel to 2 channels: 9*4 * 2 * 4 = 288 MACs (not the 6x6 output's)
    report = count(
        lambda x, w: tf.nn.conv2d_transpose(x, w, [1, 6, 6, 2], 2, "SAME"), spec(1, 3, 3, 4), spec(2, 2, 2, 4)
    )
    assert only_op(report) == ("Conv2DBackpropInput", Cost(576, 288))


def test_convolution_gradients_cost_one_forward_each() -> None:
    # the forward: out [1, 8, 8, 4] from [1, 8, 8, 3] and a 3x3 kernel: 256 * 27 = 6912 MACs
    weight = formula("Conv2DBackpropFilter", [(1, 8, 8, 3), (4,), (1, 8, 8, 4)], [(3, 3, 3, 4)])
    assert weight == Cost(13824, 6912)
    # the depthwise forward above: 216 out elements * 9 taps = 1944 MACs, for the input and the filter gradient
    grad_in = formula("DepthwiseConv2dNativeBackpropInput", [(4,), (3, 3, 3, 2), (1, 6, 6, 6)], [(1, 6, 6, 3)])
    grad_w = formula("DepthwiseConv2dNativeBackpropFilter", [(1, 6, 6, 3), (4,), (1, 6, 6, 6)], [(3, 3, 3, 2)])
    assert grad_in == grad_w == Cost(3888, 1944)


# --- elementwise, normalisation, softmax ---------------------------------------------------------------------------


def test_bias_add_is_one_per_element() -> None:
    # 4*5 = 20
    assert only_op(count(tf.nn.bias_add, spec(4, 5), spec(5))) == ("BiasAdd", Cost(20, 0))


@pytest.mark.parametrize(
    ("fn", "op"),
    [(tf.nn.relu, "Relu"), (tf.sigmoid, "Sigmoid"), (tf.tanh, "Tanh"), (tf.exp, "Exp"), (tf.math.rsqrt, "Rsqrt")],
)
def test_activations_are_one_per_element(fn: Callable[..., Any], op: str) -> None:
    # 2*5 = 10
    assert only_op(count(fn, spec(2, 5))) == (op, Cost(10, 0))


def test_binary_arithmetic_is_one_per_output_element() -> None:
    # [3, 4] + [4] broadcast: 12 outputs
    assert only_op(count(lambda a, b: a * b, spec(3, 4), spec(4))) == ("Mul", Cost(12, 0))


def test_squared_difference_is_two_per_element() -> None:
    # subtract and square: 2*12 = 24
    report = count(tf.math.squared_difference, spec(3, 4), spec(3, 4))
    assert only_op(report) == ("SquaredDifference", Cost(24, 0))


def test_add_n_is_n_minus_one_per_element() -> None:
    # 3 operands of 4: 2 adds * 4 = 8
    assert only_op(count(lambda a, b, c: tf.add_n([a, b, c]), spec(4), spec(4), spec(4))) == ("AddN", Cost(8, 0))


def fused_batch_norm(training: bool) -> Callable[..., Any]:
    def fn(x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> Any:
        if training:
            return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, is_training=True)[0]
        return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, mean, variance, is_training=False)[0]

    return fn


def test_fused_batch_norm_inference_normalises_and_applies_the_affine() -> None:
    # 2*4*4*3 = 96 elements * (2 normalise + 1 scale + 1 offset) = 384
    report = count(fused_batch_norm(False), spec(2, 4, 4, 3), spec(3), spec(3), spec(3), spec(3))
    assert only_op(report) == ("FusedBatchNormV3", Cost(384, 0))


def test_fused_batch_norm_training_adds_the_statistics() -> None:
    # 96 * (4 statistics + 2 + 1 + 1) = 768
    report = count(fused_batch_norm(True), spec(2, 4, 4, 3), spec(3), spec(3), spec(3), spec(3))
    assert only_op(report) == ("FusedBatchNormV3", Cost(768, 0))


def test_fused_batch_norm_gradient_is_twice_the_forward_with_statistics() -> None:
    # 96 * 8 * 2 = 1536
    assert formula("FusedBatchNormGradV3", [(2, 4, 4, 3)], [(2, 4, 4, 3)]) == Cost(1536, 0)


def test_softmax_is_five_per_element() -> None:
    # 3*7 = 21 elements * 5 = 105
    assert only_op(count(tf.nn.softmax, spec(3, 7))) == ("Softmax", Cost(105, 0))


def test_activation_and_bias_gradients() -> None:
    # ReluGrad 1 per element: 10; BiasAddGrad sums the 4*5 = 20 gradient elements
    assert formula("ReluGrad", [(2, 5), (2, 5)], [(2, 5)]) == Cost(10, 0)
    assert formula("BiasAddGrad", [(4, 5)], [(5,)]) == Cost(20, 0)


# --- reductions and pooling ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (lambda x: tf.reduce_sum(x, axis=1), "Sum"),
        (lambda x: tf.reduce_mean(x, axis=1), "Mean"),
        (lambda x: tf.reduce_max(x, axis=1), "Max"),
        (lambda x: tf.argmax(x, axis=1), "ArgMax"),
    ],
)
def test_reductions_are_one_per_input_element(fn: Callable[..., Any], op: str) -> None:
    # 3*4 = 12 input elements
    assert only_op(count(fn, spec(3, 4))) == (op, Cost(12, 0))


@pytest.mark.parametrize(("fn", "op"), [(tf.nn.max_pool2d, "MaxPool"), (tf.nn.avg_pool2d, "AvgPool")])
def test_pooling_is_the_window_per_output(fn: Callable[..., Any], op: str) -> None:
    # 4x4 to 2x2 on 2 channels: 8 outputs * 2*2 window = 32
    assert only_op(count(lambda x: fn(x, 2, 2, "VALID"), spec(1, 4, 4, 2))) == (op, Cost(32, 0))


def test_pool_gradients_are_the_window_per_gradient_element() -> None:
    # 8 gradient elements * 4 = 32
    assert formula("MaxPoolGrad", [(1, 4, 4, 2), (1, 2, 2, 2), (1, 2, 2, 2)], [(1, 4, 4, 2)], ksize=[1, 2, 2, 1]) == (
        32,
        0,
    )
    assert formula("AvgPoolGrad", [(4,), (1, 2, 2, 2)], [(1, 4, 4, 2)], ksize=[1, 2, 2, 1]) == (32, 0)


def test_top_k_selects_then_sorts_the_picks() -> None:
    # 2*8 = 16 comparisons, then 2 rows * 3 * ceil(log2 3) = 12
    assert only_op(count(lambda x: tf.math.top_k(x, 3).values, spec(2, 8))) == ("TopKV2", Cost(28, 0))


# --- free and unknown ops ------------------------------------------------------------------------------------------


def test_layout_ops_are_free() -> None:
    def layout(x: Any) -> Any:
        y = tf.transpose(tf.reshape(x, (4, 6)))
        return tf.concat([tf.identity(y), tf.cast(y, tf.float32)], axis=0)[:, 1]

    report = count(layout, spec(2, 12))
    assert (report.flops, report.skipped_ops) == (0, {})


def test_an_op_without_formula_is_skipped_never_zero() -> None:
    report = count(tf.linalg.inv, spec(3, 3))
    assert report.skipped_ops["MatrixInverse"].reason == "no formula"
    assert report.skipped_ops["MatrixInverse"].calls == 1


def test_the_documented_op_formula_runs(documented_example: Callable[[str, str], str]) -> None:
    """docs/formulas.md, "TensorFlow ops": an op type without a formula, skipped, then n**3 = 4**3 = 64 (its
    asserts), through the public count()."""
    from pytest_flopbudget.formulas import registered_formulas

    code = documented_example("formulas.md", "TensorFlow ops")
    assert 'backend="tensorflow"' in code
    try:
        exec(compile(code, "docs/formulas.md", "exec"), {"__name__": "formulas_md"})
    finally:
        for handle in registered_formulas():
            handle.remove()
