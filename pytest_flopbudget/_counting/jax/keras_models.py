"""Counting a Keras 3 model on the JAX backend (`keras.backend.backend() == "jax"`) statelessly from its jaxpr.

The model's call is traced as `model.stateless_call(trainable, non_trainable, *inputs, training=...)` under
`jax.make_jaxpr`, its variables given as `jax.ShapeDtypeStruct`s: nothing is allocated beyond what building the
model allocated, nothing runs; a model built under `keras.StatelessScope(initialize_variables=False)` is counted
without its weights ever being allocated. Each layer's call runs under a marker scope (`names.KERAS_SCOPE` + the
layer's index in `keras_layers`), so every equation is charged to the layer `model.summary()` names, dotted from the
root as the TensorFlow and PyTorch engines name the same Keras model; parameters are `model.count_params()` per
layer. A training count differentiates the trainable variables (the non-trainable ones, batch statistics and seed state,
update as the call runs, and that arithmetic counts).
"""

from __future__ import annotations

from typing import Any

from pytest_flopbudget._counting.jax.engine import count_jax
from pytest_flopbudget._counting.jax.names import KERAS_SCOPE, keras_layer
from pytest_flopbudget._counting.keras_layers import keras_layers, keras_param_bytes, keras_params, marked_calls
from pytest_flopbudget._counting.keras_rules import Call, reprice, with_activations
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report


def count_keras(model: Any, *args: Any, training: bool = False, model_name: str = "", **kwargs: Any) -> Report:
    """Count a built Keras 3 model (JAX backend) called on `args` (arrays or `jax.ShapeDtypeStruct`s)."""
    import jax
    import keras

    if not getattr(model, "built", False):
        raise CountingError(
            f"{model_name or getattr(model, 'name', 'model')}: a Keras model must be built before it is counted "
            f"(give keras.Input shapes, or call model.build(shape))"
        )
    layers = keras_layers(model)
    trainable = [_struct(jax, variable) for variable in model.trainable_variables]
    non_trainable = [_struct(jax, variable) for variable in model.non_trainable_variables]
    passes_training = getattr(model, "_call_has_training_arg", True)
    calls: dict[int, list[Call]] = {}

    def forward(trainable: Any, non_trainable: Any, *call_args: Any, **call_kwargs: Any) -> Any:
        if passes_training:
            call_kwargs = {"training": training, **call_kwargs}
        # the outer scope keeps variables a model built under `StatelessScope(initialize_variables=False)` left
        # uninitialised so: stateless_call's own scope would initialise them (allocate) when it closes
        with (
            keras.StatelessScope(initialize_variables=False),
            marked_calls(
                [layer for _, layer in layers], lambda i: jax.named_scope(f"{KERAS_SCOPE}{i}"), calls, len(layers)
            ),
        ):
            outputs, _ = model.stateless_call(trainable, non_trainable, *call_args, **call_kwargs)
        return outputs

    report = count_jax(
        forward,
        (trainable, non_trainable, *args),
        kwargs,
        training=training,
        model_name=model_name or str(getattr(model, "name", "") or type(model).__name__),
        namer=keras_layer(with_activations(layers)),
        params=keras_params(layers),
        state_args=2,
        param_bytes=keras_param_bytes(layers),  # Keras holds no buffers apart from its weights: not measured
    )
    report.versions.update(_keras_version())
    reprice(report, layers, calls)
    return report


def _keras_version() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return {"keras": version("keras")}
    except PackageNotFoundError:
        return {}


def _struct(jax: Any, variable: Any) -> Any:
    """A Keras variable as a `ShapeDtypeStruct`, from its shape and dtype alone: a variable left uninitialised (a
    model built under `keras.StatelessScope(initialize_variables=False)`) has no value to read."""
    return jax.ShapeDtypeStruct(tuple(int(d) for d in variable.shape), jax.numpy.dtype(variable.dtype))
