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

import math
import sys
from typing import Any

import torch


def is_keras_layer(obj: Any) -> bool:
    """Whether `obj` is a Keras 3 `Layer` (models are layers), without importing keras."""
    if "keras" not in sys.modules:
        return False
    return any(cls.__name__ == "Layer" and cls.__module__.startswith("keras.") for cls in type(obj).__mro__)


def keras_paths(model: Any) -> list[tuple[str, torch.nn.Module]]:
    """(dotted path, layer) for every layer under a Keras model, each once (a shared layer keeps its first path);
    empty for any other model."""
    if not is_keras_layer(model):
        return []
    return [(path, layer) for path, layer in _walk(model) if path and isinstance(layer, torch.nn.Module)]


def keras_params(model: Any) -> dict[str, int] | None:
    """Each layer's own weights by path (what `count_params()` adds up); None for a model that is not Keras."""
    if not is_keras_layer(model):
        return None
    seen: set[int] = set()
    params: dict[str, int] = {}
    for path, layer in _walk(model):
        own = 0
        for weight in [*getattr(layer, "_trainable_variables", ()), *getattr(layer, "_non_trainable_variables", ())]:
            if id(weight) not in seen:
                seen.add(id(weight))
                own += math.prod(int(d) for d in weight.shape)
        if own:
            params[path] = own
    return params


def _walk(model: Any) -> list[tuple[str, Any]]:
    """Depth-first over `_layers` (the lists `Layer.weights` walks), root first as ""."""
    out: list[tuple[str, Any]] = []
    taken: set[str] = set()
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", model)]
    while stack:
        path, layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        out.append((path, layer))
        taken.add(path)
        children = []
        for child in getattr(layer, "_layers", ()):
            name = str(getattr(child, "name", type(child).__name__)) or type(child).__name__
            child_path = f"{path}.{name}" if path else name
            unique, n = child_path, 2
            while unique in taken:  # two sublayers given the same name by the user
                unique, n = f"{child_path}_{n}", n + 1
            taken.add(unique)
            children.append((unique, child))
        stack.extend(reversed(children))
    return out
