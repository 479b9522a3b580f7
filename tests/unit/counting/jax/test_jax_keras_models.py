"""Keras 3 models on the JAX backend: `count(model, x)` traces `model.stateless_call` on abstract variables, charges
each op to the Keras layer `model.summary()` names, and counts parameters as `count_params()`; a tiny conv net counts
what the TensorFlow engine counts for the same Keras code, layer by layer, where Keras' backends do the same
arithmetic (batch norm and mean pooling differ by the exact figures docs/jax.md gives).

KERAS_BACKEND is read when keras is first imported and sticks for the process, so every Keras-on-JAX model here is
built and counted in one child process (run once per module); the tests read its JSON summary.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
    pytest.skip("keras and jax are needed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[4]

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["KERAS_BACKEND"] = "jax"
    import keras
    import numpy as np
    import jax
    from pytest_flopbudget import count
    from pytest_flopbudget._backends.dispatch import backend_for_model
    from pytest_flopbudget._errors import CountingError
    from examples.keras_models import convnet

    def summary(report):
        return {
            "backend": report.backend, "model": report.model, "versions": sorted(report.versions),
            "totals": [report.flops, report.macs, report.params], "skipped": report.skipped_ops,
            "forward": [report.forward.flops, report.forward.macs],
            "backward": [report.backward.flops, report.backward.macs],
            "inputs": report.inputs,
            "layers": {path: {"figures": [layer.flops, layer.macs, layer.params],
                              "ops": {op: [c.calls, c.flops, c.macs] for op, c in layer.ops.items()}}
                       for path, layer in report.layers.items()},
        }

    def abstractly(build):  # no variable gets a value (and jax compiles no initialiser): seconds saved per model
        with keras.StatelessScope(initialize_variables=False):
            return build()

    out = {"backend": keras.backend.backend()}
    conv = abstractly(
        lambda: keras.Sequential([keras.Input((1, 1, 1)), keras.layers.Conv2D(1, 1, use_bias=False, name="conv")])
    )
    out["conv"] = summary(count(conv, np.zeros((1, 1, 1, 1), np.float32)))
    dense = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="dense")])  # built eagerly
    out["dense"] = summary(count(dense, jax.ShapeDtypeStruct((25, 16), np.float32)))
    out["dense-abstract"] = summary(
        count(abstractly(lambda: keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="dense")])),
              jax.ShapeDtypeStruct((25, 16), np.float32))
    )
    out["chosen"] = backend_for_model(dense).name

    def nested():
        inner = keras.Sequential([keras.layers.Dense(8, name="d")], name="block")
        x = keras.Input((8,))
        y = keras.layers.Dense(8, name="dense_1")(inner(x))
        return keras.Model(x, keras.layers.Dense(8, name="dense")(y), name="outer")

    out["nested"] = summary(count(abstractly(nested), np.zeros((2, 8), np.float32)))

    def shared():
        x = keras.Input((8,))
        layer = keras.layers.Dense(8, name="shared")
        return keras.Model(x, layer(layer(x)))

    out["shared"] = summary(count(abstractly(shared), np.zeros((2, 8), np.float32)))

    def stateful():
        x = keras.Input((4,))
        h = keras.layers.BatchNormalization(name="norm")(keras.layers.Dense(6, name="first")(x))
        return keras.Model(x, keras.layers.Dropout(0.5, name="drop")(h))

    stateful = abstractly(stateful)
    out["stateful-count-params"] = stateful.count_params()
    out["stateful"] = summary(count(stateful, np.zeros((3, 4), np.float32)))
    out["stateful-training"] = summary(count(stateful, np.zeros((3, 4), np.float32), training=True))

    mlp = abstractly(lambda: keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, activation="relu", name="fc1"),
                                               keras.layers.Dense(3, name="fc2")]))
    out["train"] = summary(count(mlp, np.zeros((25, 16), np.float32), training=True))

    net = abstractly(lambda: convnet(8))
    out["convnet"] = summary(count(net, np.zeros((1, 8, 8, 3), np.float32)))
    out["convnet-training"] = summary(count(net, np.zeros((1, 8, 8, 3), np.float32), training=True))
    out["uninitialised"] = all(v._value is None for v in net.variables)

    class Unbuilt(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = keras.layers.Dense(3)

        def call(self, x):
            return self.fc(x)

    try:
        count(Unbuilt(), np.zeros((2, 4), np.float32))
    except CountingError as exc:
        out["unbuilt"] = str(exc)
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def keras_jax() -> dict[str, Any]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])  # type: ignore[no-any-return]


def figures(summary: dict[str, Any]) -> dict[str, list[int]]:
    return {path: layer["figures"] for path, layer in summary["layers"].items()}


def test_the_jax_backend_takes_a_keras_model_while_keras_runs_on_jax(keras_jax: dict[str, Any]) -> None:
    assert keras_jax["backend"] == "jax"
    assert keras_jax["chosen"] == "jax"
    assert keras_jax["dense"]["backend"] == "jax"
    assert "keras" in keras_jax["dense"]["versions"]
    assert keras_jax["dense"]["inputs"] == [{"shape": [25, 16], "dtype": "float32"}]  # the variables are no input


def test_a_one_by_one_conv_with_one_filter_is_one_mac(keras_jax: dict[str, Any]) -> None:
    # one output element, one input channel, one tap: 1 MAC = 2 FLOPs; no bias; 1 weight
    conv = keras_jax["conv"]
    assert conv["totals"] == [2, 1, 1]
    assert conv["layers"]["conv"]["ops"] == {"conv_general_dilated": [1, 2, 1]}


def test_dense_nine_on_25_by_16_is_7425_flops(keras_jax: dict[str, Any]) -> None:
    # 2*M*N*K = 2*25*9*16 = 7200 for the matmul, + 25*9 = 225 for the bias add; params 16*9 + 9 = 153
    dense = keras_jax["dense"]
    assert dense["totals"] == [7425, 3600, 153]
    assert dense["layers"]["dense"]["ops"] == {"dot_general": [1, 7200, 3600], "add": [1, 225, 0]}
    assert dense["skipped"] == {}


def test_layers_are_named_as_the_summary_names_them(keras_jax: dict[str, Any]) -> None:
    # each Dense(8) on 2 rows: 2*2*8*8 + 2*8 = 272 FLOPs, 8*8 + 8 = 72 params; a nested model's layer is dotted
    assert figures(keras_jax["nested"]) == {
        "block.d": [272, 128, 72],
        "dense_1": [272, 128, 72],
        "dense": [272, 128, 72],
    }
    assert keras_jax["nested"]["model"] == "outer"


def test_a_shared_layer_is_charged_twice_and_its_weights_once(keras_jax: dict[str, Any]) -> None:
    shared = keras_jax["shared"]["layers"]["shared"]
    assert shared["ops"]["dot_general"][0] == 2
    assert shared["figures"] == [2 * 272, 2 * 128, 72]


def test_params_are_count_params_and_seed_state_is_not_a_param(keras_jax: dict[str, Any]) -> None:
    # first: 4*6 + 6 = 30; norm: gamma, beta, moving mean and variance, 4*6 = 24; the dropout's seed state: none
    stateful = keras_jax["stateful"]
    assert keras_jax["stateful-count-params"] == stateful["totals"][2] == 54
    assert {path: layer["figures"][2] for path, layer in stateful["layers"].items()} == {"first": 30, "norm": 24}
    # inference: dropout does nothing; batch norm on [3, 6]: 2 per element (x*inv + shift) 36, and per channel the
    # variance + eps, rsqrt, * gamma, -mean, * inv, + beta: 6*6 = 36 (docs/jax.md)
    assert stateful["layers"]["norm"]["figures"][0] == 72
    assert "drop" not in stateful["layers"]
    training = keras_jax["stateful-training"]
    assert training["skipped"] == {}
    assert training["layers"]["drop"]["figures"][0] > 0  # dropout's mask arithmetic runs in training
    assert training["totals"][2] == 54


def test_a_training_step_differentiates_the_trainable_variables(keras_jax: dict[str, Any]) -> None:
    # forward MACs: 25*16*9 + 25*9*3 = 3600 + 675 = 4275; backward: fc2's weight and input gradients 2*675, fc1's
    # weight gradient 3600 (the input gets none) = 4950, as the TensorFlow and PyTorch engines count it
    train = keras_jax["train"]
    assert train["forward"][1] == 4275
    assert train["backward"][1] == 4950
    assert train["skipped"] == {}


def test_a_model_built_without_its_weights_counts_as_one_built_with_them(keras_jax: dict[str, Any]) -> None:
    # built under keras.StatelessScope(initialize_variables=False): no variable is ever given a value, the count
    # included, and every figure is the eagerly built model's
    assert keras_jax["uninitialised"] is True
    assert keras_jax["dense-abstract"]["layers"] == keras_jax["dense"]["layers"]
    assert keras_jax["convnet-training"]["skipped"] == {}


def test_an_unbuilt_model_is_refused_in_one_line(keras_jax: dict[str, Any]) -> None:
    assert keras_jax["unbuilt"].endswith("a Keras model must be built before it is counted (give keras.Input shapes, "
                                         "or call model.build(shape))")  # fmt: skip


def test_the_tiny_convnet_counts_what_the_tensorflow_engine_counts(keras_jax: dict[str, Any]) -> None:
    keras = pytest.importorskip("keras")
    pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend in this process")
    import numpy as np

    from examples.keras_models import convnet
    from pytest_flopbudget._counting.tensorflow.engine import count_tf

    report = count_tf(convnet(8), [np.zeros((1, 8, 8, 3), np.float32)])
    tf_figures = {path: [layer.flops, layer.macs, layer.params] for path, layer in report.layers.items()}
    jax_figures = figures(keras_jax["convnet"])
    assert tf_figures.keys() == jax_figures.keys()
    # batch norm, ReLU and global average pooling are priced by the shared rules on both (keras_rules.py), though
    # Keras writes them with other ops on each backend: every layer counts the same
    explained: dict[str, int] = {}
    for path, (flops, macs, params) in tf_figures.items():
        assert jax_figures[path] == [flops + explained.get(path, 0), macs, params], path
