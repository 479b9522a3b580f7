"""The memory budgets end to end: `param-bytes` and `bytes` in pyproject and the marker, a one-line reason naming the
metric, and projects without them seeing the tables they always saw."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import MODELS, flopbudget, pytest_in

pytest.importorskip("torch")

# models:small is nn.Linear(8, 2) in fp32: 18 parameters, 72 parameter bytes
PYPROJECT = """\
[tool.flopbudget]

[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
flops = "1k"
param-bytes = "64B"

[tool.flopbudget.models.plain]
target = "models:small"
inputs = [[1, 8]]
flops = "1k"
"""

MARKER_TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget(param_bytes="64", bytes="1KiB")
def test_small(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.randn(1, 8))
"""


def test_a_param_bytes_budget_below_the_count_fails_check_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "small: param bytes 72 B > budget 64 B (+12.5%)\n" in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("model "))
    assert header.split()[2:8] == ["FLOPs", "MACs", "params", "skipped", "param", "bytes"]  # budgeted: shown
    assert "bytes moved" not in header  # budgeted by no model: no column


def test_a_project_without_memory_budgets_sees_no_memory_column(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('param-bytes = "64B"\n', ""))
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "model  status  FLOPs  MACs  params  skipped  budget use  vs baseline" in result.stdout
    assert "bytes" not in result.stdout


def test_marker_arguments_param_bytes_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "test_markers.py").write_text(MARKER_TESTS)
    result = pytest_in(tmp_path, "test_markers.py", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "param bytes 72 B > budget 64 B" in result.stdout


def test_count_pictures_bytes(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    result = flopbudget(tmp_path, "count", "models:small", "--input", "1,8", "--format", "svg", "--metric", "bytes")
    assert result.returncode == 0, result.stderr
    # addmm reads the bias (8 B), the input (32 B) and the weight (64 B) and writes the output (8 B)
    assert "112 B; box width: inclusive bytes moved" in result.stdout
