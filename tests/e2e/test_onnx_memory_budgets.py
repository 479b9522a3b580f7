"""Memory budgets on an ONNX model end to end: `bytes` and `param-bytes` are measured from the graph's types and
judged with a one-line reason; `peak-memory` is not measured for ONNX, so a budget on it fails as unchecked."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import flopbudget
from onnx_helpers import NET_PYPROJECT, write_onnx

pytest.importorskip("onnx")

# net.onnx with 4 channels: Conv reads x 2*3*8*8*4 = 1,536 B and w 4*3*3*3*4 = 432 B, writes c 2*4*8*8*4 =
# 2,048 B (4,016 B); ReLU reads c and writes y, 2,048 B each (4,096 B): 8,112 B moved; w holds 432 parameter bytes.
MOVED, PARAM_BYTES = 8112, 432


def project(tmp_path: Path, budgets: str) -> Path:
    write_onnx(tmp_path / "net.onnx")
    (tmp_path / "pyproject.toml").write_text(NET_PYPROJECT + budgets)
    return tmp_path


def test_a_bytes_budget_below_the_count_fails_check_with_one_line(tmp_path: Path) -> None:
    result = flopbudget(project(tmp_path, 'bytes = "8000B"\n'), "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "net: bytes moved 7.92 KiB > budget 7.81 KiB (+1.4%)\n" in result.stdout


def test_raised_budgets_pass(tmp_path: Path) -> None:
    budgets = f'bytes = "{MOVED}B"\nparam-bytes = "{PARAM_BYTES}"\n'  # limits are inclusive
    result = flopbudget(project(tmp_path, budgets), "check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_param_bytes_budget_below_the_count_fails(tmp_path: Path) -> None:
    result = flopbudget(project(tmp_path, 'param-bytes = "400B"\n'), "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "net: param bytes 432 B > budget 400 B (+8.0%)\n" in result.stdout


def test_a_peak_memory_budget_on_an_onnx_model_cannot_be_checked(tmp_path: Path) -> None:
    result = flopbudget(project(tmp_path, 'peak-memory = "1GiB"\n'), "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "peak memory: not measured for this model (onnx), so its peak-memory budget cannot be checked" in (
        result.stdout
    )
