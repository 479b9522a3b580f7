"""The same Keras 3 model code counted on the TensorFlow, PyTorch and JAX backends (issue 32): a conv net, a
transformer encoder, and `keras.applications` ResNet50, MobileNetV2 and EfficientNetB0 (`weights=None`, 224x224,
batch 1) give identical MACs, parameters and FLOPs per layer. Keras implements batch norm, layer norm, swish,
relu6, mean pooling and softmax with different ops on each backend; every engine prices those layers by the shared
rules (`_counting/keras_rules.py`), so they count the same. The one difference left is the exact figure
`explained()` derives (JAX's attention softmax), as docs/tensorflow.md lists it: any other difference fails.
A Keras model on JAX also goes through pyproject and `flopbudget count` with its layer names.

Keras fixes its backend at its first import: each backend counts every model in one child process
(`tests/keras_backends.py`), the three run side by side.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import flopbudget

pytestmark = pytest.mark.slow

for module in ("keras", "tensorflow", "torch", "jax"):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is needed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("tensorflow", "torch", "jax")
MODELS = ("convnet:32", "encoder:16", "resnet50:224", "mobilenet_v2:224", "efficientnet_b0:224")
TRAINING = "convnet:32:training"
FIGURES = ("flops", "macs", "params")


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each backend's results by model spec: the three child processes run at once (their output goes to files,
    so that none waits on a full pipe while another is read)."""
    where = tmp_path_factory.mktemp("keras_backends")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    children = {}
    for backend in BACKENDS:
        with (where / f"{backend}.out").open("w") as out, (where / f"{backend}.err").open("w") as err:
            children[backend] = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "keras_backends.py"), *MODELS, TRAINING],
                stdout=out,
                stderr=err,
                cwd=ROOT,
                env={**env, "KERAS_BACKEND": backend},
            )
    results = {}
    for backend, child in children.items():
        returncode = child.wait(timeout=600)
        assert returncode == 0, f"{backend}: {(where / f'{backend}.err').read_text()[-3000:]}"
        results[backend] = json.loads((where / f"{backend}.out").read_text().splitlines()[-1])
    return results


def layer_figures(result: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """(flops, macs, params) of each layer that has any (PyTorch's zero-FLOP padding layers move bytes only)."""
    figures = {}
    for path, layer in result["report"]["layers"].items():
        values = tuple(int(layer["metrics"].get(key, 0)) for key in FIGURES)
        if any(values):
            figures[path] = values
    return figures


@pytest.mark.parametrize("spec", MODELS)
def test_every_layer_counts_the_same_on_every_backend(counted: dict[str, Any], spec: str) -> None:
    reference = counted["tensorflow"][spec]
    expected = layer_figures(reference)
    assert expected
    for backend in ("torch", "jax"):
        result = counted[backend][spec]
        figures = layer_figures(result)
        assert figures.keys() == expected.keys(), backend
        # Batch and layer normalisation, activations, softmax and global average pooling are priced by the shared
        # rules on every backend (`_counting/keras_rules.py`), `jax.nn.dot_product_attention` (Keras'
        # MultiHeadAttention on JAX) by the attention rule (`_counting/jax/composites.py`), whatever ops Keras
        # writes them with: every layer counts the same FLOPs, MACs and params
        for path, figure in expected.items():
            assert figures[path] == figure, (backend, path)
        totals = result["report"]["totals"]
        ref = reference["report"]["totals"]
        assert (totals["flops"], totals["macs"], totals["params"]) == (ref["flops"], ref["macs"], ref["params"])
        assert result["report"]["skipped"] == {}
    # parameters are model.count_params() on every backend (batch norm's moving statistics included)
    assert {counted[b][spec]["count_params"] for b in BACKENDS} == {reference["report"]["totals"]["params"]}


def test_the_applications_count_their_published_macs(counted: dict[str, Any]) -> None:
    # MACs of convolutions and dense layers at 224x224, batch 1, the same on the three backends: ResNet50 3.86G
    # (Keras' ResNet50 puts the stride on the first 1x1 conv of a block, v1: 3.86G, not v1.5's 4.09G), MobileNetV2
    # 300.8M and EfficientNetB0 385.8M, the figures the papers publish as "FLOPs" (300M, 390M)
    macs = {spec: counted["jax"][spec]["report"]["totals"]["macs"] for spec in MODELS[2:]}
    assert macs == {"resnet50:224": 3_857_973_248, "mobilenet_v2:224": 300_774_272, "efficientnet_b0:224": 385_814_752}
    assert {spec: counted["jax"][spec]["report"]["totals"]["params"] for spec in MODELS[2:]} == {
        "resnet50:224": 25_636_712,
        "mobilenet_v2:224": 3_538_984,
        "efficientnet_b0:224": 5_330_571,
    }


def test_a_training_step_does_the_same_matmul_work_on_every_backend(counted: dict[str, Any]) -> None:
    # forward and backward MACs of the conv net's training step: each conv and the head once forward, and twice
    # backward (weight and input gradients) but for the stem, whose input gets no gradient
    phases = {
        backend: (
            counted[backend][TRAINING]["report"]["forward"]["macs"],
            counted[backend][TRAINING]["report"]["backward"]["macs"],
        )
        for backend in BACKENDS
    }
    assert len(set(phases.values())) == 1, phases
    forward, backward = phases["tensorflow"]
    stem = 32 * 32 * 16 * 3 * 9  # the stem's output elements x its taps: 442368
    assert backward == 2 * forward - stem
    assert all(counted[b][TRAINING]["report"]["skipped"] == {} for b in BACKENDS)


KERAS_MODELS = """\
import keras


def net():
    x = keras.Input((8,))
    y = keras.layers.Dense(16, activation="relu", name="hidden")(x)
    return keras.Model(x, keras.layers.Dense(4, name="head")(y), name="net")
"""

# On x = [2, 8]: hidden 2*2*16*8 + 2*16 (bias) + 2*16 (relu) = 576; head 2*2*4*16 + 2*4 = 264; total 840 FLOPs,
# 256 + 128 = 384 MACs, 8*16 + 16 + 16*4 + 4 = 212 params
PYPROJECT = """\
[tool.flopbudget.models.net]
target = "keras_models:net"
inputs = [[2, 8]]
flops = "800"
"""


def test_a_keras_model_on_jax_goes_through_pyproject_and_count(tmp_path: Path) -> None:
    (tmp_path / "keras_models.py").write_text(KERAS_MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "check", "--no-cache", KERAS_BACKEND="jax")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "net: 840 FLOPs > budget 800 FLOPs (+5.0%)" in result.stdout
    counted = flopbudget(tmp_path, "count", "keras_models:net", "--input", "2,8", KERAS_BACKEND="jax")
    assert counted.returncode == 0, counted.stderr
    rows = [line.split() for line in counted.stdout.splitlines()]
    assert next(row for row in rows if row[:1] == ["hidden"])[:4] == ["hidden", "576", "256", "144"]
    assert next(row for row in rows if row[:1] == ["head"])[:4] == ["head", "264", "128", "68"]
    assert "total: 840 FLOPs, 384 MACs, 212 params" in counted.stdout
