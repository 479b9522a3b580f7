"""keras_rules: Keras layers priced by the shared rules, whatever ops their backend wrote them with."""

from __future__ import annotations

from typing import Any

from pytest_flopbudget._counting.keras_rules import ACTIVATION_SUFFIX, RULE_OP, reprice, rule_flops, with_activations
from pytest_flopbudget._metrics import FLOPS
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def swish(x: Any) -> Any:
    return x


def softmax(x: Any) -> Any:
    return x


def layer(kind: str, **config: Any) -> Any:
    """A stand-in for a Keras layer: the rules read the class name and config attributes only."""
    return type(kind, (), {})() if not config else _with(type(kind, (), {})(), config)


def _with(obj: Any, config: dict[str, Any]) -> Any:
    for key, value in config.items():
        setattr(obj, key, value)
    return obj


def test_batch_norm_is_4_per_element_at_inference_and_8_in_training() -> None:
    bn = layer("BatchNormalization", center=True, scale=True)
    # [1, 4, 4, 8] = 128 elements: normalise 2 + gamma 1 + beta 1 = 4 each = 512
    assert rule_flops(bn, ((1, 4, 4, 8), (1, 4, 4, 8)), False) == 512
    # training mode: + 4 per element for the batch statistics = 8*128 = 1024
    assert rule_flops(bn, ((1, 4, 4, 8), (1, 4, 4, 8)), True) == 1024
    # no beta, no gamma: normalise only, 2*128 = 256
    assert rule_flops(layer("BatchNormalization", center=False, scale=False), ((1, 128), (1, 128)), False) == 256


def test_layer_norm_is_8_per_element_and_rms_norm_4() -> None:
    # [2, 16, 64] = 2048 elements: statistics 4 + normalise 2 + weight 1 + bias 1 = 8 each = 16384
    assert rule_flops(layer("LayerNormalization", center=True, scale=True), ((2, 16, 64),) * 2, False) == 16384
    # rms_scaling: statistics 2 + apply 1 + weight 1 = 4 each = 8192
    rms = layer("LayerNormalization", center=False, scale=True, rms_scaling=True)
    assert rule_flops(rms, ((2, 16, 64),) * 2, False) == 8192


def test_activations_are_1_per_element_softmax_5_linear_free() -> None:
    # [1, 10, 10, 6] = 600 elements
    shapes = ((1, 10, 10, 6), (1, 10, 10, 6))
    assert rule_flops(layer("ReLU", max_value=6.0), shapes, False) == 600
    assert rule_flops(layer("Activation", activation=swish), shapes, False) == 600
    assert rule_flops(layer("Activation", activation=softmax), shapes, False) == 5 * 600
    assert rule_flops(layer("Softmax"), shapes, False) == 5 * 600
    assert rule_flops(layer("Conv2D"), shapes, False) is None  # no rule: counted as measured


def test_global_average_pooling_is_1_per_input_element() -> None:
    # mean of [1, 7, 7, 32] = 1568 input elements to [1, 32]: 1568 (no division per output)
    assert rule_flops(layer("GlobalAveragePooling2D"), ((1, 7, 7, 32), (1, 32)), False) == 1568


def test_reprice_replaces_a_layers_own_flops_and_the_total_follows() -> None:
    bn, dense = layer("BatchNormalization", center=True, scale=True), layer("Dense", activation=swish)
    layers = [("", layer("Functional")), ("bn", bn), ("fc", dense)]
    report = Report(forward=PhaseTotals(flops=1000))
    report.layers["bn"] = LayerCost(params=16)
    report.layers["bn"].add_op("Mul", {FLOPS: 50})  # what TensorFlow's folded batch norm wrote, say
    report.layers["fc"] = LayerCost()
    report.layers["fc"].add_op("MatMul", {FLOPS: 800})
    report.layers["fc" + ACTIVATION_SUFFIX] = LayerCost()
    report.layers["fc" + ACTIVATION_SUFFIX].add_op("Sigmoid", {FLOPS: 150})  # swish as x * sigmoid(1 * x): 3*50
    calls = {1: [((10, 4), (10, 4))], 3 + 2: [((10, 5), (10, 5))]}
    assert with_activations(layers)[5] == "fc" + ACTIVATION_SUFFIX
    reprice(report, layers, calls)
    # bn: 4 per element on 10*4 = 40 elements = 160 for 50; fc's swish: 1 per element on 50 = 50 for 150, merged
    assert report.layers["bn"].flops == 160
    assert report.layers["bn"].ops[RULE_OP].flops == 160
    assert report.layers["bn"].params == 16
    assert report.layers["fc"].flops == 800 + 50
    assert "fc" + ACTIVATION_SUFFIX not in report.layers
    # total 1000 - 50 + 160 - 150 + 50 = 1010
    assert report.forward.flops == 1010


def test_a_training_count_keeps_its_measured_flops() -> None:
    layers = [("bn", layer("BatchNormalization", center=True, scale=True))]
    report = Report(forward=PhaseTotals(flops=50), training=True)
    report.layers["bn"] = LayerCost()
    report.layers["bn"].add_op("Mul", {FLOPS: 50})
    reprice(report, layers, {0: [((10, 4), (10, 4))]})
    assert (report.layers["bn"].flops, report.flops) == (50, 50)
