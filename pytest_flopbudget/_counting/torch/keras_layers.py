"""Keras 3 models on the torch backend: per-layer paths and parameters from Keras' own layer tracking.

A Keras model is a `torch.nn.Module`, and so is each of its layers, but Keras keeps its layers in its own lists
(`layer._layers`), not as torch submodules: `named_modules()` sees only the root (and Keras' `_functional` and
`_torch_params` containers). Without help every op would be charged to the root. The layers' `__call__` still goes
through `nn.Module.__call__`, so the module tracker's hooks work once it is told which modules are layers and what
to call them: the layer names, dotted from the root (`conv2d`, `encoder.dense`), as `model.summary()` lists them.

Parameters follow `model.count_params()`: the layers' weights (trainable and non-trainable, such as batch norm's
moving statistics), not every torch parameter Keras registers (random seed state of Dropout and other
`SeedGenerator` users, metric state).

keras is never imported here: a model can only be a Keras layer if keras is already loaded.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import torch

from pytest_flopbudget._counting import keras_layers as keras


def is_keras_layer(obj: Any) -> bool:
    """Whether `obj` is a Keras 3 `Layer` (models are layers), without importing keras."""
    return "keras" in sys.modules and keras.is_keras_layer(obj)


def keras_paths(model: Any) -> list[tuple[str, torch.nn.Module]]:
    """(dotted path, layer) for every layer under a Keras model, each once (a shared layer keeps its first path);
    empty for any other model."""
    if not is_keras_layer(model):
        return []
    return [(path, layer) for path, layer in keras.keras_layers(model) if path and isinstance(layer, torch.nn.Module)]


def keras_params(model: Any) -> dict[str, int] | None:
    """Each layer's own weights by path (what `count_params()` adds up); None for a model that is not Keras."""
    if not is_keras_layer(model):
        return None
    return keras.keras_params(keras.keras_layers(model))


def keras_layers_of(model: Any) -> list[tuple[str, Any]]:
    """Every layer of a Keras model by path, root first (`keras_layers`); empty for any other model."""
    return keras.keras_layers(model) if is_keras_layer(model) else []


def keras_recording(model: Any, calls: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]]) -> Any:
    """A context that records each Keras layer's calls' shapes into `calls` by index in `keras_layers_of(model)`
    (`keras_rules.reprice` prices them); a no-op for any other model. Layers are attributed by module hooks here,
    so the marker scope does nothing."""
    layers = keras_layers_of(model)
    if not layers:
        return contextlib.nullcontext()
    return keras.marked_calls([layer for _, layer in layers], lambda _: contextlib.nullcontext(), calls)
