"""Keras 3's notion of a model's layers and parameters, the same on every Keras backend.

A Keras model keeps its layers in its own lists (`layer._layers`), whichever backend runs it; the TensorFlow, JAX
and PyTorch engines all name a Keras model's layers and count its parameters from those lists, here, so one Keras
model reads the same per-layer table on every backend: the layer names as `model.summary()` lists them, dotted
from the root for nested models (`block.dense`), and parameters as `model.count_params()` adds them up (trainable
and non-trainable weights, batch norm's moving statistics included, random seed state not).

While an engine traces a Keras model it enters a marker scope of its own around each layer's call
(`marked_calls`): the layer's index in `keras_layers`, so an op's layer is read from the innermost marker, whatever
name scopes Keras itself opens (TensorFlow makes a repeated scope unique, `dense` -> `dense_1`, so Keras' own scopes
cannot be read back as layer names).

Framework-free: keras is never imported here, a model is recognised by its classes' names.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any


def is_keras_layer(obj: Any) -> bool:
    """Whether `obj` is a Keras 3 `Layer` (models are layers), found by class name so keras is not imported."""
    return any(cls.__name__ == "Layer" and cls.__module__.startswith("keras.") for cls in type(obj).__mro__)


def keras_layers(model: Any) -> list[tuple[str, Any]]:
    """Every layer of a Keras model by dotted path, root first as "", depth first over `_layers` (the lists
    `model.summary()` and `Layer.weights` walk); a layer met twice keeps its first path, and two sublayers given
    one name are told apart with `_2`."""
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
            name = str(getattr(child, "name", "") or type(child).__name__)
            child_path = f"{path}.{name}" if path else name
            unique, n = child_path, 2
            while unique in taken:  # two sublayers given the same name by the user
                unique, n = f"{child_path}_{n}", n + 1
            taken.add(unique)
            children.append((unique, child))
        stack.extend(reversed(children))
    return out


def keras_params(layers: Sequence[tuple[str, Any]]) -> dict[str, int]:
    """Each layer's own weights by path, trainable and non-trainable (what `model.count_params()` adds up): shared
    weights once, seed generator state not at all."""
    seen: set[int] = set()
    params: dict[str, int] = {}
    for path, layer in layers:
        own = 0
        for weight in [*getattr(layer, "_trainable_variables", ()), *getattr(layer, "_non_trainable_variables", ())]:
            if id(weight) not in seen:
                seen.add(id(weight))
                own += math.prod(int(d) for d in weight.shape)
        if own:
            params[path] = own
    return params


@contextlib.contextmanager
def marked_calls(layers: Sequence[Any], scope: Callable[[int], AbstractContextManager[Any]]) -> Iterator[None]:
    """While tracing, each call of one of `layers` runs under `scope(its index in layers)` (a framework's name
    scope): the classes' `__call__` are wrapped for the duration of the trace, instances matched by identity."""
    index = {id(layer): i for i, layer in enumerate(layers)}
    patched: list[tuple[type, Any]] = []
    for cls in {type(layer) for layer in layers}:
        for owner in cls.__mro__:
            original = owner.__dict__.get("__call__")
            if original is None or owner is object or any(owner is done for done, _ in patched):
                continue
            patched.append((owner, original))
            type.__setattr__(owner, "__call__", _scoped(original, index, scope))
    try:
        yield
    finally:
        for owner, original in patched:
            type.__setattr__(owner, "__call__", original)


def _scoped(original: Any, index: dict[int, int], scope: Callable[[int], AbstractContextManager[Any]]) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        position = index.get(id(self))
        if position is None:
            return original(self, *args, **kwargs)
        with scope(position):
            return original(self, *args, **kwargs)

    return call
