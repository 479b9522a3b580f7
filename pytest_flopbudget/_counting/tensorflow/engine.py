"""Counting a Keras 3 model (TensorFlow backend) or a `tf.function`: trace a concrete function, walk its graph.

Arguments become `tf.TensorSpec`s (an array's shape and dtype; a spec's unknown dims bound from `shapes`), the
function is traced once with `get_concrete_function` and its graph is walked with its function library (loop
and branch bodies); no kernel runs. A Keras model is called inside the trace with `training=` and a marker name
scope around each layer's call (`names.py`), so each op is charged to the layer `model.summary()` names.
A function traced before at looser shapes than the specs (a SavedModel's serving function, saved with a `None`
batch) keeps that trace: it is frozen and imported again at the given shapes (`_at_shapes`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_flopbudget._counting.keras_layers import is_keras_layer, keras_layers, keras_params, marked_calls
from pytest_flopbudget._counting.keras_rules import Call, reprice, with_activations
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._counting.tensorflow.names import LAYER_SCOPE, LayerNamer, marked_layer, plain_layer
from pytest_flopbudget._counting.tensorflow.walk import UNKNOWN_SHAPE, Walker
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import PARAMS
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
    keras_rules: bool = True,
) -> Report:
    """Count `fn_or_model(*args, **kwargs)`: a Keras model (called with `training=`) or a `tf.function` (or any
    function TensorFlow can trace). `args` are arrays or `tf.TensorSpec`s; `shapes` binds a spec's unknown dims.

    `training=True` counts a training step as the other engines do: the call (Keras layers in training mode)
    under a `tf.GradientTape`, a loss that sums every floating output, and its gradient with respect to the
    trainable variables the call read (not the inputs); the gradient's ops are the backward phase.

    A Keras model's batch norm, layer norm, activations, softmax and mean pooling are priced by the shared rules
    (`keras_rules`); `keras_rules=False` keeps the ops TensorFlow runs (what a SavedModel of it counts)."""
    tf = _import_tf()
    kwargs = dict(kwargs or {})
    arg_specs = specs(tf, list(args), shapes)
    keras_model = is_keras_layer(fn_or_model)
    label = model_name or str(getattr(fn_or_model, "name", "") or getattr(fn_or_model, "__name__", "")) or "model"
    layers = keras_layers(fn_or_model) if keras_model else []
    calls: dict[int, list[Call]] = {}
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
        with marked_calls(
            [layer for _, layer in layers], lambda i: tf.name_scope(f"{LAYER_SCOPE}{i}"), calls, len(layers)
        ):
            concrete = traced_fn.get_concrete_function(*arg_specs, **call_kwargs)
    except CountingError:
        raise
    except Exception as exc:  # a function that does not trace gives one line, not a traceback into tensorflow
        text = " ".join(str(exc).split())[:300]
        raise CountingError(f"{label}: the function could not be traced ({type(exc).__name__}: {text})") from None
    namer = marked_layer(with_activations(layers)) if keras_model else plain_layer
    tally = Tally()
    Walker(tf, concrete.graph, namer).walk(concrete.graph, tally)
    if not keras_model and _loose(tally) and _fixed(arg_specs):
        # a function traced before at looser shapes (a SavedModel's, with a None batch) keeps that trace whatever
        # the specs say: counted again, frozen and imported at the given shapes
        rebound = _at_shapes(tf, concrete, arg_specs)
        if rebound is not None:
            tally = Tally()
            Walker(tf, rebound.graph, inlined(namer)).walk(rebound.graph, tally)
    for path, count in keras_params(layers).items():
        tally.layers.setdefault(path, LayerCost()).add(PARAMS, count)
    report = Report(
        **tally.report_fields(),
        training=training,
        backend="tensorflow",
        model=label,
        inputs=[_describe(spec) for spec in arg_specs],
        versions=_versions(),
    )
    report.conventions.update(TF_CONVENTIONS)
    reprice(report, layers, calls if keras_rules else {})
    return report


#: The name of a call op, which freezing puts before the names of the ops it inlines.
_CALL_SCOPE = re.compile(r"(?:Stateful)?PartitionedCall(?:_\d+)?")


def inlined(namer: LayerNamer) -> LayerNamer:
    """`namer` for a frozen graph: the scope an inlined call's name adds is read past, as the walk reads a call's
    body under its caller's scopes."""
    return lambda scopes: namer([scope for scope in scopes if not _CALL_SCOPE.fullmatch(scope)])


def _loose(tally: Tally) -> bool:
    """Whether the walk skipped an op for an unknown dim."""
    return any(skip.reason == UNKNOWN_SHAPE for skip in tally.skipped.values())


def _fixed(arg_specs: Sequence[Any]) -> bool:
    """Whether every spec gives every dim."""
    return all(s.shape.rank is not None and None not in s.shape.as_list() for s in arg_specs if hasattr(s, "shape"))


def _at_shapes(tf: Any, concrete: Any, arg_specs: Sequence[Any]) -> Any | None:
    """A function traced before at looser shapes than `arg_specs` (a SavedModel's serving function, saved with a
    `None` batch, returns that trace whatever the specs): frozen (variables become constants, calls inlined) and
    imported again at the given shapes, so that TensorFlow's shape inference binds every dim it can."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        frozen = convert_variables_to_constants_v2(concrete)
    except Exception:  # a function that cannot be frozen is counted as traced: its loose dims are skipped by name
        return None
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]

    def imported(*args: Any) -> Any:
        return tf.graph_util.import_graph_def(
            graph_def, input_map=dict(zip(inputs, args)), return_elements=outputs, name=""
        )

    return tf.compat.v1.wrap_function(imported, [s for s in arg_specs if hasattr(s, "shape")])


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
