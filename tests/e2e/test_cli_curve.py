"""`flopbudget count` with named dims as a user runs it: a real subprocess, a pyproject model with `dims` and
`curve`, an ONNX graph's symbolic `batch` sized by `--dim`, stdout parsed as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget
from onnx_helpers import write_onnx

#: nn.Linear(8, 2) on [rows, 8]: 16 MACs and 34 FLOPs (2 per MAC + 2 bias adds) per row, 18 params.
PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [["rows", 8]]
dims = { rows = 4 }
curve = { rows = [1, 64] }
flops = "1M"
"""


def test_a_pyproject_curve_prints_its_formulas(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "models.py").write_text("from torch import nn\n\ndef small():\n    return nn.Linear(8, 2)\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "count", "small", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["formula"]["macs"], data["formula"]["flops"], data["formula"]["params"]) == (
        "16*rows",
        "34*rows",
        "18",
    )
    assert data["totals"]["macs"] == 64 and data["curve"]["holds"]["text"] == "exact on rows in [1, 64]"
    text = flopbudget(tmp_path, "count", "small")
    assert text.returncode == 0 and "Formula in rows: exact on rows in [1, 64]" in text.stdout


def test_an_onnx_graphs_symbolic_batch_is_sized_by_dim(tmp_path: Path) -> None:
    write_onnx(tmp_path / "net.onnx")
    result = flopbudget(tmp_path, "count", "net.onnx", "--dim", "batch=1..32", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # Conv 3 -> 4 channels, 3x3, on 8x8 with padding: 27 * 4 * 64 = 6912 MACs per image
    assert data["formula"]["macs"] == "6912*batch" and data["inputs"][0]["shape"] == [32, 3, 8, 8]
    point = flopbudget(tmp_path, "count", "net.onnx", "--dim", "batch=3", "--format", "json")
    assert json.loads(point.stdout)["totals"]["macs"] == 3 * 6912 and "formula" not in json.loads(point.stdout)


def test_a_dim_the_graph_does_not_have_is_one_line(tmp_path: Path) -> None:
    write_onnx(tmp_path / "net.onnx")
    result = flopbudget(tmp_path, "count", "net.onnx", "--dim", "length=8")
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.strip() == (
        "flopbudget: error: net.onnx: the dim 'length' is not a symbolic dim of the graph's inputs ('batch')"
    )
    # `sequence` is a sympy function: a formula in it would not parse back, so --dim refuses it up front
    refused = flopbudget(tmp_path, "count", "net.onnx", "--dim", "sequence=8")
    assert refused.returncode == 2 and "'sequence' cannot name a dim: sympy reads it as" in refused.stderr
