"""count_tf: Keras models and tf.functions, the founding cases, layer names, parameters, specs, training."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import numpy as np  # noqa: E402

from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.walk import UNKNOWN_SHAPE  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


def test_a_one_by_one_conv_with_one_filter_is_one_mac() -> None:
    # one output element, one input channel, one tap: 1 MAC = 2 FLOPs; no bias; 1 weight
    model = keras.Sequential([keras.Input((1, 1, 1)), keras.layers.Conv2D(1, 1, use_bias=False, name="conv")])
    report = count_tf(model, [np.zeros((1, 1, 1, 1), np.float32)])
    assert (report.flops, report.macs, report.params) == (2, 1, 1)
    assert report.layers["conv"].ops["Conv2D"].flops == 2


def test_dense_nine_on_25_by_16_is_7425_flops() -> None:
    # 2*M*N*K = 2*25*9*16 = 7200 for the matmul, + 25*9 = 225 for the bias add; params 16*9 + 9 = 153
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="dense")])
    report = count_tf(model, [np.zeros((25, 16), np.float32)])
    assert (report.flops, report.macs, report.params) == (7425, 3600, 153)
    assert report.layers["dense"].ops["MatMul"].flops == 7200
    assert report.layers["dense"].ops["BiasAdd"].flops == 225


def test_layers_are_named_as_the_summary_names_them() -> None:
    inner = keras.Sequential([keras.layers.Dense(8, name="d")], name="block")
    x = keras.Input((8,))
    y = keras.layers.Dense(8, name="dense_1")(inner(x))  # a user name that Keras' own scope would also produce
    model = keras.Model(x, keras.layers.Dense(8, name="dense")(y), name="outer")
    report = count_tf(model, [np.zeros((2, 8), np.float32)])
    # each Dense(8) on 2 rows: 2*2*8*8 + 2*8 = 272 FLOPs, 72 params
    assert {path: (layer.flops, layer.params) for path, layer in report.layers.items()} == {
        "block.d": (272, 72),
        "dense_1": (272, 72),
        "dense": (272, 72),
    }
    assert report.model == "outer"


def test_a_shared_layer_is_charged_twice_and_its_weights_once() -> None:
    x = keras.Input((8,))
    shared = keras.layers.Dense(8, name="shared")
    model = keras.Model(x, shared(shared(x)))
    report = count_tf(model, [np.zeros((2, 8), np.float32)])
    assert report.layers["shared"].ops["MatMul"].calls == 2
    assert (report.flops, report.params) == (2 * 272, 72)


def test_params_are_count_params_batch_norm_statistics_included() -> None:
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, name="fc"), keras.layers.BatchNormalization()])
    model.layers[0].trainable = False  # frozen weights are still weights
    report = count_tf(model, [np.zeros((3, 6), np.float32)])
    # fc 6*4 + 4 = 28; batch norm gamma, beta, moving mean and variance 4*4 = 16: model.count_params()
    assert report.params == model.count_params() == 28 + 16
    assert report.layers["batch_normalization"].params == 16


def test_keras_batch_norm_in_inference_is_priced_by_the_shared_rule() -> None:
    model = keras.Sequential([keras.Input((6,)), keras.layers.BatchNormalization(name="bn")])
    report = count_tf(model, [np.zeros((3, 6), np.float32)])
    # Keras folds the statistics per channel (5 ops on 6 channels) and applies x * scale + shift (2 per element):
    # 30 + 36 = 66 as written; the shared rule prices eval batch norm with affine 4 per element: 4*3*6 = 72
    assert report.layers["bn"].flops == report.flops == 72
    assert report.layers["bn"].ops["keras_rule"].flops == 72


def test_a_spec_with_an_unknown_dim_is_bound_by_shapes() -> None:
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9)])
    spec = tf.TensorSpec([None, 16], tf.float32)
    assert count_tf(model, [spec], shapes=[[25, 16]]).flops == 7425
    with pytest.raises(CountingError, match="does not fit"):
        count_tf(model, [spec], shapes=[[25, 15]])


def test_an_op_whose_shape_stays_unknown_is_skipped_with_the_reason() -> None:
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="fc")])
    report = count_tf(model, [tf.TensorSpec([None, 16], tf.float32)])
    assert report.flops == 0
    assert report.skipped_ops["MatMul"].reason == UNKNOWN_SHAPE
    assert report.skipped_ops["MatMul"].layers == ["fc"]
    assert report.skipped_ops["BiasAdd"].calls == 1


class Projection(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(tf.ones([16, 9]))

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
    def __call__(self, x: Any) -> Any:
        with tf.name_scope("proj"):
            return tf.matmul(x, self.w)


def test_a_function_traced_with_a_none_batch_counts_at_the_given_batch() -> None:
    # the input signature fixes a None batch: get_concrete_function returns that trace for any batch, so the engine
    # freezes it and imports it again at [25, 16]: 2*25*9*16 = 7200 FLOPs, where the trace alone knows no dim
    report = count_tf(Projection(), [tf.TensorSpec([25, 16], tf.float32)])
    assert (report.flops, report.macs, report.skipped_ops) == (7200, 3600, {})
    assert report.layers["proj"].ops["MatMul"].flops == 7200
    assert count_tf(Projection(), [tf.TensorSpec([None, 16], tf.float32)]).skipped_ops["MatMul"].calls == 1


def test_a_saved_models_serving_function_counts_at_the_given_batch(tmp_path: Any) -> None:
    tf.saved_model.save(Projection(), str(tmp_path / "projection"))
    loaded = tf.saved_model.load(str(tmp_path / "projection"))
    report = count_tf(loaded, [tf.TensorSpec([25, 16], tf.float32)])
    assert (report.flops, report.macs, report.skipped_ops) == (7200, 3600, {})


def test_a_plain_tf_function_names_layers_by_its_scopes() -> None:
    @tf.function
    def fn(x: Any) -> Any:
        with tf.name_scope("encoder"), tf.name_scope("proj"):
            y = tf.matmul(x, x)
        return tf.nn.relu(y)

    report = count_tf(fn, [tf.TensorSpec([4, 4], tf.float32)])
    # the matmul 2*4*4*4 = 128 in encoder.proj, the relu 16 at the root
    assert {path: layer.flops for path, layer in report.layers.items()} == {"encoder.proj": 128, "": 16}


def test_a_plain_python_function_is_traced_too() -> None:
    report = count_tf(lambda a, b: tf.matmul(a, b), [np.zeros((4, 6), np.float32), np.zeros((6, 5), np.float32)])
    assert (report.flops, report.macs) == (240, 120)


def test_a_training_step_counts_the_backward_of_the_weights() -> None:
    model = keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(32, name="fc1"), keras.layers.Dense(10, name="fc2")]
    )
    report = count_tf(model, [np.zeros((4, 16), np.float32)], training=True)
    # forward: fc1 2*4*32*16 + 128 = 4224, fc2 2*4*10*32 + 40 = 2600, the loss's sum over 40 outputs
    assert report.forward.flops == 4224 + 2600 + 40
    # backward MACs: fc2's weight and input gradients 2 * 4*10*32, fc1's weight gradient 4*32*16; the input gets
    # none, as in a PyTorch training step
    assert report.backward.macs == 2 * 1280 + 2048
    # and the bias gradients sum the output gradients: 40 + 128
    assert report.layers["fc2"].ops["BiasAddGrad"].flops == 40
    assert report.layers["fc1"].ops["BiasAddGrad"].flops == 128
    assert report.training and report.skipped_ops == {}


def test_recompute_grads_recomputation_counts_in_the_backward() -> None:
    dense = keras.layers.Dense(8)
    dense.build((4, 8))

    @tf.recompute_grad
    def block(x: Any) -> Any:
        return tf.tanh(dense(x))

    report = count_tf(lambda x: block(block(x)), [tf.TensorSpec((4, 8), tf.float32)], training=True)
    # forward, each block: matmul 2*4*8*8 = 512, bias 32, tanh 32; twice = 1152, and the loss's sum 32: 1184. The
    # recomputation of the blocks is made outside the tape's scope, by the gradient function: backward, as PyTorch
    # counts a checkpoint's recomputation
    assert report.forward.flops == 2 * (512 + 32 + 32) + 32
    # backward MACs: the recomputed forward matmuls 2 * 256, and each block's weight and input gradients 2 * 2 * 256
    # (recompute_grad's gradient function differentiates with respect to its input too, the first block's included)
    assert report.backward.macs == 2 * 256 + 2 * 2 * 256


def test_a_custom_gradients_function_counts_in_the_backward() -> None:
    @tf.custom_gradient
    def exp(x: Any) -> Any:
        y = tf.exp(x)

        def gradient(dy: Any) -> Any:
            return dy * y * 3.0

        return y, gradient

    weight = tf.Variable(tf.zeros((4, 8)))
    report = count_tf(lambda x: exp(x * weight), [tf.TensorSpec((4, 8), tf.float32)], training=True)
    # forward: x * w 32, exp 32, the loss's sum 32 = 96
    assert report.forward.flops == 96
    # backward: the custom gradient's two multiplies 2*32 = 64, then x * w's weight gradient 32 = 96
    assert report.backward.flops == 96


def test_training_needs_a_floating_output() -> None:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Lambda(lambda x: tf.argmax(x, 1))])
    with pytest.raises(CountingError, match="floating-point output"):
        count_tf(model, [np.zeros((2, 4), np.float32)], training=True)


def test_training_a_function_without_variables_says_so() -> None:
    with pytest.raises(CountingError, match="trainable variables"):
        count_tf(lambda x: x * 2.0, [np.zeros((2, 8), np.float32)], training=True)


def test_mobilenet_v2_counts_with_nothing_skipped() -> None:
    # keras.applications without weights (nothing downloaded). MobileNetV2's paper gives 300M multiply-adds at
    # 224x224; this count is the exact figure under the conventions, and the params are model.count_params()
    model = keras.applications.MobileNetV2(weights=None)
    report = count_tf(model, [tf.TensorSpec([1, 224, 224, 3], tf.float32)])
    assert report.skipped_ops == {}
    assert report.macs == 300_774_272
    assert report.params == model.count_params() == 3_538_984
    assert report.layers["expanded_conv_depthwise"].ops["DepthwiseConv2dNative"].macs == 112 * 112 * 32 * 9


def test_the_report_fields() -> None:
    report = count_tf(lambda x: x * 2.0, [np.zeros((2, 8), np.float32)], model_name="double")
    assert (report.backend, report.model, report.training) == ("tensorflow", "double", False)
    assert report.inputs == [{"shape": [2, 8], "dtype": "float32"}]
    assert "tensorflow_control_flow" in report.conventions
    assert "keras" in report.versions
    assert type(report).from_dict(report.to_dict()) == report


def test_a_function_that_does_not_trace_is_one_line() -> None:
    def bad(x: Any) -> Any:
        return tf.matmul(x, tf.ones((3, 3)))

    with pytest.raises(CountingError, match=r"^bad: the function could not be traced \("):
        count_tf(bad, [np.zeros((2, 4), np.float32)])


def test_importing_the_package_does_not_import_tensorflow() -> None:
    code = "import sys, pytest_flopbudget; assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
