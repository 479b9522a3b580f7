"""`flopbudget count` on the memory metrics, end to end (issue 20): the table's bytes moved, arithmetic intensity and
peak line, the `--hardware` roofline estimate, and the `--metric peak-memory` picture with the model's budget; the
check's outputs carry none of it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from e2e_helpers import flopbudget

MODEL = """\
import torch


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
"""

PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "model:mlp"
inputs = [[64, 256]]
peak-memory = "1MiB"
"""

# fp32, batch 64. FLOPs: fc1 2*64*256*1024 + 64*1024 (bias) = 33,619,968; ReLU 65,536; fc2 2*64*1024*256 + 64*256 =
# 33,570,816. Bytes moved (4 per element): fc1 reads x 64*256, W 256*1024, b 1024 and writes 64*1024: 1,380,352 B;
# ReLU reads and writes 64*1024: 524,288 B; fc2 reads 64*1024, W 1024*256, b 256 and writes 64*256: 1,377,280 B.
FC1 = (33_619_968, 1_380_352)
RELU = (65_536, 524_288)
FC2 = (33_570_816, 1_377_280)
FLOPS = FC1[0] + RELU[0] + FC2[0]  # 67,256,320
MOVED = FC1[1] + RELU[1] + FC2[1]  # 3,281,920 B
# peak: parameters 2,102,272 B, the input 65,536 B and both activations of 262,144 B at the ReLU (layer "1")
PEAK = 2_692_096


def _project(path: Path) -> Path:
    (path / "model.py").write_text(MODEL)
    (path / "pyproject.toml").write_text(PYPROJECT)
    return path


def test_the_table_shows_bytes_intensity_and_the_peak(tmp_path: Path) -> None:
    result = flopbudget(_project(tmp_path), "count", "mlp")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split()[-3:] == ["bytes", "moved", "FLOPs/B"]
    rows = {line.split()[0]: line.split()[-2:] for line in lines[3:7]}
    # 67,256,320 / 3,281,920 = 20.5; 33,619,968 / 1,380,352 = 24.4; 65,536 / 524,288 = 0.125; fc2 24.4
    assert rows == {
        "(model)": ["3.13Mi", "20.5"], "0": ["1.32Mi", "24.4"], "1": ["512Ki", "0.125"], "2": ["1.31Mi", "24.4"]
    }  # fmt: skip
    assert f"memory: {MOVED:,} bytes moved (3.13 MiB), 20.5 FLOPs/byte; 2,102,272 param bytes (2.00 MiB)" in lines
    assert "peak memory 2.57 MiB at 1" in lines
    assert round(FLOPS / MOVED, 1) == 20.5


def test_the_roofline_estimate_on_h100(tmp_path: Path) -> None:
    result = flopbudget(_project(tmp_path), "count", "mlp", "--hardware", "h100-sxm")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    bounds = {line.split()[0]: line.split()[-3:] for line in lines[3:7]}
    # fp32 parameters: the fp32 peak, 67e12 FLOP/s; ridge point 67e12 / 3.35e12 = 20 FLOPs/byte. The Linears (24.4)
    # are compute-bound: 33,619,968 / 67e12 = 502 ns and 33,570,816 / 67e12 = 501 ns; the ReLU (0.125) is
    # memory-bound: 524,288 / 3.35e12 = 157 ns; the model is the sum, 1.16 us, mostly compute
    assert bounds == {
        "(model)": ["~1.16", "us", "compute"],
        "0": ["~502", "ns", "compute"],
        "1": ["~157", "ns", "memory"],
        "2": ["~501", "ns", "compute"],
    }
    assert any(line.startswith("roofline estimate on h100-sxm") and "fp32 peak 67 TFLOP/s" in line for line in lines)
    document = flopbudget(tmp_path, "count", "mlp", "--hardware", "h100-sxm", "--format", "json")
    estimate = json.loads(document.stdout)["roofline_estimate"]
    assert estimate["seconds"] == pytest.approx((FC1[0] + FC2[0]) / 67e12 + RELU[1] / 3.35e12, rel=1e-12)
    assert (estimate["bound"], estimate["dtype"], estimate["hardware"]) == ("compute", "fp32", "h100-sxm")


def test_the_peak_memory_picture_shows_the_budget_it_breaks(tmp_path: Path) -> None:
    result = flopbudget(_project(tmp_path), "count", "mlp", "--metric", "peak-memory", "--format", "svg")
    assert result.returncode == 0, result.stderr
    root = ET.fromstring(result.stdout)
    groups = {g.get("class"): g for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert (groups["peak"].get("data-bytes"), groups["peak"].get("data-layer")) == (str(PEAK), "1")
    assert groups["budget"].get("data-over") == "true"
    assert "budget 1.00 MiB: over by +156.7%" in result.stdout


def test_the_check_outputs_carry_no_intensity_or_estimate(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = flopbudget(project, "check", "--no-cache", "--format", "json")
    assert result.returncode == 1
    assert "intensity" not in result.stdout and "roofline" not in result.stdout
    assert "FLOPs/B" not in flopbudget(project, "check", "--no-cache").stdout
