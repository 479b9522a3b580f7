"""`flopbudget explain` in this process (`_cli/explain.py`): the table's per-layer lines, and every error as one
line that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from main_in_process import one_error_line, run_main

pytest.importorskip("torch")

MODELS = """\
import torch
from torch import nn


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())


def on_meta():
    with torch.device("meta"):
        return nn.Linear(4, 4)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "explain_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_per_layer_prints_one_line_per_layer_and_op(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "explain_models:net", "--input", "1,3,5,5", "--vs", "torch", "--per-layer"]
    code, out, err = run_main(argv, project, capsys)
    assert code == 0, err
    # Conv2d(3, 4, 3) on 1x3x5x5: 4*3*3 = 36 outputs of 27 taps, 972 MACs, 1944 + 36 (bias) FLOPs; ReLU 36.
    # FlopCounterMode: 1944 for the convolution, nothing for the bias or the ReLU.
    rows = [line.split() for line in out.splitlines()]
    assert ["bias", "add", "0", "aten.convolution", "36", "0", "+36"] in rows
    assert ["counted", "as", "zero", "1", "aten.relu", "36", "0", "+36"] in rows
    assert ["total", "+72"] in rows


def test_an_unknown_peer_is_one_line_listing_the_peers(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["explain", "explain_models:net", "--vs", "fvcor"], project, capsys)
    assert code == 2 and out == ""
    assert one_error_line(err) == (
        "flopbudget: error: --vs fvcor: not a peer; accepted: fvcore, ptflops, thop, calflops, torch, deepspeed, xla, "
        "tf-profiler"
    )


def test_a_peer_that_is_not_installed_says_what_to_pip_install(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pytest_flopbudget._explain.peers.thop.Thop.is_installed", lambda self: False)
    code, _, err = run_main(["explain", "explain_models:net", "--input", "1,3,5,5", "--vs", "thop"], project, capsys)
    assert code == 2
    assert one_error_line(err) == "flopbudget: error: --vs thop: thop's profile is not installed here; pip install thop"


def test_a_model_on_the_meta_device_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["explain", "explain_models:on_meta", "--input", "2,4", "--vs", "torch"], project, capsys)
    assert code == 2
    assert one_error_line(err).startswith(
        "flopbudget: error: --vs torch runs a real forward, and the model's weights are on the meta device"
    )


def test_an_onnx_file_is_refused_before_it_is_read(project: Path) -> None:
    from pytest_flopbudget._config.budget import Budget
    from pytest_flopbudget._config.location import Location
    from pytest_flopbudget._config.pyproject import ModelEntry
    from pytest_flopbudget._explain.run import ExplainError, explain_entry

    entry = ModelEntry(name="net", target="net.onnx", inputs=None, budget=Budget(), source=Location(key="net"))
    with pytest.raises(ExplainError) as raised:
        explain_entry(entry, project, "torch")
    assert str(raised.value) == (
        "--vs torch counts PyTorch models; net.onnx is an ONNX model (explain has no ONNX peer yet)"
    )
