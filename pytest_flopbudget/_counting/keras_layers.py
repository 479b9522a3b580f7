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


def _own_weights(layers: Sequence[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """Each layer's own weights with its path, trainable then non-trainable, each shared weight once (at the first
    layer that holds it)."""
    seen: set[int] = set()
    for path, layer in layers:
        for weight in [*getattr(layer, "_trainable_variables", ()), *getattr(layer, "_non_trainable_variables", ())]:
            if id(weight) not in seen:
                seen.add(id(weight))
                yield path, weight


def keras_params(layers: Sequence[tuple[str, Any]]) -> dict[str, int]:
    """Each layer's own weights by path, trainable and non-trainable (what `model.count_params()` adds up): shared
    weights once, seed generator state not at all."""
    params: dict[str, int] = {}
    for path, weight in _own_weights(layers):
        own = math.prod(int(d) for d in weight.shape)
        if own:
            params[path] = params.get(path, 0) + own
    return params


#: Bytes per element of Keras 3's dtype names (`keras.backend.standardize_dtype`).
DTYPE_BYTES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}


def keras_param_bytes(layers: Sequence[tuple[str, Any]]) -> dict[str, int] | None:
    """The bytes of the weights `keras_params` counts, by layer, each at its dtype's size (the weights' own dtype,
    whatever dtype policy computes with them); None when a weight's dtype is not one of `DTYPE_BYTES`."""
    found: dict[str, int] = {}
    for path, weight in _own_weights(layers):
        size = DTYPE_BYTES.get(str(getattr(weight, "dtype", "")))
        if size is None:
            return None
        own = math.prod(int(d) for d in weight.shape) * size
        if own:
            found[path] = found.get(path, 0) + own
    return found


@contextlib.contextmanager
def marked_calls(
    layers: Sequence[Any],
    scope: Callable[[int], AbstractContextManager[Any]],
    calls: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] | None = None,
    activation_offset: int | None = None,
) -> Iterator[None]:
    """While tracing, each call of one of `layers` runs under `scope(its index in layers)` (a framework's name
    scope): the classes' `__call__` are wrapped for the duration of the trace, instances matched by identity.
    `calls`, when given, gets each call's (first input shape, first output shape) by index (`keras_rules`).
    With `activation_offset`, the activation function a layer applies itself (`Dense(..., activation="swish")`)
    runs under `scope(activation_offset + its layer's index)` and is recorded there, so its ops can be priced
    apart from the layer's (`keras_rules.with_activations`)."""
    index = {id(layer): i for i, layer in enumerate(layers)}
    patched: list[tuple[type, Any]] = []
    active: set[int] = set()
    for cls in {type(layer) for layer in layers}:
        for owner in cls.__mro__:
            original = owner.__dict__.get("__call__")
            if original is None or owner is object or any(owner is done for done, _ in patched):
                continue
            patched.append((owner, original))
            type.__setattr__(owner, "__call__", _scoped(original, index, scope, calls, active))
    swapped: list[tuple[Any, Any]] = []
    if activation_offset is not None:
        for i, layer in enumerate(layers):
            function = layer.__dict__.get("activation") if hasattr(layer, "__dict__") else None
            if type(layer).__name__ == "Activation" or not callable(function):
                continue
            if getattr(function, "__name__", "") == "linear":
                continue
            swapped.append((layer, function))
            object.__setattr__(layer, "activation", _scoped_function(function, activation_offset + i, scope, calls))
    try:
        yield
    finally:
        for owner, original in patched:
            type.__setattr__(owner, "__call__", original)
        for layer, function in swapped:
            object.__setattr__(layer, "activation", function)


def _scoped(
    original: Any,
    index: dict[int, int],
    scope: Callable[[int], AbstractContextManager[Any]],
    calls: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] | None,
    active: set[int],
) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        position = index.get(id(self))
        if position is None:
            return original(self, *args, **kwargs)
        outermost = id(self) not in active  # Layer.__call__ -> Operation.__call__: both wrapped, one call
        active.add(id(self))
        try:
            with scope(position):
                result = original(self, *args, **kwargs)
        finally:
            if outermost:
                active.discard(id(self))
        if calls is not None and outermost:
            first_in = args[0] if args else next(iter(kwargs.values()), None)
            shapes = (_shape(first_in), _shape(result))
            if shapes[0] is not None and shapes[1] is not None:
                calls.setdefault(position, []).append((shapes[0], shapes[1]))
        return result

    return call


def _scoped_function(
    function: Any,
    position: int,
    scope: Callable[[int], AbstractContextManager[Any]],
    calls: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] | None,
) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        with scope(position):
            result = function(*args, **kwargs)
        if calls is not None and args:
            shapes = (_shape(args[0]), _shape(result))
            if shapes[0] is not None and shapes[1] is not None:
                calls.setdefault(position, []).append((shapes[0], shapes[1]))
        return result

    call.__name__ = getattr(function, "__name__", "activation")
    return call


def _shape(value: Any) -> tuple[int, ...] | None:
    """A tensor's (or the first tensor of a list's) fully known shape as ints, else None."""
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        dims = tuple(shape)
        if any(d is None for d in dims):
            return None
        return tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        return None
