"""TensorFlow models end to end, through the same front ends as PyTorch's: a pyproject budget on a Keras model fails
`flopbudget check` and the pytest item with the per-layer diff naming the Keras layers once a layer grows; a
SavedModel directory is a target like an `.onnx` file (named dims, counted without its variables); the marker and
fixture fail the test under pytest; `flopbudget count` prints the table for a SavedModel directory and a
`module:factory`; and `flopbudget init` finds the SavedModel directories in a folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget, inner_pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

pytestmark = pytest.mark.slow  # each front end is a process that imports tensorflow

MODELS = """\
import keras

WIDTH = 8


def net():
    return keras.Sequential(
        [
            keras.Input((4,), name="x"),
            keras.layers.Dense(WIDTH, activation="tanh", name="proj"),
            keras.layers.Dense(2, name="head"),
        ],
        name="net",
    )
"""

# On x = [2, 4]: proj 2*2*8*4 = 128 + 2*8 bias adds + 2*8 tanh = 160; head 2*2*2*8 = 64 + 2*2 = 68; total 228.
# WIDTH = 16: proj 2*2*16*4 = 256 + 32 + 32 = 320; head 2*2*2*16 = 128 + 4 = 132; total 452.
PYPROJECT = """\
[tool.flopbudget.models.net]
target = "models:net"
inputs = [[2, 4]]
flops = "300"

[tool.flopbudget.models.exported]
target = "exported/net"
inputs = { x = ["batch", 4] }
dims = { batch = 2 }
flops = "300"
"""

MARKER_TESTS = """\
import numpy as np
import pytest

from models import net

X = np.zeros((2, 4), np.float32)


@pytest.mark.flop_budget(flops="300")
def test_net(flopbudget):
    flopbudget.count(net(), X)


@pytest.mark.flop_budget(flops="5k")
def test_net_training(flopbudget):
    assert flopbudget.count(net(), X, training=True).backward.flops > 0


@pytest.mark.flop_budget(flops="300", params="100")
def test_exported(flopbudget):
    report = flopbudget.count("exported/net", inputs={"x": [2, 4]})
    assert (report.flops, report.params) == (228, 58)
"""


def project(where: Path, width: int = 8) -> Path:
    (where / "models.py").write_text(MODELS.replace("WIDTH = 8", f"WIDTH = {width}"))
    (where / "pyproject.toml").write_text(PYPROJECT)
    exported = where / "exported" / "net"
    if not exported.exists():  # the SavedModel stays the width-8 model: exported once, as a release would be
        namespace: dict[str, object] = {}
        exec(MODELS, namespace)
        namespace["net"]().export(str(exported), verbose=False)  # type: ignore[operator]
        for data in (exported / "variables").glob("variables.*"):
            data.unlink()  # counted from saved_model.pb alone: the weights are not needed
    return where


def test_a_grown_keras_model_fails_the_check_naming_its_layers(tmp_path: Path) -> None:
    project(tmp_path)
    update = flopbudget(tmp_path, "check", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    net = json.loads((tmp_path / ".flopbudget" / "net.json").read_text())
    assert (net["backend"], net["totals"]["flops"]) == ("tensorflow", 228)
    assert net["layers"]["proj"]["metrics"]["flops"] == 160
    assert net["layers"]["head"]["metrics"]["flops"] == 68
    exported = json.loads((tmp_path / ".flopbudget" / "exported.json").read_text())
    # the SavedModel counts what the Keras model counts; params 4*8 + 8 + 8*2 + 2 = 58 off the variables' shapes
    assert (exported["backend"], exported["totals"]["flops"], exported["totals"]["params"]) == ("tensorflow", 228, 58)

    project(tmp_path, width=16)  # the hidden layer doubles
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "net: 452 FLOPs > budget 300 FLOPs (+50.7%); baseline 228 FLOPs" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["proj", "160", "320", "+160", "(+100.0%)"] in rows
    assert ["head", "68", "132", "+64", "(+94.1%)"] in rows
    assert next(row for row in rows if row[:1] == ["exported"])[1] == "ok"


def test_the_pyproject_items_fail_under_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester.path, width=16)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("pyproject.toml")
    result.assert_outcomes(passed=1, failed=1)
    assert "FAILED pyproject.toml::net - net: 452 FLOPs > budget 300 FLOPs (+50.7%)" in result.stdout.str()


def test_the_marker_fails_the_test_under_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester.path, width=16)
    (pytester.path / "pyproject.toml").write_text("[tool.flopbudget]\ncollect-models = false\n")
    (pytester.path / "test_budgets.py").write_text(MARKER_TESTS)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("test_budgets.py")
    result.assert_outcomes(passed=2, failed=1)
    assert "FAILED test_budgets.py::test_net - test_net: 452 FLOPs > budget 300 FLOPs (+50.7%)" in result.stdout.str()


@pytest.mark.parametrize(
    ("argv", "header"),
    [
        (["exported/net", "--input", "2,4"], "exported/net: x=2x4 float32; inference"),  # matched to the names
        (["models:net", "--input", "2,4"], "models:net: 2x4 float32; inference"),
    ],
)
def test_count_prints_the_table(tmp_path: Path, argv: list[str], header: str) -> None:
    project(tmp_path)
    result = flopbudget(tmp_path, "count", *argv)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == header
    assert "total: 228 FLOPs, 96 MACs, 58 params" in result.stdout  # MACs 2*8*4 + 2*2*8 = 96


def test_count_asks_for_a_saved_models_open_dims(tmp_path: Path) -> None:
    project(tmp_path)
    result = flopbudget(tmp_path, "count", "exported/net")
    assert result.returncode == 2
    assert "give them as --input x=<?>,4 with each <...> replaced by a size" in result.stderr


def test_init_finds_the_saved_models_in_a_folder(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "pyproject.toml").unlink()
    result = flopbudget(tmp_path, "init", "exported", "--input", "x=2,4")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "pyproject.toml").read_text()
    assert 'target = "exported/net"' in text and "inputs = { x = [2, 4] }" in text
    assert 'flops = "233"' in text  # 228 + 2%, rounded up to 3 significant digits
