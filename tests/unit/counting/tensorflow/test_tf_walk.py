"""Control flow in a TensorFlow graph: loops count trip times, branches by the costlier one, calls once."""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")

from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.walk import CAPPED_TRIP, DYNAMIC_TRIP  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

M = tf.TensorSpec([4, 4], tf.float32)
#: One [4, 4] @ [4, 4] matmul: 2*4*4*4 = 128 FLOPs, 64 MACs.
MATMUL = 128


def calls(report: Report, op: str) -> int:
    return sum(layer.ops[op].calls for layer in report.layers.values() if op in layer.ops)


def flops(report: Report, op: str) -> int:
    return sum(layer.ops[op].flops for layer in report.layers.values() if op in layer.ops)


def test_a_range_loop_counts_its_body_trip_times() -> None:
    @tf.function
    def loop(x: Any) -> Any:
        for _ in tf.range(3):
            x = tf.matmul(x, x)
        return x

    report = count_tf(loop, [M])
    # the body 3 times: 3 matmuls, 3*128 = 384 FLOPs, 3*64 = 192 MACs
    assert (calls(report, "MatMul"), flops(report, "MatMul"), report.macs) == (3, 3 * MATMUL, 192)
    # the condition's Less 3 + 1 = 4 times; the body's two counter adds (range index and loop counter) 3 times each
    assert calls(report, "Less") == 4
    assert report.skipped_ops == {} and report.estimated_ops == {}  # exact: the bounds are constants


def test_a_range_loop_with_a_step() -> None:
    @tf.function
    def loop(x: Any) -> Any:
        for _ in tf.range(1, 8, 3):  # 1, 4, 7: ceil((8 - 1) / 3) = 3 trips
            x = tf.matmul(x, x)
        return x

    assert calls(count_tf(loop, [M]), "MatMul") == 3


def test_maximum_iterations_fixes_a_data_dependent_loop() -> None:
    def step(i: Any, x: Any) -> Any:
        return i + 1, tf.matmul(x, x)

    @tf.function
    def loop(x: Any) -> Any:
        return tf.while_loop(lambda i, x: tf.reduce_sum(x) < 10.0, step, (0, x), maximum_iterations=5)[1]

    report = count_tf(loop, [M])
    # the cap: 5 trips of the body, 5 matmuls; the condition's reduce_sum 6 times over 16 elements
    assert calls(report, "MatMul") == 5
    assert flops(report, "Sum") == 6 * 16
    assert report.skipped_ops == {}
    # an upper bound, not an exact count: the loop is listed among the estimated ops with the rule
    [(op, estimated)] = report.estimated_ops.items()
    assert op in ("While", "StatelessWhile")
    assert (estimated.rule, estimated.calls) == (CAPPED_TRIP, 1)


def test_a_capped_loop_whose_condition_is_always_true_counts_the_cap_exactly() -> None:
    @tf.function
    def loop(x: Any) -> Any:
        return tf.while_loop(lambda x: True, lambda x: (tf.matmul(x, x),), (x,), maximum_iterations=3)[0]

    report = count_tf(loop, [M])
    assert calls(report, "MatMul") == 3  # the cap is the trip count, and no data decides it
    assert report.estimated_ops == {}


def test_a_while_loop_without_a_known_trip_count_is_skipped() -> None:
    @tf.function
    def loop(x: Any) -> Any:
        return tf.while_loop(lambda x: tf.reduce_sum(x) < 10.0, lambda x: (tf.matmul(x, x),), (x,))[0]

    report = count_tf(loop, [M])
    assert report.macs == 0
    [(op, skipped)] = report.skipped_ops.items()
    assert op in ("While", "StatelessWhile")
    assert (skipped.reason, skipped.calls) == (DYNAMIC_TRIP, 1)


def test_an_if_counts_its_costlier_branch() -> None:
    @tf.function
    def branch(x: Any, p: Any) -> Any:
        if p > 0:
            return tf.matmul(x, x)
        return x + 1.0

    report = count_tf(branch, [M, tf.TensorSpec([], tf.float32)])
    # the matmul branch (128) beats the add (16); plus the predicate's Greater (1)
    assert report.flops == MATMUL + 1
    assert calls(report, "AddV2") == 0


def test_a_cheaper_branchs_skipped_ops_are_still_reported() -> None:
    @tf.function
    def branch(x: Any, p: Any) -> Any:
        return tf.cond(p > 0, lambda: tf.matmul(x, x), lambda: tf.linalg.inv(x))

    report = count_tf(branch, [M, tf.TensorSpec([], tf.float32)])
    assert report.flops == MATMUL + 1
    assert report.skipped_ops["MatrixInverse"].calls == 1


def test_a_switch_case_counts_its_costliest_branch() -> None:
    @tf.function
    def switch(x: Any, i: Any) -> Any:
        return tf.switch_case(i, [lambda: x + 1.0, lambda: tf.matmul(x, x), lambda: x * 2.0])

    assert count_tf(switch, [M, tf.TensorSpec([], tf.int32)]).flops == MATMUL


def test_a_nested_function_is_counted_once_per_call() -> None:
    @tf.function
    def inner(x: Any) -> Any:
        return tf.matmul(x, x)

    @tf.function
    def outer(x: Any) -> Any:
        return inner(inner(x))

    report = count_tf(outer, [M])
    assert (calls(report, "MatMul"), report.flops) == (2, 2 * MATMUL)


def test_a_loop_inside_a_called_function() -> None:
    @tf.function
    def inner(x: Any) -> Any:
        for _ in tf.range(2):
            x = tf.matmul(x, x)
        return x

    @tf.function
    def outer(x: Any) -> Any:
        return inner(x)

    assert calls(count_tf(outer, [M]), "MatMul") == 2


def test_ops_nothing_uses_are_not_counted() -> None:
    @tf.function
    def fn(x: Any) -> Any:
        tf.matmul(x, x)  # dead: TensorFlow prunes it before the function runs
        return x + 1.0

    report = count_tf(fn, [M])
    assert (report.flops, calls(report, "MatMul")) == (16, 0)


def test_a_keras_lstm_loop_counts_every_time_step() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend in this process")
    import numpy as np

    model = keras.Sequential([keras.Input((5, 4)), keras.layers.LSTM(6, name="lstm")])
    report = count_tf(model, [np.zeros((2, 5, 4), np.float32)])
    # its loop is bounded by Max(5 time steps): 5 trips of the cell, each an input and a recurrent matmul:
    # 2*24*4 + 2*24*6 = 480 MACs per step, 2400 in all, as torch's LSTM rule (formulas.rnn_cell) multiplies
    assert report.layers["lstm.lstm_cell"].ops["MatMul"].calls == 10
    assert report.macs == 5 * 480
    assert report.skipped_ops == {}
