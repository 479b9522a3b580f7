"""A `peak-memory` budget end to end (issue 20): a model whose peak of live tensor bytes is over it fails
`flopbudget check` and pytest, with one line naming the metric and the layer at the peak."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import flopbudget, inner_pytest

MODEL = """\
import torch


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
"""

# fp32, batch 64: params (256*1024 + 1024 + 1024*256 + 256) * 4 = 2,102,272 B, input 64*256*4 = 65,536 B, and at the
# ReLU (layer "1") both activations 64*1024*4 = 262,144 B each are alive: 2,692,096 B = 2.57 MiB
PEAK = 2_692_096

PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "model:mlp"
inputs = [[64, 256]]
peak-memory = "{budget}"
"""


def _project(path: Path, budget: str) -> None:
    (path / "model.py").write_text(MODEL)
    (path / "pyproject.toml").write_text(PYPROJECT.format(budget=budget))


def test_check_fails_naming_the_metric_and_the_layer_at_the_peak(tmp_path: Path) -> None:
    _project(tmp_path, "1MiB")
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first == "mlp: peak memory 2.57 MiB > budget 1.00 MiB (+156.7%) at 1"
    assert "Traceback" not in result.stderr


def test_check_passes_under_the_budget_and_the_json_carries_the_exact_peak(tmp_path: Path) -> None:
    _project(tmp_path, "3MiB")
    assert flopbudget(tmp_path, "check", "--no-cache").returncode == 0
    counted = flopbudget(tmp_path, "count", "model:mlp", "--input", "64,256", "--format", "json")
    assert counted.returncode == 0, counted.stderr
    assert '"peak_memory": {\n    "bytes": 2692096,\n    "layer": "1"\n  }' in counted.stdout
    assert PEAK == (256 * 1024 + 1024 + 1024 * 256 + 256) * 4 + 64 * 256 * 4 + 2 * 64 * 1024 * 4


def test_pytest_fails_the_model_item_and_a_marker_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester.path, "1MiB")
    pytester.makepyfile(
        test_mlp="""
        import pytest
        import torch
        from model import mlp


        @pytest.mark.flop_budget(peak_memory="1MiB")
        def test_mlp(flopbudget):
            flopbudget.count(mlp(), torch.randn(64, 256))
        """
    )
    run = inner_pytest(pytester, monkeypatch, "serial")
    result = run("pyproject.toml", "test_mlp.py")
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert "mlp: peak memory 2.57 MiB > budget 1.00 MiB (+156.7%) at 1" in output
    assert "test_mlp: peak memory 2.57 MiB > budget 1.00 MiB (+156.7%) at 1" in output
