"""The TensorFlow engine's memory metrics, derived by hand: `bytes` per graph op, `param-bytes` of the weights
counted as parameters, and `peak-memory` by liveness over the traced graph; a loop body's bytes count as often
as it runs; what the graph does not size is not measured."""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

from pytest_flopbudget._counting.graph_memory import PEAK_CONVENTION  # noqa: E402
from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.memory import BYTES_CONVENTION  # noqa: E402
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, PARAM_BYTES, PEAK_MEMORY  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


def spec(*shape: int | None, dtype: Any = None) -> Any:
    return tf.TensorSpec(shape, dtype or tf.float32)


def mlp() -> Any:
    return keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="fc1"), keras.layers.Dense(2, name="fc2")]
    )


def test_a_dense_layer_moves_its_matmul_and_its_bias_add() -> None:
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="fc")])
    report = count_tf(model, [spec(25, 16)])
    ops = report.layers["fc"].ops
    # MatMul: reads x 25*16*4 = 1600 and the kernel 16*9*4 = 576 (ReadVariableOp: a view of the variable), writes
    # 25*9*4 = 900: 3076; BiasAdd: reads 900 and the bias 9*4 = 36, writes 900: 1836. The JAX engine's dot_general
    # and add move the same.
    assert (ops["MatMul"].get(BYTES), ops["BiasAdd"].get(BYTES)) == (3076, 1836)
    assert report.bytes == 4912
    assert report.param_bytes == (16 * 9 + 9) * 4
    assert report.optional_metrics == {BYTES, PARAM_BYTES, PEAK_MEMORY}  # Keras has no buffers apart from weights
    assert report.conventions[BYTES] == BYTES_CONVENTION
    assert report.conventions[PEAK_MEMORY] == PEAK_CONVENTION


def test_a_two_layer_mlp_peaks_with_the_first_layers_two_activations_alive() -> None:
    report = count_tf(mlp(), [spec(2, 4)])
    # alive throughout: the variables (4*8 + 8 + 8*2 + 2)*4 = 232 and the input 32: 264. MatMul [2,8]: +64 = 328;
    # BiasAdd: +64 = 392 (the product still alive), product freed: 328; Relu +64 = 392 (not above); fc2's MatMul
    # and BiasAdd +16 each. The peak, 392, is first reached in fc1, as in the JAX and PyTorch engines.
    assert (report.peak_memory, report.peak_layer) == (392, "fc1")
    # MatMul 32 + 128 + 64, BiasAdd 64 + 32 + 64, Relu 64 + 64; fc2 MatMul 64 + 64 + 16, BiasAdd 16 + 8 + 16
    assert report.bytes == 224 + 160 + 128 + 144 + 40 == 696


def test_training_peaks_in_the_backward_with_the_gradients_alive() -> None:
    report = count_tf(mlp(), [spec(2, 4)], training=True)
    # alive throughout: 264 (as above) and the constants: the Sum's axes int32[2] 8, the loss's seed `ones` 4, the
    # seed's shape 8 and the Tile's multiples 8: 292. Forward: MatMul 64 (356), BiasAdd 64 (420; product freed:
    # 356), Relu 64 (420; BiasAdd freed: 356), fc2 MatMul 16 (372), BiasAdd 16 (388; product freed: 372), the loss
    # 4 (376; the model's output is let go: 360). Backward: Tile [2,2] 16 (376), fc2's bias gradient 8 (384), the
    # gradient of the relu [2,8] 64 (448), fc2's kernel gradient [8,2] 64 (512; Tile freed: 496), ReluGrad 64 (560;
    # its two operands freed: 432), fc1's bias gradient 32 (464), fc1's kernel gradient [4,8] 128 (592).
    assert (report.peak_memory, report.peak_layer) == (592, "fc1")


def test_a_loop_of_three_layers_moves_three_times_its_layer() -> None:
    weights = tf.Variable(tf.zeros((3, 8, 8)))

    @tf.function
    def loop(x: Any) -> Any:
        step = lambda i, x: (i + 1, tf.tanh(tf.matmul(x, tf.gather(weights, i))))  # noqa: E731
        return tf.while_loop(lambda i, x: i < 3, step, (0, x))[1]

    report = count_tf(loop, [spec(2, 8)])
    ops = report.layers["while"].ops
    # one layer: MatMul reads x 2*8*4 = 64 and w 256, writes 64: 384; Tanh 64 + 64 = 128; the JAX engine's layer
    # moves the same 512
    assert ops["MatMul"].get(BYTES) + ops["Tanh"].get(BYTES) == 3 * (384 + 128)
    # the gather of w[i] reads i (4) and the row it gathers (256), writes 256: 516 a trip; each trip also adds 1 to
    # i and to TensorFlow's loop counter (12 each: two int32 read, one written), and the condition's Less runs 4
    # times (two int32 read, a bool written: 9)
    assert ops["ResourceGather"].get(BYTES) == 3 * 516
    assert report.bytes == 3 * (384 + 128 + 516 + 2 * 12) + 4 * 9 == 3192
    # alive throughout: w 768, x 64, the six int32 constants 24 (0, the loop's cap and counter start, the body's
    # two 1s, the condition's 3): 856; the loop's results (three int32, 12, and the new x, 64): 932; the body's own
    # peak: i + 1 (4), the gathered row (256) and the product (64) at once: 324. 932 + 324 = 1256.
    assert report.peak_memory == 1256


def test_a_conditional_peaks_with_its_costlier_branch() -> None:
    @tf.function
    def branch(p: Any, x: Any) -> Any:
        return tf.cond(p, lambda: x + 1, lambda: tf.exp(x) * 2)

    report = count_tf(branch, [spec(dtype=tf.bool), spec(2, 3)])
    # p 1 + x 24 + the branches' constants 1.0 and 2.0 (4 each) = 33; the If's result 24: 57; the else branch's own
    # peak, exp and its product at once: 48. 57 + 48 = 105.
    assert report.peak_memory == 105
    # bytes: the costlier branch's, as its FLOPs: Exp 24 + 24, Mul 24 + 4 + 24
    assert report.bytes == 48 + 52


def test_an_unknown_dimension_leaves_bytes_and_peak_not_measured() -> None:
    report = count_tf(tf.function(lambda x: tf.tanh(x) + 1), [spec(None, 3)])
    assert set(report.skipped) == {"Tanh", "AddV2"}
    assert not report.measures(BYTES) and not report.measures(PEAK_MEMORY)
    assert report.conventions[BYTES] == "not measured: a tensor of Tanh in the model has no known size"
    assert report.conventions[PEAK_MEMORY] == "not measured: an input's size is not known"
    assert "bytes" not in report.to_dict()["totals"]


def test_a_tensor_list_has_no_size_in_the_graph() -> None:
    # Keras' recurrent layers keep their time steps in a TensorList: a variant, whose bytes the graph does not give
    model = keras.Sequential([keras.Input((5, 4)), keras.layers.LSTM(6, name="lstm")])
    report = count_tf(model, [spec(2, 5, 4)])
    assert report.flops > 0 and not report.skipped
    assert not report.measures(BYTES) and not report.measures(PEAK_MEMORY)
    assert report.conventions[PEAK_MEMORY].startswith("not measured: the size of an output of TensorList")
    assert report.param_bytes == 4 * (4 * 24 + 6 * 24 + 24)  # kernel, recurrent kernel, bias: 4 gates of 6 units


def test_keras_moving_statistics_are_parameter_bytes() -> None:
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8), keras.layers.BatchNormalization(name="bn"), keras.layers.Dense(2)]
    )
    report = count_tf(model, [spec(2, 4)])
    # Keras counts the moving mean and variance among its weights (`count_params`), so their bytes are param-bytes:
    # gamma, beta, moving mean and moving variance, 4*8*4 = 128
    assert report.layers["bn"].get(PARAM_BYTES) == 128
    assert report.param_bytes == (4 * 8 + 8) * 4 + 128 + (8 * 2 + 2) * 4
    assert not report.measures(BUFFER_BYTES)


def test_a_report_with_memory_reads_back_from_json() -> None:
    report = count_tf(mlp(), [spec(2, 4)], training=True)
    data = report.to_dict()
    assert data["peak_memory"] == {"bytes": 592, "layer": "fc1"}
    again = Report.from_dict(data)
    assert again == report
    assert again.optional_metrics == {BYTES, PARAM_BYTES, PEAK_MEMORY}


def test_a_saved_model_counts_the_memory_its_keras_model_counts(tmp_path: Any) -> None:
    from pytest_flopbudget._counting.tensorflow.saved_model import count_saved_model, signature_inputs

    model = mlp()
    model.export(str(tmp_path), verbose=False)
    (name,) = [each.name for each in signature_inputs(tmp_path)]
    saved = count_saved_model(tmp_path, {name: [2, 4]})
    keras_count = count_tf(model, [spec(2, 4)])
    # the variables (VarHandleOps: shapes and dtypes from the graph, nothing read from variables/) 232 bytes, the
    # fed input 32; the same ops: 696 bytes moved, the peak 392
    figures = (saved.bytes, saved.param_bytes, saved.peak_memory)
    assert figures == (keras_count.bytes, keras_count.param_bytes, keras_count.peak_memory) == (696, 232, 392)


def test_a_functions_captured_variables_are_its_parameter_bytes() -> None:
    weights = tf.Variable(tf.zeros((4, 3)))

    @tf.function
    def project(x: Any) -> Any:
        return tf.matmul(x, weights)

    report = count_tf(project, [spec(2, 4)])
    # the variable 4*3*4 = 48 bytes; MatMul reads x 32 and it, writes 2*3*4 = 24: 104, also the peak (48 + 32 + 24)
    assert (report.params, report.param_bytes, report.bytes, report.peak_memory) == (12, 48, 104, 104)
