"""Keras 3 models written once, for every Keras backend: the same code counted on TensorFlow, PyTorch and JAX.

Keras reads `KERAS_BACKEND` when it is first imported, so one process holds one backend; the cross-backend tests
(`tests/e2e/test_keras_backends.py`) and the TensorFlow profiler comparison (`benchmarks/tf_profiler_compare.py`)
build these models in one process per backend. Channels last throughout (Keras' default on every backend).
The `keras.applications` models are built with `weights=None`: nothing is downloaded.
"""

from __future__ import annotations

from typing import Any, Callable

import keras


def convnet(size: int = 32, classes: int = 10) -> Any:
    """A small image classifier: conv, batch norm, ReLU, pooling, a residual add, dropout and a dense head."""
    x = keras.Input((size, size, 3), name="image")
    y = keras.layers.Conv2D(16, 3, padding="same", name="stem")(x)
    y = keras.layers.BatchNormalization(name="stem_bn")(y)
    y = keras.layers.ReLU(name="stem_relu")(y)
    shortcut = y
    y = keras.layers.Conv2D(16, 3, padding="same", use_bias=False, name="conv")(y)
    y = keras.layers.BatchNormalization(name="conv_bn")(y)
    y = keras.layers.Add(name="residual")([y, shortcut])
    y = keras.layers.ReLU(name="relu")(y)
    y = keras.layers.MaxPooling2D(2, name="pool")(y)
    y = keras.layers.DepthwiseConv2D(3, padding="same", name="depthwise")(y)
    y = keras.layers.Conv2D(32, 1, strides=2, activation="relu", name="pointwise")(y)
    y = keras.layers.GlobalAveragePooling2D(name="gap")(y)
    y = keras.layers.Dropout(0.2, name="dropout")(y)
    return keras.Model(x, keras.layers.Dense(classes, name="head")(y), name="convnet")


def encoder(seq: int = 16, dim: int = 64, heads: int = 4, ffn: int = 128, classes: int = 10) -> Any:
    """A transformer encoder block (post-norm) with a classifier head, on a [batch, seq, dim] input."""
    x = keras.Input((seq, dim), name="tokens")
    attention = keras.layers.MultiHeadAttention(heads, dim // heads, name="attention")(x, x)
    y = keras.layers.LayerNormalization(name="norm1")(keras.layers.Add(name="add1")([x, attention]))
    hidden = keras.layers.Dense(ffn, activation="relu", name="ffn1")(y)
    y = keras.layers.LayerNormalization(name="norm2")(
        keras.layers.Add(name="add2")([y, keras.layers.Dense(dim, name="ffn2")(hidden)])
    )
    y = keras.layers.GlobalAveragePooling1D(name="pool")(y)
    return keras.Model(x, keras.layers.Dense(classes, activation="softmax", name="head")(y), name="encoder")


def resnet50(size: int = 224) -> Any:
    return keras.applications.ResNet50(weights=None, input_shape=(size, size, 3))


def mobilenet_v2(size: int = 224) -> Any:
    return keras.applications.MobileNetV2(weights=None, input_shape=(size, size, 3))


def efficientnet_b0(size: int = 224) -> Any:
    return keras.applications.EfficientNetB0(weights=None, input_shape=(size, size, 3))


#: Each model by name: (its factory, its default input size, whether its input is an image).
MODELS: dict[str, tuple[Callable[[int], Any], int, bool]] = {
    "convnet": (convnet, 32, True),
    "encoder": (encoder, 16, False),
    "resnet50": (resnet50, 224, True),
    "mobilenet_v2": (mobilenet_v2, 224, True),
    "efficientnet_b0": (efficientnet_b0, 224, True),
}


def input_shape(name: str, size: int, batch: int = 1) -> tuple[int, ...]:
    """The input shape of model `name` built at `size` (an image's side, or an encoder's sequence length)."""
    model = MODELS[name][0]
    return (batch, size, size, 3) if MODELS[name][2] else (batch, size, 64) if model is encoder else (batch, size)
