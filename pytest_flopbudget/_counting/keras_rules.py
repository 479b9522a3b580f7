"""Keras layers priced by the shared rules (docs/conventions.md), whatever ops their backend computes them with.

Keras 3 writes some layers with other ops on each backend (batch norm folds its statistics on TensorFlow, subtracts
the mean on torch, negates it on JAX; swish is one op on torch, three on TensorFlow); counting the ops that run
would give one model three FLOP figures. The rule is the same in every framework: an operation is priced by what it
means, so an inference count charges each layer of `RULES` the cost `formulas.py` gives it on its call's input and
output shapes, in place of the FLOPs its own ops counted (its sublayers keep theirs; MACs, bytes and every other
metric stay as measured; these layers have no MACs). The TensorFlow, JAX and PyTorch engines record each Keras
layer's calls (`marked_calls(..., calls=)`) and hand them to `reprice`.

A training count is left as measured: its layer figures mix the forward and the backward (docs/tensorflow.md).

Framework-free: layers are read by class name and config attributes, shapes are plain tuples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_flopbudget._counting import formulas
from pytest_flopbudget._metrics import FLOPS
from pytest_flopbudget._report import LayerCost, OpCost, Report

#: One call of a layer: the shape of its first input and of its (first) output.
Call = tuple[tuple[int, ...], tuple[int, ...]]

#: Activation functions by `__name__`, per output element (`formulas.ELEMENTWISE`, softmax `formulas.SOFTMAX`,
#: `linear` free); a function not listed keeps its measured ops.
ACTIVATIONS: dict[str, int] = {
    **dict.fromkeys(
        (
            "relu",
            "relu6",
            "leaky_relu",
            "elu",
            "selu",
            "gelu",
            "silu",
            "swish",
            "sigmoid",
            "hard_sigmoid",
            "hard_silu",
            "hard_swish",
            "tanh",
            "softplus",
            "softsign",
            "mish",
            "exponential",
        ),
        formulas.ELEMENTWISE,
    ),
    "softmax": formulas.SOFTMAX,
    "linear": 0,
}

#: The op name a repriced layer's cost is shown under in its layer's op breakdown.
RULE_OP = "keras_rule"


def activation_name(layer: Any) -> str:
    return str(getattr(getattr(layer, "activation", None), "__name__", ""))


def rule_flops(layer: Any, call: Call, training: bool) -> int | None:
    """The shared rule's FLOPs for one call of `layer`, or None for a layer without a rule."""
    in_shape, out_shape = call
    n_in, n_out = math.prod(in_shape), math.prod(out_shape)
    kind = type(layer).__name__
    if kind == "BatchNormalization":
        # 2 per element to normalise, 1 each for gamma and beta; training mode: + 4 for the batch statistics
        scale, center = bool(getattr(layer, "scale", True)), bool(getattr(layer, "center", True))
        return formulas.norm(n_out, stats=training, weight=scale, bias=center).flops
    if kind == "LayerNormalization":
        scale, center = bool(getattr(layer, "scale", True)), bool(getattr(layer, "center", True))
        if getattr(layer, "rms_scaling", False):
            return formulas.rms_norm(n_out, weight=scale).flops
        return formulas.norm(n_out, stats=True, weight=scale, bias=center).flops
    if kind == "Softmax":
        return formulas.softmax(n_out).flops
    if kind == "ReLU":
        return formulas.elementwise(n_out).flops
    if kind == "Activation":
        per = ACTIVATIONS.get(activation_name(layer))
        return None if per is None else formulas.elementwise(n_out, per).flops
    if kind.startswith("GlobalAveragePooling"):
        return formulas.reduction(n_in).flops
    return None


def with_activations(layers: Sequence[tuple[str, Any]]) -> dict[int, str]:
    """Layer paths by marker index (`marked_calls`): each layer's, and past `len(layers)` each layer's own
    activation function's (`activation_offset=len(layers)`), under a path `reprice` merges back into its layer."""
    paths = {index: path for index, (path, _) in enumerate(layers)}
    paths.update({len(layers) + index: path + ACTIVATION_SUFFIX for index, (path, _) in enumerate(layers)})
    return paths


#: Appended to a layer's path for the ops of the activation function it applies itself, until `reprice` merges
#: them back (Keras refuses "/" in a layer name).
ACTIVATION_SUFFIX = "/activation"


def reprice(report: Report, layers: Sequence[tuple[str, Any]], calls: Mapping[int, Sequence[Call]]) -> None:
    """Charge each layer with a rule its rule's FLOPs over its recorded `calls` (by index in `layers`) in place of
    the FLOPs of its own ops, in an inference count's `report`; the totals follow. A layer's own activation
    function, recorded past `len(layers)` (`with_activations`), is priced so too and merged back into its layer
    (a training count merges it back as measured)."""
    for index, (path, layer) in enumerate(layers):
        if not report.training:
            per = ACTIVATIONS.get(activation_name(layer))
            recorded = calls.get(len(layers) + index, ())
            if per is not None and recorded:
                activation = sum(formulas.elementwise(math.prod(out), per).flops for _, out in recorded)
                _charge(report, path + ACTIVATION_SUFFIX, activation, len(recorded))
            own_calls = calls.get(index, ())
            ruled = [rule_flops(layer, call, False) for call in own_calls]
            if own_calls and all(cost is not None for cost in ruled):
                _charge(report, path, sum(c for c in ruled if c is not None), len(own_calls))
        own = report.layers.pop(path + ACTIVATION_SUFFIX, None)
        if own is not None:
            report.layers.setdefault(path, LayerCost()).merge(own)


def _charge(report: Report, path: str, new: int, calls: int) -> None:
    """`new` FLOPs for the layer at `path` in place of its ops' FLOPs (forward phase: an inference count)."""
    cost = report.layers.get(path)
    if cost is None:
        return
    old = cost.get(FLOPS)
    for op in cost.ops.values():
        op.values.pop(FLOPS, None)
    cost.values.pop(FLOPS, None)
    cost.add(FLOPS, new)
    if new:
        cost.ops.setdefault(RULE_OP, OpCost()).add_cost(OpCost(calls, {FLOPS: new}))
    total = report.forward.get(FLOPS) + new - old
    report.forward.values.pop(FLOPS, None)
    report.forward.add(FLOPS, total)
