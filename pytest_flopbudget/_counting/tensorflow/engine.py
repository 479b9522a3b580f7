"""Counting a Keras 3 model (TensorFlow backend) or a `tf.function`: trace a concrete function, walk its graph.

Arguments become `tf.TensorSpec`s (an array's shape and dtype; a spec's unknown dims bound from `shapes`), the
function is traced once with `get_concrete_function` and its graph is walked with its function library (loop
and branch bodies); no kernel runs. A Keras model is called inside the trace with `training=` and a marker name
scope around each layer's call (`names.py`), so each op is charged to the layer `model.summary()` names.

A function whose trace keeps a dim unknown that the specs fix (a `tf.function` with an `input_signature`, or a
`ConcreteFunction` traced before) is walked from its `FunctionDef` rebuilt with the specs' shapes, so a bound dim
is never dropped. A plain function's parameters are the variables it captures, each charged to the layer of the
first op that reads it; a Keras model's are its layers' weights (`keras_params`).

The memory metrics come from the same graph (`memory.py`, `graph_memory.py`): `bytes` per op and `peak-memory` by
liveness over the ops (the variables the function reads and its inputs alive throughout); `param-bytes` are the
bytes of the variables counted as parameters, at their dtypes. Keras holds no buffers apart from its weights (its
moving statistics are non-trainable weights, in `params`), so `buffer-bytes` is not measured.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from pytest_flopbudget._counting.graph_memory import Value, measure_memory
from pytest_flopbudget._counting.keras_layers import (
    is_keras_layer,
    keras_layers,
    keras_param_bytes,
    keras_params,
    marked_calls,
)
from pytest_flopbudget._counting.keras_rules import Call, reprice, with_activations
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._counting.tensorflow.memory import BYTES_CONVENTION, TfMemory, variable_bytes
from pytest_flopbudget._counting.tensorflow.memory import key as tensor_key
from pytest_flopbudget._counting.tensorflow.names import LAYER_SCOPE, LayerNamer, marked_layer, plain_layer
from pytest_flopbudget._counting.tensorflow.walk import Walker, function_graph
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, PARAM_BYTES, PARAMS, Metric
from pytest_flopbudget._report import ROOT, LayerCost, Report

#: What a TensorFlow count adds to a report's conventions (docs/tensorflow.md).
TF_CONVENTIONS = {
    "tensorflow_control_flow": (
        "While loops with constant bounds count trip times; a data-dependent one under a constant "
        "maximum_iterations counts the cap (an upper bound, listed in estimated); else skipped; If and Case count "
        "their costliest branch; PartitionedCall bodies count once per call"
    ),
}


#: While `captured_traces` is entered, each count appends the concrete function it traced, the graph it walked and
#: its layer namer here, so that `flopbudget explain --vs tf-profiler` profiles the very ops this count priced.
_CAPTURED: ContextVar[list[tuple[Any, Any, LayerNamer]] | None] = ContextVar("flopbudget_tf_traces", default=None)


@contextlib.contextmanager
def captured_traces() -> Iterator[list[tuple[Any, Any, LayerNamer]]]:
    """The concrete functions, graphs and layer namers of the counts made inside the block, in order."""
    found: list[tuple[Any, Any, LayerNamer]] = []
    token = _CAPTURED.set(found)
    try:
        yield found
    finally:
        _CAPTURED.reset(token)


def import_tf() -> Any:
    try:
        import tensorflow as tf
    except ImportError:
        raise CountingError(
            "counting a TensorFlow model needs tensorflow: pip install 'pytest-flopbudget[tensorflow]'"
        ) from None
    return tf


def is_concrete_function(obj: Any) -> bool:
    """A `ConcreteFunction` (one trace, its graph fixed): it has a graph and a `FunctionDef`, and no tracing of
    its own."""
    return hasattr(obj, "function_def") and hasattr(obj, "graph") and not hasattr(obj, "get_concrete_function")


def specs(tf: Any, args: Sequence[Any], shapes: Sequence[Sequence[int] | None] | None) -> list[Any]:
    """Each argument as a `tf.TensorSpec`: an array's shape and dtype, a spec's unknown dims from `shapes`."""
    out = []
    for index, arg in enumerate(args):
        given = shapes[index] if shapes is not None and index < len(shapes) else None
        if isinstance(arg, Mapping):  # a Keras model's named inputs, one dict
            out.append(dict(zip(arg, specs(tf, list(arg.values()), None))))
            continue
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
    tf = import_tf()
    arg_specs = specs(tf, list(args) or declared_specs(fn_or_model), shapes)
    kwarg_specs = dict(zip(kwargs or {}, specs(tf, list((kwargs or {}).values()), None)))
    keras_model = is_keras_layer(fn_or_model)
    concrete_given = is_concrete_function(fn_or_model)
    label = model_name or str(getattr(fn_or_model, "name", "") or getattr(fn_or_model, "__name__", "")) or "model"
    layers = keras_layers(fn_or_model) if keras_model else []
    calls: dict[int, list[Call]] = {}
    forward_ops: set[str] = set()  # a training step's ops made before its gradient was asked for
    traced_fn: Any = None
    if keras_model:

        def call(*call_args: Any, **call_kwargs: Any) -> Any:
            return fn_or_model(*call_args, training=training, **call_kwargs)

        traced_fn = tf.function(_with_gradient(tf, call, forward_ops) if training else call, autograph=False)
    elif training:
        traced_fn = tf.function(_with_gradient(tf, fn_or_model, forward_ops), autograph=False)
    elif not concrete_given:
        traced_fn = fn_or_model if hasattr(fn_or_model, "get_concrete_function") else tf.function(fn_or_model)
    try:
        if traced_fn is None:
            concrete = fn_or_model
        else:
            with marked_calls(
                [layer for _, layer in layers], lambda i: tf.name_scope(f"{LAYER_SCOPE}{i}"), calls, len(layers)
            ):
                concrete = traced_fn.get_concrete_function(*arg_specs, **kwarg_specs)
        graph = bound_graph(tf, concrete, [*arg_specs, kwarg_specs])
    except CountingError:
        raise
    except Exception as exc:  # a function that does not trace gives one line, not a traceback into tensorflow
        text = " ".join(str(exc).split())[:300]
        raise CountingError(f"{label}: the function could not be traced ({type(exc).__name__}: {text})") from None
    namer = marked_layer(with_activations(layers)) if keras_model else plain_layer
    sink = _CAPTURED.get()
    if sink is not None:
        sink.append((concrete, graph, namer))
    tally = Tally()
    walker = Walker(tf, concrete.graph, namer)
    variables = {} if keras_model else captured_variables(concrete, graph)
    walker.walk(
        graph,
        tally,
        resources={name: handle for name, (handle, _) in variables.items()},
        forward_ops=frozenset(forward_ops) if training and traced_fn is not None else None,
    )
    memory = walker.memory
    for variable in getattr(concrete, "variables", ()):  # alive throughout the call, each once
        memory.recorder.resident(Value(("variable", id(variable)), variable_bytes(tf, variable)))
    if training:  # the step keeps its loss and gradients, not the model's outputs (as the PyTorch engine's step)
        model_outputs = [t for t in tf.nest.flatten(concrete.structured_outputs[0]) if isinstance(t, tf.Tensor)]
        memory.recorder.let_go(tensor_key(t) for t in graph.outputs[: len(model_outputs)])
    param_bytes: Mapping[str, int] | None
    if keras_model:
        for path, count in keras_params(layers).items():
            tally.layers.setdefault(path, LayerCost()).add(PARAMS, count)
        param_bytes = keras_param_bytes(layers)
        for path, nbytes in (param_bytes or {}).items():
            tally.layers.setdefault(path, LayerCost()).add(PARAM_BYTES, nbytes)
    else:
        charge_variables(tally, walker.readers, dict(variables.values()))
        byte_sizes = captured_variables(concrete, graph, lambda v: variable_bytes(tf, v))
        param_bytes = {handle: nbytes for handle, nbytes in byte_sizes.values() if nbytes is not None}
        if len(param_bytes) < len(byte_sizes):
            param_bytes = None
        charge_variables(tally, walker.readers, param_bytes or {}, PARAM_BYTES)
    finish_memory(tally, memory)
    report = Report(
        **tally.report_fields(),
        training=training,
        backend="tensorflow",
        model=label,
        inputs=[
            *(item for spec in arg_specs for item in _described(spec)),
            *(item for name, spec in kwarg_specs.items() for item in _described(spec, name)),
        ],
        versions=versions(),
    )
    report.conventions.update(TF_CONVENTIONS)
    reprice(report, layers, calls if keras_rules else {})
    held = (PARAM_BYTES,) if param_bytes is not None else ()
    measure_memory(report, memory.unsized, memory.recorder.peak(), bytes_convention=BYTES_CONVENTION, held=held)
    return report


def finish_memory(tally: Tally, memory: TfMemory) -> None:
    """Before the report is built: part of the traffic without a size leaves no figure at all rather than a low
    one (the ops recorded for their bytes alone go too)."""
    if memory.unsized is not None:
        tally.forget(BYTES, memory.free_ops)


def declared_specs(fn: Any) -> list[Any]:
    """The specs a function declares for itself, for a count given none: a `tf.function`'s `input_signature`, a
    `ConcreteFunction`'s traced positional specs."""
    declared = getattr(fn, "input_signature", None)
    if declared:
        return list(declared)
    structured = getattr(fn, "structured_input_signature", None) if is_concrete_function(fn) else None
    return list(structured[0]) if structured else []


def bound_graph(tf: Any, concrete: Any, arg_specs: Sequence[Any]) -> Any:
    """The graph to walk: `concrete.graph`, or its function rebuilt with the specs' shapes where the trace left a
    dim unknown that a spec fixes. A spec that contradicts the trace is one line."""
    graph = concrete.graph
    explicit = graph.inputs[: len(graph.inputs) - len(concrete.captured_inputs)]
    given = [spec for spec in tf.nest.flatten(list(arg_specs)) if isinstance(spec, tf.TensorSpec)]
    if len(given) != len(explicit):
        return graph
    for index, (spec, inner) in enumerate(zip(given, explicit)):
        if not inner.shape.is_compatible_with(spec.shape):
            raise CountingError(f"input {index}: shape {spec.shape} does not fit the function's {inner.shape}")
    if all(_as_specific(inner.shape, spec.shape) for spec, inner in zip(given, explicit)):
        return graph
    shapes = [spec.shape.merge_with(inner.shape) for spec, inner in zip(given, explicit)]
    captured = [t.shape for t in graph.inputs[len(explicit) :]]
    return function_graph(graph, concrete.function_def, [*shapes, *captured], graph.inputs)


def _as_specific(shape: Any, than: Any) -> bool:
    """Whether `shape` knows every dim `than` knows."""
    if than.rank is None:
        return True
    if shape.rank is None:
        return False
    return all(mine is not None or theirs is None for mine, theirs in zip(shape.as_list(), than.as_list()))


def _elements(variable: Any) -> int:
    return math.prod(int(d) for d in variable.shape) if variable.shape.rank is not None else 0


def captured_variables(
    concrete: Any, graph: Any, measure: Callable[[Any], Any] = _elements
) -> dict[str, tuple[str, Any]]:
    """The variables `concrete` captures, by the name of the input of `graph` that receives each handle: a key
    (for `Walker.readers`) and the variable's `measure` (its element count; its bytes)."""
    by_handle = {id(variable.handle): variable for variable in getattr(concrete, "variables", ())}
    positions = {id(inner): index for index, inner in enumerate(concrete.graph.inputs)}
    found: dict[str, tuple[str, int]] = {}
    for external, internal in getattr(concrete.graph, "captures", ()):
        variable = by_handle.get(id(external))
        index = positions.get(id(internal))
        if variable is None or index is None or index >= len(graph.inputs):
            continue
        found[graph.inputs[index].name] = (f"{index}:{variable.name}", measure(variable))
    return found


def charge_variables(
    tally: Tally, readers: Mapping[str, str], sizes: Mapping[str, int], metric: Metric = PARAMS
) -> None:
    """Add each variable's elements (or bytes: `metric`) to the layer that first read it (`Walker.readers`): the
    reader's scope, or the nearest scope around it with counted ops in or below it (Keras reads a weight under a
    `Cast` scope of its layer, and a batch norm computes under `bn/batchnorm`: both are the layer `bn`); a
    variable nothing read goes to the root."""
    # the layers with counted ops (a layer holding bytes or parameters alone, as this adds them, is not one)
    counted = [
        path
        for path, layer in tally.layers.items()
        if path != ROOT and (set(layer.values) - {BYTES, PARAMS, PARAM_BYTES} or layer.skipped)
    ]
    for key, size in sizes.items():
        if not size:
            continue
        path = layer = readers.get(key, ROOT)
        while layer != ROOT and not any(p == layer or p.startswith(f"{layer}.") for p in counted):
            layer = layer.rsplit(".", 1)[0] if "." in layer else ROOT
        tally.layers.setdefault(path if layer == ROOT else layer, LayerCost()).add(metric, size)


def _with_gradient(tf: Any, call: Any, forward_ops: set[str]) -> Any:
    """`call` and the gradient of the sum of its floating outputs with respect to the trainable variables it read,
    as a PyTorch training step's default loss and backward. The names of the ops traced before the gradient is
    asked for go into `forward_ops`: they are the forward phase, every later op the backward."""

    def step(*args: Any, **kwargs: Any) -> Any:
        with tf.GradientTape() as tape:
            outputs = call(*args, **kwargs)
            leaves = [leaf for leaf in tf.nest.flatten(outputs) if getattr(leaf.dtype, "is_floating", False)]
            if not leaves:
                raise CountingError("a training count needs a floating-point output to sum into a loss")
            loss = tf.add_n([tf.reduce_sum(leaf) for leaf in leaves]) if len(leaves) > 1 else tf.reduce_sum(leaves[0])
        variables = [v for v in tape.watched_variables() if getattr(v, "trainable", True)]
        if not variables:
            raise CountingError("a training count needs trainable variables to differentiate")
        forward_ops.update(op.name for op in tf.compat.v1.get_default_graph().get_operations())
        return outputs, loss, tape.gradient(loss, variables)  # the loss too: its sum runs, as in torch

    return step


def _described(spec: Any, name: str = "") -> list[dict[str, Any]]:
    """A Report's `inputs` items for one argument: its shape and dtype (named where it was passed by name, and each
    entry of a dict of inputs by its key), or a short repr of a Python value."""
    if isinstance(spec, Mapping):
        return [item for key, value in spec.items() for item in _described(value, str(key))]
    named = {"name": name} if name else {}
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):
        dims = spec.shape.as_list() if spec.shape.rank is not None else []
        shape = [d if d is None else int(d) for d in dims]
        return [{**named, "shape": shape, "dtype": str(getattr(spec.dtype, "name", ""))}]
    return [{**named, "value": repr(spec)[:80]}]


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("tensorflow", "tensorflow-cpu", "keras"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
