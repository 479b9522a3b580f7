"""The JAX formula table, one primitive at a time, each figure derived by hand from the shared conventions."""

from __future__ import annotations

from typing import Any, Callable

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_jax  # noqa: E402
from pytest_flopbudget._counting.jax.ops import conv_general_dilated_cost, dot_general_cost  # noqa: E402
from pytest_flopbudget._metrics import BYTES  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

F32 = jnp.float32


def spec(*shape: int, dtype: Any = F32) -> Any:
    return jax.ShapeDtypeStruct(shape, dtype)


def count(fn: Callable[..., Any], *args: Any) -> Report:
    return count_jax(fn, args)


def only_op(report: Report) -> tuple[str, Cost]:
    """The one priced primitive of a report and its cost."""
    # free ops that only move bytes (an argsort's iota, a concat) are in the layers too: not priced
    ops = {op: cost for layer in report.layers.values() for op, cost in layer.ops.items() if set(cost.values) - {BYTES}}
    assert len(ops) == 1, ops
    [(name, cost)] = ops.items()
    return name, Cost(cost.flops, cost.macs, cost.int_ops)


# --- dot_general ------------------------------------------------------------------------------------------------


def test_matmul_is_two_m_n_k() -> None:
    # 2*M*N*K = 2*4*5*6 = 240 FLOPs, M*N*K = 120 MACs
    assert only_op(count(jnp.matmul, spec(4, 6), spec(6, 5))) == ("dot_general", Cost(240, 120))


def test_batch_dims_multiply() -> None:
    # B*M*N*K = 3*4*5*6 = 360 MACs, 720 FLOPs
    report = count(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), spec(3, 4, 6), spec(3, 6, 5))
    assert only_op(report) == ("dot_general", Cost(720, 360))


def test_several_contracting_dims_multiply_into_k() -> None:
    # lhs (2,3,4) . rhs (3,4,5) over (1,2)x(0,1): M=2, K=3*4=12, N=5: 2*12*5 = 120 MACs, 240 FLOPs
    def fn(a: Any, b: Any) -> Any:
        return lax.dot_general(a, b, (((1, 2), (0, 1)), ((), ())))

    assert only_op(count(fn, spec(2, 3, 4), spec(3, 4, 5))) == ("dot_general", Cost(240, 120))
    assert dot_general_cost((2, 3, 4), (3, 4, 5), (((1, 2), (0, 1)), ((), ()))) == Cost(240, 120)


def test_batch_and_contracting_dims_together() -> None:
    # lhs (7,2,3) . rhs (7,3,5), batch 0x0, contract 2x1: B=7, M=2, K=3, N=5: 7*2*3*5 = 210 MACs
    assert dot_general_cost((7, 2, 3), (7, 3, 5), (((2,), (1,)), ((0,), (0,)))) == Cost(420, 210)


def test_integer_dot_general_counts_int_ops() -> None:
    # int32 (4,6) @ (6,5): 2*4*5*6 = 240 integer ops, no FLOPs, no MACs (torch's integer matmul rule)
    report = count(jnp.matmul, spec(4, 6, dtype=jnp.int32), spec(6, 5, dtype=jnp.int32))
    assert only_op(report) == ("dot_general", Cost(0, 0, 240))
    assert (report.flops, report.macs, report.int_ops) == (0, 0, 240)


def test_dense_layer_with_bias_is_tensorflows_7425() -> None:
    # X[25,16] @ W[16,9] + b[9]: 2*25*16*9 + 25*9 = 7200 + 225 = 7425 FLOPs, 3600 MACs (REFERENCE.md)
    report = count(lambda x, w, b: x @ w + b, spec(25, 16), spec(16, 9), spec(9))
    assert (report.flops, report.macs) == (7425, 3600)


# --- conv_general_dilated ---------------------------------------------------------------------------------------

NHWC = ("NHWC", "HWIO", "NHWC")


def conv(x: Any, w: Any, **kw: Any) -> Any:
    kw.setdefault("window_strides", (1, 1))
    kw.setdefault("padding", "SAME")
    return lax.conv_general_dilated(x, w, dimension_numbers=NHWC, **kw)


def test_conv_counts_full_taps_under_padding() -> None:
    # out (1,8,8,4) = 256 elements, each 3 in-channels * 3*3 taps: 256*27 = 6912 MACs, 13824 FLOPs (the padded
    # border taps count: the conventions' full-tap rule, not XLA's valid taps)
    assert only_op(count(conv, spec(1, 8, 8, 3), spec(3, 3, 3, 4))) == ("conv_general_dilated", Cost(13824, 6912))


def test_conv_a_keras_one_by_one_is_two_flops() -> None:
    # Conv2D(1, (1,1)) on 1x1x1x1: 1 MAC, 2 FLOPs (REFERENCE.md)
    assert only_op(count(conv, spec(1, 1, 1, 1), spec(1, 1, 1, 1))) == ("conv_general_dilated", Cost(2, 1))


def test_conv_stride_follows_the_output() -> None:
    # VALID, stride 2 on 9x9 with 3x3: out 4x4x4 = 64 elements * 27 = 1728 MACs
    def fn(x: Any, w: Any) -> Any:
        return conv(x, w, window_strides=(2, 2), padding="VALID")

    assert only_op(count(fn, spec(1, 9, 9, 3), spec(3, 3, 3, 4))) == ("conv_general_dilated", Cost(3456, 1728))


def test_conv_feature_groups_divide_input_channels() -> None:
    # 6 in-channels in 3 groups: kernel (3,3,2,6); out 8*8*6 = 384 elements * 2 * 9 = 6912 MACs
    def fn(x: Any, w: Any) -> Any:
        return conv(x, w, feature_group_count=3)

    assert only_op(count(fn, spec(1, 8, 8, 6), spec(3, 3, 2, 6))) == ("conv_general_dilated", Cost(13824, 6912))


def test_conv_depthwise() -> None:
    # depthwise 4 channels: kernel (3,3,1,4); out 8*8*4 = 256 elements * 1 * 9 = 2304 MACs
    def fn(x: Any, w: Any) -> Any:
        return conv(x, w, feature_group_count=4)

    assert only_op(count(fn, spec(1, 8, 8, 4), spec(3, 3, 1, 4))) == ("conv_general_dilated", Cost(4608, 2304))


def test_conv_rhs_dilation_keeps_the_taps() -> None:
    # a 3x3 kernel dilated by 2 still has 9 taps: 256 * 3 * 9 = 6912 MACs
    def fn(x: Any, w: Any) -> Any:
        return conv(x, w, rhs_dilation=(2, 2))

    assert only_op(count(fn, spec(1, 8, 8, 3), spec(3, 3, 3, 4))) == ("conv_general_dilated", Cost(13824, 6912))


def test_conv_batch_groups() -> None:
    # NCHW lhs (4,3,5,5), OIHW rhs (6,3,3,3), batch_group_count=2: out (2,6,3,3) = 108 elements, each over the
    # kernel's 3 in-channels * 9 taps: 108*27 = 2916 MACs
    def fn(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=2)

    assert only_op(count(fn, spec(4, 3, 5, 5), spec(6, 3, 3, 3))) == ("conv_general_dilated", Cost(5832, 2916))


def test_transposed_conv_follows_the_input() -> None:
    # conv_transpose of x (1,4,4,3) by a 3x3 kernel to 5 channels, stride 2: each of the 1*3*16 input elements is
    # scattered through 5 * 9 taps: 48*45 = 2160 MACs (formulas.conv_transpose, torch's rule), not out*taps
    def fn(x: Any, w: Any) -> Any:
        return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=NHWC)

    assert only_op(count(fn, spec(1, 4, 4, 3), spec(3, 3, 3, 5))) == ("conv_general_dilated", Cost(4320, 2160))


def test_conv_cost_function_reads_dimension_numbers() -> None:
    # NCHW/OIHW/NCHW as jax's ConvDimensionNumbers write them: (0,1,2,3) each; out (1,4,6,6), kernel (4,3,3,3):
    # 144 * 27 = 3888 MACs
    numbers = ((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
    assert conv_general_dilated_cost((1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 6, 6), numbers) == Cost(7776, 3888)


# --- elementwise, reductions, sorting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "primitive"),
    [
        (jnp.exp, "exp"),
        (jnp.tanh, "tanh"),
        (jnp.log, "log"),
        (jnp.sqrt, "sqrt"),
        (lax.rsqrt, "rsqrt"),
        (jax.nn.sigmoid, "logistic"),
        (lax.erf, "erf"),
        (jnp.negative, "neg"),
        (jnp.sin, "sin"),
        (jnp.abs, "abs"),
    ],
)
def test_unary_elementwise_is_one_per_element(fn: Callable[[Any], Any], primitive: str) -> None:
    # (3,4): 12 elements, 1 FLOP each (formulas.ELEMENTWISE, the torch and ONNX figure)
    assert only_op(count(fn, spec(3, 4))) == (primitive, Cost(12, 0))


@pytest.mark.parametrize(
    ("fn", "primitive"),
    [
        (lax.add, "add"),
        (lax.sub, "sub"),
        (lax.mul, "mul"),
        (lax.div, "div"),
        (lax.max, "max"),
        (lax.min, "min"),
        (lax.pow, "pow"),
        (lax.lt, "lt"),
        (lax.eq, "eq"),
        (lax.atan2, "atan2"),
    ],
)
def test_binary_elementwise_is_one_per_output_element(fn: Callable[[Any, Any], Any], primitive: str) -> None:
    # (3,4) op (3,4): 12 output elements, 1 FLOP each
    assert only_op(count(fn, spec(3, 4), spec(3, 4))) == (primitive, Cost(12, 0))


def test_relu_is_one_max_per_element() -> None:
    # jax.nn.relu is a custom_jvp_call around max(x, 0): 2*3 = 6 FLOPs, counted once (the jvp rule is not run)
    assert only_op(count(jax.nn.relu, spec(2, 3))) == ("max", Cost(6, 0))


def test_integer_pow_is_one_per_element() -> None:
    # x**2 on (5,): 5 FLOPs
    assert only_op(count(lambda x: x**2, spec(5))) == ("integer_pow", Cost(5, 0))


@pytest.mark.parametrize(
    ("fn", "primitive"),
    [
        (lambda x: x.sum(axis=1), "reduce_sum"),
        (lambda x: x.max(axis=0), "reduce_max"),
        (lambda x: x.min(), "reduce_min"),
        (lambda x: x.prod(axis=1), "reduce_prod"),
        (lambda x: jnp.argmax(x, axis=1), "argmax"),
        (lambda x: jnp.argmin(x, axis=0), "argmin"),
        (lambda x: lax.cumsum(x, axis=1), "cumsum"),
        (lambda x: lax.cummax(x, axis=0), "cummax"),
    ],
)
def test_reductions_are_one_per_input_element(fn: Callable[[Any], Any], primitive: str) -> None:
    # (3,4): 12 input elements, 1 FLOP each (formulas.REDUCTION), whatever the axis
    assert only_op(count(fn, spec(3, 4))) == (primitive, Cost(12, 0))


def test_sort_is_a_comparison_sort_per_row() -> None:
    # 3 rows of 8: 8 * ceil(log2 8) = 24 per row, 72 in all
    assert only_op(count(lambda x: jnp.sort(x, axis=-1), spec(3, 8))) == ("sort", Cost(72, 0))


def test_argsort_sorts_once() -> None:
    # argsort sorts the keys with an iota along: the same 72 (the iota is free, the carried operand adds nothing)
    assert only_op(count(lambda x: jnp.argsort(x, axis=-1), spec(3, 8))) == ("sort", Cost(72, 0))


def test_top_k_selects_then_sorts_the_picks() -> None:
    # (3,8), k=4: one comparison per input element (24) + each row's 4 picks sorted, 4 * ceil(log2 4) = 8 per row
    # (24): 48, as torch's topk and ONNX TopK
    assert only_op(count(lambda x: lax.top_k(x, 4)[0], spec(3, 8))) == ("top_k", Cost(48, 0))


def test_max_pool_is_one_compare_per_window_element() -> None:
    # (1,4,4,2), window 2x2, stride 2: out (1,2,2,2) = 8 elements * 4 = 32 (formulas.pool)
    def fn(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    assert only_op(count(fn, spec(1, 4, 4, 2))) == ("reduce_window_max", Cost(32, 0))


def test_max_pool_gradient_is_the_window_per_gradient_element() -> None:
    # the gradient of that pool wrt x: select_and_scatter_add over the (1,2,2,2) output gradient, 8 elements * 4
    # window taps = 32, as torch's max_pool2d_with_indices_backward and TensorFlow's MaxPoolGrad
    def fn(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()

    report = count_jax(jax.grad(fn), (spec(1, 4, 4, 2),))
    ops = {op: cost.flops for layer in report.layers.values() for op, cost in layer.ops.items()}
    # forward: the pool 32 and its sum 8; backward: the scatter 32
    assert ops == {"reduce_window_max": 32, "reduce_sum": 8, "select_and_scatter_add": 32}
    assert report.skipped_ops == {}


def test_layout_ops_are_free_and_not_recorded() -> None:
    def fn(x: Any) -> Any:
        y = x.reshape(4, 3).T.astype(jnp.float16)[1:, :2]
        y = jnp.concatenate([y, y], axis=0)
        y = jnp.broadcast_to(y[None], (2, *y.shape)).squeeze() if y.shape[0] == 1 else y
        return jnp.expand_dims(y, 0), jnp.arange(5), lax.stop_gradient(y), jnp.where(y > 0, y, y)

    report = count(fn, spec(3, 4))
    ops = {op: cost for layer in report.layers.values() for op, cost in layer.ops.items()}
    # only the comparison of `where` is arithmetic: 4x2 = 8 output elements of `gt`; the copies among the free
    # primitives are recorded for the bytes they move alone (test_jax_memory.py), the views not at all
    assert {op for op, cost in ops.items() if cost.flops} == {"gt"}
    assert set(ops) == {"gt", "convert_element_type", "concatenate", "jax.numpy.arange", "select_n"}
    assert report.flops == 8
    assert report.skipped_ops == {}


def test_a_primitive_without_formula_is_skipped_by_name() -> None:
    report = count(jnp.fft.fft, spec(8, dtype=jnp.complex64))
    assert report.flops == 0
    assert set(report.skipped_ops) == {"fft"}
    assert report.skipped_ops["fft"].reason == "no formula"
    assert report.skipped_ops["fft"].calls == 1


def test_softmax_is_the_shared_five_per_element() -> None:
    # jax.nn.softmax on (4,8) is a named composite: 5 * 32 = 160, the shared SOFTMAX rule; its primitives (reduce_max,
    # the guard max(-inf, row max) per row, sub, exp, reduce_sum, div: 164) are not counted one by one
    # (test_jax_composites.py has every composite)
    assert only_op(count(jax.nn.softmax, spec(4, 8))) == ("jax.nn.softmax", Cost(160, 0))


def test_same_padding_counts_the_taps_xla_leaves_out() -> None:
    # jax-ml/jax#17912: a 2x2 "same" convolution on a 4x4 input (1 -> 2 channels). Full taps: 16 outputs * 2
    # channels * 4 taps = 128 MACs, 256 FLOPs, Keras's figure. XLA's cost analysis says 196: it counts only the taps
    # that land inside the input (7 per axis, 49 of 64 positions: 2 * 2 * 49). The conventions count full taps.
    assert only_op(count(conv, spec(1, 4, 4, 1), spec(2, 2, 1, 2))) == ("conv_general_dilated", Cost(256, 128))


def test_the_documented_primitive_formula_runs(documented_example: Callable[[str, str], str]) -> None:
    """docs/formulas.md, "JAX primitives": a custom primitive, skipped, then 8 per element: 8*4*6 = 192 (its
    asserts)."""
    from pytest_flopbudget.formulas import registered_formulas

    code = documented_example("formulas.md", "JAX primitives")
    assert 'backend="jax"' in code
    try:
        exec(compile(code, "docs/formulas.md", "exec"), {"__name__": "formulas_md"})
    finally:
        for handle in registered_formulas():
            handle.remove()
