"""Counting a Keras 3 model (TensorFlow backend) or a `tf.function`: trace a concrete function, walk its graph.

Arguments become `tf.TensorSpec`s (an array's shape and dtype; a spec's unknown dims bound from `shapes`), the
function is traced once with `get_concrete_function` and its graph is walked with its function library (loop
and branch bodies); no kernel runs. A Keras model is called inside the trace with `training=` and a marker name
scope around each layer's call (`names.py`), so each op is charged to the layer `model.summary()` names.

The memory metrics come from the same graph (`memory.py`, `graph_memory.py`): `bytes` per op and `peak-memory` by
liveness over the ops (the variables the function reads and its inputs alive throughout); `param-bytes` are the
bytes of the weights counted as parameters, at their dtypes. Keras holds no buffers apart from its weights (its
moving statistics are non-trainable weights, in `params`), so `buffer-bytes` is not measured.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_flopbudget._counting.graph_memory import Value, measure_memory
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._counting.tensorflow.memory import BYTES_CONVENTION, key
from pytest_flopbudget._counting.tensorflow.names import LAYER_SCOPE, marked_layer, plain_layer
from pytest_flopbudget._counting.tensorflow.walk import Walker
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, PARAM_BYTES, PARAMS
from pytest_flopbudget._report import LayerCost, Report

#: What a TensorFlow count adds to a report's conventions (docs/tensorflow.md).
TF_CONVENTIONS = {
    "tensorflow_control_flow": (
        "While loops with a constant maximum_iterations or constant bounds count trip times, else skipped; If and "
        "Case count their costliest branch; PartitionedCall bodies count once per call"
    ),
}


def _import_tf() -> Any:
    try:
        import tensorflow as tf
    except ImportError:
        raise CountingError(
            "counting a TensorFlow model needs tensorflow: pip install 'pytest-flopbudget[tensorflow]'"
        ) from None
    return tf


def is_keras_layer(obj: Any) -> bool:
    """Whether `obj` is a Keras 3 `Layer` (models are layers), found by class name so keras is not imported."""
    return any(cls.__name__ == "Layer" and cls.__module__.startswith("keras.") for cls in type(obj).__mro__)


def specs(tf: Any, args: Sequence[Any], shapes: Sequence[Sequence[int] | None] | None) -> list[Any]:
    """Each argument as a `tf.TensorSpec`: an array's shape and dtype, a spec's unknown dims from `shapes`."""
    out = []
    for index, arg in enumerate(args):
        given = shapes[index] if shapes is not None and index < len(shapes) else None
        if isinstance(arg, tf.TensorSpec):
            spec = arg
        elif hasattr(arg, "shape") and hasattr(arg, "dtype"):
            spec = tf.TensorSpec(tuple(arg.shape), tf.as_dtype(arg.dtype))
        else:
            out.append(arg)
            continue
        if given is not None:
            known = spec.shape.as_list() if spec.shape.rank is not None else [None] * len(given)
            if len(known) != len(given) or any(k is not None and k != g for k, g in zip(known, given)):
                raise CountingError(f"input {index}: shape {list(given)} does not fit the spec's {spec.shape}")
            spec = tf.TensorSpec(tuple(int(d) for d in given), spec.dtype, name=spec.name)
        out.append(spec)
    return out


def count_tf(
    fn_or_model: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    training: bool = False,
    model_name: str = "",
    shapes: Sequence[Sequence[int] | None] | None = None,
) -> Report:
    """Count `fn_or_model(*args, **kwargs)`: a Keras model (called with `training=`) or a `tf.function` (or any
    function TensorFlow can trace). `args` are arrays or `tf.TensorSpec`s; `shapes` binds a spec's unknown dims.

    `training=True` counts a training step as the other engines do: the call (Keras layers in training mode)
    under a `tf.GradientTape`, a loss that sums every floating output, and its gradient with respect to the
    trainable variables the call read (not the inputs); the gradient's ops are the backward phase."""
    tf = _import_tf()
    kwargs = dict(kwargs or {})
    arg_specs = specs(tf, list(args), shapes)
    keras_model = is_keras_layer(fn_or_model)
    label = model_name or str(getattr(fn_or_model, "name", "") or getattr(fn_or_model, "__name__", "")) or "model"
    layers = keras_layers(fn_or_model) if keras_model else []
    if keras_model:

        def call(*call_args: Any) -> Any:
            return fn_or_model(*call_args, training=training, **kwargs)

        traced_fn = tf.function(_with_gradient(tf, call) if training else call, autograph=False)
        call_kwargs: dict[str, Any] = {}
    elif training:
        traced_fn = tf.function(_with_gradient(tf, lambda *a: fn_or_model(*a, **kwargs)), autograph=False)
        call_kwargs = {}
    else:
        traced_fn = fn_or_model if hasattr(fn_or_model, "get_concrete_function") else tf.function(fn_or_model)
        call_kwargs = kwargs
    try:
        with _marked_calls(tf, [layer for _, layer in layers]):
            concrete = traced_fn.get_concrete_function(*arg_specs, **call_kwargs)
    except CountingError:
        raise
    except Exception as exc:  # a function that does not trace gives one line, not a traceback into tensorflow
        text = " ".join(str(exc).split())[:300]
        raise CountingError(f"{label}: the function could not be traced ({type(exc).__name__}: {text})") from None
    namer = marked_layer({index: path for index, (path, _) in enumerate(layers)}) if keras_model else plain_layer
    tally = Tally()
    graph = concrete.graph
    walker = Walker(tf, graph, namer)
    walker.walk(graph, tally)
    memory = walker.memory
    for variable in getattr(concrete, "variables", ()):  # alive throughout the call, each once
        memory.recorder.resident(Value(("variable", id(variable)), variable_bytes(tf, variable)))
    if training:  # the step keeps its loss and gradients, not the model's outputs (as the PyTorch engine's step)
        model_outputs = [t for t in tf.nest.flatten(concrete.structured_outputs[0]) if isinstance(t, tf.Tensor)]
        memory.recorder.let_go(key(t) for t in graph.outputs[: len(model_outputs)])
    if memory.unsized is not None:  # part of the traffic has no size: no figure at all rather than a low one
        tally.forget(BYTES, memory.free_ops)
    for path, count in keras_params(layers).items():
        tally.layers.setdefault(path, LayerCost()).add(PARAMS, count)
    for path, nbytes in keras_param_bytes(tf, layers).items():
        tally.layers.setdefault(path, LayerCost()).add(PARAM_BYTES, nbytes)
    report = Report(
        **tally.report_fields(),
        training=training,
        backend="tensorflow",
        model=label,
        inputs=[_describe(spec) for spec in arg_specs],
        versions=_versions(),
    )
    report.conventions.update(TF_CONVENTIONS)
    measure_memory(
        report, memory.unsized, memory.recorder.peak(), bytes_convention=BYTES_CONVENTION, held=(PARAM_BYTES,)
    )
    return report


def variable_bytes(tf: Any, variable: Any) -> int | None:
    """A variable's bytes at its dtype's size; None when its shape or dtype does not give them."""
    shape = variable.shape
    try:
        dims = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
        size = int(tf.as_dtype(variable.dtype).size)
    except (TypeError, ValueError):
        return None
    return math.prod(dims) * size if size else None


def keras_param_bytes(tf: Any, layers: Sequence[tuple[str, Any]]) -> dict[str, int]:
    """The bytes of each layer's own weights, the weights `keras_params` counts (shared ones once), each at its
    dtype's size. Raises `CountingError` for a weight without a fixed size."""
    seen: set[int] = set()
    found: dict[str, int] = {}
    for path, layer in layers:
        own = 0
        for weight in [*getattr(layer, "_trainable_variables", ()), *getattr(layer, "_non_trainable_variables", ())]:
            if id(weight) not in seen:
                seen.add(id(weight))
                nbytes = variable_bytes(tf, weight)
                if nbytes is None:
                    raise CountingError(f"the weight {getattr(weight, 'path', weight.name)!r} has no fixed size")
                own += nbytes
        if own:
            found[path] = own
    return found


def _with_gradient(tf: Any, call: Any) -> Any:
    """`call` and the gradient of the sum of its floating outputs with respect to the trainable variables it read,
    as a PyTorch training step's default loss and backward."""

    def step(*args: Any) -> Any:
        with tf.GradientTape() as tape:
            outputs = call(*args)
            leaves = [leaf for leaf in tf.nest.flatten(outputs) if getattr(leaf.dtype, "is_floating", False)]
            if not leaves:
                raise CountingError("a training count needs a floating-point output to sum into a loss")
            loss = tf.add_n([tf.reduce_sum(leaf) for leaf in leaves]) if len(leaves) > 1 else tf.reduce_sum(leaves[0])
        variables = [v for v in tape.watched_variables() if getattr(v, "trainable", True)]
        if not variables:
            raise CountingError("a training count needs trainable variables to differentiate")
        return outputs, loss, tape.gradient(loss, variables)  # the loss too: its sum runs, as in torch

    return step


def keras_layers(model: Any) -> list[tuple[str, Any]]:
    """Every layer of a Keras model by dotted path, root first as "", depth first over `_layers` (the lists
    `model.summary()` and `Layer.weights` walk); two sublayers given one name are told apart with `_2`, as the
    torch backend's Keras paths."""
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
            while unique in taken:
                unique, n = f"{child_path}_{n}", n + 1
            taken.add(unique)
            children.append((unique, child))
        stack.extend(reversed(children))
    return out


def keras_params(layers: Sequence[tuple[str, Any]]) -> dict[str, int]:
    """Each layer's own weights, trainable and non-trainable (what `model.count_params()` adds up, and what the
    torch backend counts for the same Keras model): shared weights once, seed generator state not at all."""
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
def _marked_calls(tf: Any, layers: Sequence[Any]) -> Iterator[None]:
    """While tracing, each call of one of `layers` runs under the name scope `LAYER_SCOPE + its index`: the
    classes' `__call__` are wrapped for the duration of the trace, instances matched by identity."""
    index = {id(layer): i for i, layer in enumerate(layers)}
    patched: list[tuple[type, Any]] = []
    for cls in {type(layer) for layer in layers}:
        for owner in cls.__mro__:
            original = owner.__dict__.get("__call__")
            if original is None or owner is object or any(owner is done for done, _ in patched):
                continue
            patched.append((owner, original))
            type.__setattr__(owner, "__call__", _scoped(tf, original, index))
    try:
        yield
    finally:
        for owner, original in patched:
            type.__setattr__(owner, "__call__", original)


def _scoped(tf: Any, original: Any, index: Mapping[int, int]) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        position = index.get(id(self))
        if position is None:
            return original(self, *args, **kwargs)
        with tf.name_scope(f"{LAYER_SCOPE}{position}"):
            return original(self, *args, **kwargs)

    return call


def _describe(spec: Any) -> dict[str, Any]:
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):
        dims = spec.shape.as_list() if spec.shape.rank is not None else []
        return {"shape": [d if d is None else int(d) for d in dims], "dtype": str(getattr(spec.dtype, "name", ""))}
    return {"value": repr(spec)[:80]}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("tensorflow", "tensorflow-cpu", "keras"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
