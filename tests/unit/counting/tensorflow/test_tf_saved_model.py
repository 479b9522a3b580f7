"""count_saved_model: a SavedModel read from saved_model.pb alone counts what the Keras model it was exported from
counts (a batch-norm conv net, a recurrent loop whose trace kept the batch unknown), its variables charged to the
layers that read them; signature inputs, and what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import numpy as np  # noqa: E402

from pytest_flopbudget._counting.tensorflow.engine import count_tf  # noqa: E402
from pytest_flopbudget._counting.tensorflow.saved_model import (  # noqa: E402
    SignatureInput,
    count_saved_model,
    signature_inputs,
)
from pytest_flopbudget._errors import CountingError  # noqa: E402


def conv_net() -> Any:
    image = keras.Input((8, 8, 3), name="image")
    h = keras.layers.Conv2D(4, 3, name="conv")(image)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.ReLU(name="relu")(h)
    h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
    return keras.Model(image, keras.layers.Dense(2, name="head")(h))


def recurrent() -> Any:
    steps = keras.Input((5, 3), name="steps")
    return keras.Model(steps, keras.layers.LSTM(4, name="lstm")(steps))


def exported(model: Any, where: Path) -> Path:
    model.export(str(where), verbose=False)
    return where


def test_a_conv_net_counts_what_its_keras_model_counts(tmp_path: Path) -> None:
    model = conv_net()
    saved = count_saved_model(exported(model, tmp_path / "conv"), {"image": [2, 8, 8, 3]})
    traced = count_tf(model, [np.zeros((2, 8, 8, 3), np.float32)], keras_rules=False)  # the ops TensorFlow runs
    assert (saved.flops, saved.macs, saved.params) == (traced.flops, traced.macs, traced.params)
    # conv: 2*(2*6*6*4)*(3*3*3) = 15,552 + 288 bias adds = 15,840; weights 3*3*3*4 + 4 = 112
    conv = next(layer for path, layer in saved.layers.items() if path.endswith("conv_1"))
    assert (conv.flops, conv.params) == (15840, 112)
    # the batch norm's 4*4 statistics and affine weights go to its layer, not to the `Cast` scopes that read them
    bn = next(layer for path, layer in saved.layers.items() if path.endswith("bn_1"))
    assert bn.params == 16
    assert saved.skipped_ops == {} and saved.estimated_ops == {}


def test_a_recurrent_loop_is_counted_at_the_bound_batch(tmp_path: Path) -> None:
    model = recurrent()
    saved = count_saved_model(exported(model, tmp_path / "lstm"), {"steps": [2, 5, 3]})
    traced = count_tf(model, [np.zeros((2, 5, 3), np.float32)], keras_rules=False)  # the ops TensorFlow runs
    # the loop body was saved with an unknown batch: rebuilt with the bound one (the time steps' TensorList
    # element shape included), every step's matmuls are priced, five trips as in the traced model
    assert (saved.flops, saved.macs, saved.params) == (traced.flops, traced.macs, traced.params)
    assert saved.skipped_ops == {}


def test_signature_inputs_and_refusals(tmp_path: Path) -> None:
    where = exported(recurrent(), tmp_path / "lstm")
    assert signature_inputs(where) == [SignatureInput("steps", "float32", [None, 5, 3], "serving_default_steps:0")]
    with pytest.raises(CountingError, match="inputs= names 'x', which is not a signature input"):
        count_saved_model(where, {"x": [2, 5, 3]})
    with pytest.raises(CountingError, match=r"has 2 dims \[2, 5\] but the signature input has 3: \[\?, 5, 3\]"):
        count_saved_model(where, {"steps": [2, 5]})
    with pytest.raises(CountingError, match="not a SavedModel directory"):
        count_saved_model(tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "saved_model.pb").write_bytes(b"not a proto")
    with pytest.raises(CountingError, match=r"saved_model.pb cannot be read \(DecodeError"):
        count_saved_model(tmp_path / "broken")
