"""Integer ops end to end: `int-ops` in pyproject and the marker, a one-line reason naming it, the count table
showing it, and projects without integer work seeing the outputs they always saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget, pytest_in

pytest.importorskip("torch")

# int8 [32, 64] @ [64, 32] -> int32: 32*64*32 = 65,536 integer MACs, 131,072 int-ops, no FLOPs
MODELS = """\
import torch


class Quantized(torch.nn.Module):
    def forward(self, a, b):
        return torch._int_mm(a, b)


def quantized():
    return Quantized()
"""

INT8_INPUTS = 'inputs = [{ shape = [32, 64], dtype = "int8" }, { shape = [64, 32], dtype = "int8" }]\n'

PYPROJECT = f"""\
[tool.flopbudget]

[tool.flopbudget.models.q]
target = "models:quantized"
{INT8_INPUTS}flops = "1k"
int-ops = "100k"
"""

MARKER_TESTS = """\
import pytest
import torch


class Quantized(torch.nn.Module):
    def forward(self, a, b):
        return torch._int_mm(a, b)


@pytest.mark.flop_budget(int_ops="100 kOPs")
def test_quantized(flopbudget):
    flopbudget.count(Quantized(), torch.zeros(32, 64, dtype=torch.int8), torch.zeros(64, 32, dtype=torch.int8))
"""


def test_an_int_ops_budget_below_the_count_fails_check_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "q: 131k int ops > budget 100k int ops (+31.1%)\n" in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("model "))
    assert header.split()[2:6] == ["FLOPs", "MACs", "int", "ops"]


def test_integer_work_is_shown_in_check_json_without_a_budget_on_it(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('int-ops = "100k"\n', ""))
    result = flopbudget(tmp_path, "check", "--no-cache", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    (model,) = json.loads(result.stdout)["models"]
    assert model["metrics"]["flops"]["now"] == 0 and model["metrics"]["int-ops"]["now"] == 131_072
    assert model["report"]["totals"]["int-ops"] == 131_072


def test_count_shows_the_integer_ops_column(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    result = flopbudget(tmp_path, "count", "models:quantized", "--input", "32,64:int8", "--input", "64,32:int8")
    assert result.returncode == 0, result.stderr
    assert "total: 0 FLOPs, 0 MACs, 131,072 int ops, 0 params" in result.stdout
    assert result.stdout.splitlines()[1].split()[:7] == ["layer", "FLOPs", "MACs", "int", "ops", "params", "share"]


def test_marker_argument_int_ops(tmp_path: Path) -> None:
    (tmp_path / "test_markers.py").write_text(MARKER_TESTS)
    result = pytest_in(tmp_path, "test_markers.py", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "131k int ops > budget 100k int ops" in result.stdout


def test_init_budgets_the_integer_work_of_a_quantized_model(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'q'\n")
    result = flopbudget(tmp_path, "init", "models:quantized", "--input", "32,64:int8", "--input", "64,32:int8")
    assert result.returncode == 0, result.stdout + result.stderr
    written = (tmp_path / "pyproject.toml").read_text()
    assert 'int-ops = "134k"' in written  # 131,072 + the default 2% headroom = 133,694, rounded up to 3 digits
    assert flopbudget(tmp_path, "check", "--no-cache").returncode == 0
