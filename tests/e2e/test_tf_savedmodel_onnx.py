"""A SavedModel exported from a Keras model counts exactly what the Keras model counts, through the savedmodel
backend and as a loaded serving function through the TensorFlow engine; the same SavedModel converted with tf2onnx
counts, through the ONNX backend, the same MACs, and FLOPs that differ by exactly what tf2onnx's optimiser folded
away (docs/tensorflow.md, "A SavedModel and its tf2onnx conversion")."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.slow

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytest.importorskip("tf2onnx")
pytest.importorskip("onnx")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import numpy as np  # noqa: E402

import pytest_flopbudget  # noqa: E402
from examples.keras_models import convnet  # noqa: E402
from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.walk import UNKNOWN_SHAPE  # noqa: E402

SPEC = (1, 32, 32, 3)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The conv net with weights away from zero (tf2onnx drops an add of an all-zero constant, such as a fresh
    model's biases), its count, its SavedModel and that SavedModel converted by tf2onnx's command line."""
    where = tmp_path_factory.mktemp("savedmodel")
    model = convnet(32)
    rng = np.random.default_rng(0)
    for variable in model.variables:
        variable.assign(rng.uniform(0.5, 1.5, size=variable.shape).astype(variable.dtype))
    model.export(str(where / "convnet"), format="tf_saved_model", verbose=False)
    converted = subprocess.run(
        [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(where / "convnet"), "--output",
         str(where / "convnet.onnx"), "--opset", "17"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr[-3000:]
    # the Keras model's ops as TensorFlow runs them (keras_rules=False): a SavedModel holds those ops, not its layers
    keras = count_tf(model, [np.zeros(SPEC, np.float32)], keras_rules=False)
    return {"model": model, "keras": keras, "where": where}


def test_the_saved_model_counts_what_the_keras_model_counts(exported: dict[str, Any]) -> None:
    # the savedmodel backend: saved_model.pb alone, the serving signature's input bound by name
    report = pytest_flopbudget.count(str(exported["where"] / "convnet"), inputs={"image": list(SPEC)})
    keras_report = exported["keras"]
    assert (report.flops, report.macs) == (keras_report.flops, keras_report.macs) == (5_901_098, 2_871_616)
    assert {op: c.flops for op, c in report.ops.items()} == {op: c.flops for op, c in keras_report.ops.items()}
    assert report.params == exported["model"].count_params() == 3914
    assert report.skipped_ops == {}


def test_the_saved_models_serving_function_counts_what_the_keras_model_counts(exported: dict[str, Any]) -> None:
    loaded = tf.saved_model.load(str(exported["where"] / "convnet"))
    # the serving function was traced with a None batch: its FunctionDef is rebuilt at batch 1 (bound_graph)
    report = count_tf(loaded.serve, [tf.TensorSpec(SPEC, tf.float32)])
    keras_report = exported["keras"]
    assert (report.flops, report.macs) == (keras_report.flops, keras_report.macs) == (5_901_098, 2_871_616)
    assert {op: c.flops for op, c in report.ops.items()} == {op: c.flops for op, c in keras_report.ops.items()}
    assert report.params == 3914  # the variables the serving function captures
    assert report.skipped_ops == {}
    # left at None, every op that touches the batch is skipped by name, never counted as zero
    open_batch = count_tf(loaded.serve, [tf.TensorSpec((None, 32, 32, 3), tf.float32)])
    assert open_batch.skipped_ops["Conv2D"].calls == 3
    assert open_batch.skipped_ops["Conv2D"].reason == UNKNOWN_SHAPE


def test_its_tf2onnx_conversion_counts_the_same_macs_and_the_folded_flops_less(exported: dict[str, Any]) -> None:
    onnx_report = pytest_flopbudget.count(str(exported["where"] / "convnet.onnx"), inputs={"image": list(SPEC)})
    keras_report = exported["keras"]
    assert onnx_report.macs == keras_report.macs == 2_871_616
    assert onnx_report.skipped_ops == {}
    # tf2onnx freezes the variables and folds what became constant. Both batch norms (16 channels, N = 32*32*16 =
    # 16384 elements) lose their per-channel folding, 5 * 16 = 80 FLOPs each (+eps, rsqrt, *gamma, mean*inv,
    # beta - that); conv_bn, after a convolution without bias, also folds its x*inv + shift (2N) into the
    # convolution's weights and a new bias add (N): N less. 2 * 80 + 16384 = 16544
    assert keras_report.flops - onnx_report.flops == 2 * 80 + 16384
    # parameters: stem_bn's gamma, beta, mean and variance (64) become a scale and a shift (32), conv_bn's (64)
    # become the convolution's bias (16): 32 + 48 = 80 fewer than count_params()' 3914
    assert (exported["model"].count_params(), onnx_report.params) == (3914, 3914 - 80)
    ops = {op: c.flops for op, c in onnx_report.ops.items() if c.flops}
    tf_ops = {op: c.flops for op, c in keras_report.ops.items() if c.flops}
    # every convolution with its bias add is one Conv: Conv2D, DepthwiseConv2dNative and the three convolutions'
    # BiasAdd (16384 + 4096 + 2048), and conv_bn's shift as the new bias (16384)
    assert ops["Conv"] == tf_ops["Conv2D"] + tf_ops["DepthwiseConv2dNative"] + (16384 + 4096 + 2048) + 16384
    assert (ops["Relu"], ops["MaxPool"], ops["GlobalAveragePool"], ops["MatMul"]) == (
        tf_ops["Relu"],
        tf_ops["MaxPool"],
        tf_ops["Mean"],
        tf_ops["MatMul"],
    )
