"""Keras 3 models on the torch backend are torch.nn.Modules: count() takes them as they are, and attributes costs and
parameters to Keras layers by their names (Keras layers are not torch submodules; see keras_layers.py).

KERAS_BACKEND must be set before keras is first imported, and it sticks for the process, so every Keras model here
is built and counted in one child process (run once per module); the tests read its JSON summary.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

if importlib.util.find_spec("keras") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("keras and torch are needed", allow_module_level=True)

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["KERAS_BACKEND"] = "torch"
    import keras
    import torch
    from pytest_flopbudget import count

    assert keras.backend.backend() == "torch"

    def summary(report):
        return {
            "flops": report.flops, "macs": report.macs, "params": report.params, "skipped": report.skipped,
            "forward": [report.forward.flops, report.forward.macs],
            "backward": [report.backward.flops, report.backward.macs],
            "layers": {path: {op: [c.calls, c.flops, c.macs] for op, c in layer.ops.items()}
                       for path, layer in report.layers.items() if layer.ops},
        }

    def grads(model):
        return sorted({type(p.grad).__name__ if p.grad is not None else "None" for p in model.parameters()})

    out = {}
    conv = keras.Sequential([keras.Input((1, 1, 1)), keras.layers.Conv2D(1, (1, 1), use_bias=False)])
    dense = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="dense")])
    image = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, name="conv"), keras.layers.ReLU(name="relu")]
    )
    out["is_module"] = isinstance(dense, torch.nn.Module)
    for execution in ("fake", "real"):
        out["conv-" + execution] = summary(count(conv, torch.ones(1, 1, 1, 1), execution=execution))
        out["dense-" + execution] = summary(count(dense, torch.ones(25, 16), execution=execution))
        out["image-" + execution] = summary(count(image, torch.ones(1, 8, 8, 3), execution=execution))

    def mlp():
        return keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, activation="relu"), keras.layers.Dense(3)])

    for execution in ("fake", "real"):
        model = mlp()
        first = count(model, torch.ones(25, 16), training=True, execution=execution)
        out["train-" + execution] = summary(first)
        out["train-" + execution + "-grads"] = grads(model)
        out["train-" + execution + "-again"] = summary(count(model, torch.ones(25, 16), training=True,
                                                             execution=execution))
    # Dropout (a SeedGenerator's state is a torch parameter), batch norm (non-trainable moving statistics) and a
    # nested model whose layers are two levels down
    block = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(5, name="inner"), keras.layers.Dropout(0.5, name="drop")], name="block"
    )
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(6, name="first")(inputs)
    hidden = keras.layers.BatchNormalization(name="norm")(hidden)
    nested = keras.Model(inputs, block(hidden), name="nested")
    out["nested-torch-params"] = sum(p.numel() for p in nested.parameters())
    out["nested-count-params"] = nested.count_params()
    for execution in ("fake", "real"):
        out["nested-" + execution] = summary(count(nested, torch.ones(3, 4), execution=execution))
        params = count(nested, torch.ones(3, 4), execution=execution).layers
        out["nested-" + execution + "-params"] = {path: c.params for path, c in params.items() if c.params}
    json.dump(out, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def keras_results() -> dict[str, Any]:
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_keras_model_is_a_torch_module(keras_results: dict[str, Any]) -> None:
    assert keras_results["is_module"] is True


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_conv2d_seed(keras_results: dict[str, Any], execution: str) -> None:
    # Conv2D(1, (1, 1), use_bias=False) on a 1x1x1x1 input: one multiply-accumulate = 2 FLOPs (TF profiler seed)
    report = keras_results["conv-" + execution]
    assert (report["flops"], report["macs"], report["params"], report["skipped"]) == (2, 1, 1, {})


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_dense_seed(keras_results: dict[str, Any], execution: str) -> None:
    # Dense(9) on [25, 16]: 2*25*16*9 = 7200 + 25*9 = 225 bias adds = 7425 FLOPs; 3600 MACs; 16*9 + 9 = 153 params
    report = keras_results["dense-" + execution]
    assert (report["flops"], report["macs"], report["params"], report["skipped"]) == (7425, 3600, 153, {})
    # Keras' torch Dense runs a matmul (mm) and a separate bias add
    assert report["layers"] == {"dense": {"aten.mm": [1, 7200, 3600], "aten.add": [1, 225, 0]}}


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_channels_last_conv(keras_results: dict[str, Any], execution: str) -> None:
    # Conv2D(4, 3) on 1x8x8x3 (channels last): 6*6*4 = 144 outputs * 3*9 = 27 taps = 3888 MACs;
    # FLOPs 7776 + 144 bias + 144 relu = 8064; params 4*27 + 4 = 112
    report = keras_results["image-" + execution]
    assert (report["flops"], report["macs"], report["params"], report["skipped"]) == (8064, 3888, 112, {})


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_costs_are_attributed_to_keras_layers(keras_results: dict[str, Any], execution: str) -> None:
    # Keras layers are not torch submodules, so the tracker is given them by Keras' own layer tracking
    layers = keras_results["image-" + execution]["layers"]
    assert set(layers) == {"conv", "relu"}
    assert sum(c[1] for c in layers["conv"].values()) == 3888 * 2 + 144  # MACs x 2 + bias adds
    assert sum(c[1] for c in layers["relu"].values()) == 144


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_nested_model_layers_have_dotted_paths(keras_results: dict[str, Any], execution: str) -> None:
    report = keras_results["nested-" + execution]
    # first: Dense(6) on [3, 4]: 2*3*4*6 = 144 + 18 bias; inner: Dense(5) on [3, 6]: 2*3*6*5 = 180 + 15 bias
    assert report["layers"]["first"] == {"aten.mm": [1, 144, 72], "aten.add": [1, 18, 0]}
    assert report["layers"]["block.inner"] == {"aten.mm": [1, 180, 90], "aten.add": [1, 15, 0]}
    assert "norm" in report["layers"]
    assert "" not in report["layers"]  # nothing is left on the root


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_params_are_count_params_not_seed_state(keras_results: dict[str, Any], execution: str) -> None:
    # first 4*6 + 6 = 30; norm gamma, beta, moving mean and variance 4*6 = 24; inner 6*5 + 5 = 35 -> 89.
    # Dropout's SeedGenerator state (2 int32 values) is a torch parameter but not a weight.
    assert keras_results["nested-count-params"] == 89
    assert keras_results["nested-torch-params"] == 89 + 2
    assert keras_results["nested-" + execution]["params"] == 89
    assert keras_results["nested-" + execution + "-params"] == {"first": 30, "norm": 24, "block.inner": 35}


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_training_step(keras_results: dict[str, Any], execution: str) -> None:
    report = keras_results["train-" + execution]
    # forward: Dense(9) mm 2*25*16*9 = 7200 + bias 225 + relu 225; Dense(3) mm 2*25*9*3 = 1350 + bias 75;
    #          loss sum over 25*3 = 75  -> 9150 FLOPs, 3600 + 675 = 4275 MACs
    # backward: Dense(3) grad_W 1350 + grad_b 75 + grad_input 1350; relu 225;
    #           Dense(9) grad_W 7200 + grad_b 225 (no input gradient) -> 10425 FLOPs, 675 + 675 + 3600 = 4950 MACs
    assert report["forward"] == [9150, 4275]
    assert report["backward"] == [10425, 4950]
    assert report["skipped"] == {}


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_training_count_leaves_no_grad_behind(keras_results: dict[str, Any], execution: str) -> None:
    assert keras_results["train-" + execution + "-grads"] == ["None"]


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_keras_training_count_is_repeatable(keras_results: dict[str, Any], execution: str) -> None:
    assert keras_results["train-" + execution + "-again"] == keras_results["train-" + execution]
