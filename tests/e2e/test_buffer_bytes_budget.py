"""A `buffer-bytes` budget end to end: in pyproject and the marker, through the metric seam like `param-bytes`, with a
one-line reason naming the metric; a model without one sees no buffer column."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import flopbudget, pytest_in

pytest.importorskip("torch")

# BatchNorm2d(8) in fp32: running_mean and running_var (8 * 4 B each) and num_batches_tracked (one int64): 72 B
MODELS = """\
from torch import nn

def norm():
    return nn.BatchNorm2d(8).eval()
"""

PYPROJECT = """\
[tool.flopbudget]

[tool.flopbudget.models.norm]
target = "models:norm"
inputs = [[1, 8, 2, 2]]
flops = "1k"
buffer-bytes = "64B"

[tool.flopbudget.models.roomy]
target = "models:norm"
inputs = [[1, 8, 2, 2]]
flops = "1k"
buffer-bytes = "0.5KiB"
"""

MARKER_TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget(buffer_bytes="64")
def test_norm(flopbudget):
    flopbudget.count(nn.BatchNorm2d(8).eval(), torch.randn(1, 8, 2, 2))
"""


def test_a_buffer_bytes_budget_below_the_count_fails_check_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "norm: buffer bytes 72 B > budget 64 B (+12.5%)\n" in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("model "))
    assert header.split()[2:8] == ["FLOPs", "MACs", "params", "skipped", "buffer", "bytes"]  # budgeted: shown
    assert "roomy" in result.stdout and "roomy: buffer bytes" not in result.stdout


def test_without_a_buffer_bytes_budget_there_is_no_buffer_column(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT.replace('buffer-bytes = "64B"\n', "").replace('buffer-bytes = "0.5KiB"\n', "")
    )
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("model "))
    assert header.split() == ["model", "status", "FLOPs", "MACs", "params", "skipped", "budget", "use", "vs",
                              "baseline"]  # fmt: skip
    assert "buffer" not in result.stdout


def test_the_marker_argument_buffer_bytes(tmp_path: Path) -> None:
    (tmp_path / "test_markers.py").write_text(MARKER_TESTS)
    result = pytest_in(tmp_path, "test_markers.py", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "buffer bytes 72 B > budget 64 B" in result.stdout


def test_count_pictures_buffer_bytes(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    result = flopbudget(
        tmp_path, "count", "models:norm", "--input", "1,8,2,2", "--format", "svg", "--metric", "buffer-bytes"
    )
    assert result.returncode == 0, result.stderr
    assert "72 B; box width: inclusive buffer bytes" in result.stdout
