"""`flopbudget explain` as a user runs it: a real subprocess in a project with a small model, the table, the JSON
(its schema and its sums) and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget

pytest.importorskip("torch")

#: conv 3 -> 8 (3x3, padding 1, with a bias) on 1x3x8x8, batch norm, ReLU, a residual add, a 2x2 max pool and a
#: linear head 128 -> 10. Ours: conv 2 * 13,824 + 512 (bias) = 28,160; bn 512 * 4 = 2,048; relu 512; add 512;
#: max pool 128 windows of 4 = 512; fc 2 * 1,280 + 10 = 2,570: 34,314 FLOPs.
MODELS = """\
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        h = self.conv(x)
        y = self.relu(self.bn(h)) + h
        return self.fc(self.pool(y).flatten(1))


def tiny():
    torch.manual_seed(0)
    return TinyNet()


def conv_1x1():
    return nn.Conv2d(1, 1, 1, bias=False)
"""

PYPROJECT = """\
[tool.flopbudget.models.tiny]
target = "models:tiny"
inputs = [[1, 3, 8, 8]]
flops = "1M"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def test_the_table_lists_each_difference_with_its_reason(project: Path) -> None:
    result = flopbudget(project, "explain", "tiny", "--vs", "torch")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"tiny: ours against torch.utils.flop_counter.FlopCounterMode {_torch_version()}"
    # FlopCounterMode: conv 2 * 13,824 and fc 2 * 1,280, nothing else: 30,208
    assert (
        "ours                   34,314 FLOPs" in result.stdout
        and "theirs                 30,208 FLOPs" in result.stdout
    )
    rows = {tuple(line.split()[:3]) for line in lines}
    assert ("counted", "as", "zero") in rows and ("bias", "add", "aten.convolution") in rows
    assert lines[lines.index(next(line for line in lines if line.strip().startswith("total")))].split()[-1] == "+4,106"


def test_json_gives_ours_theirs_and_items_that_sum_to_the_difference(project: Path) -> None:
    result = flopbudget(project, "explain", "models:tiny", "--input", "1,3,8,8", "--vs", "torch", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"ours", "theirs", "items", "unit", "peer", "difference"} <= set(data)
    assert (data["ours"], data["theirs"], data["unit"], data["peer"]) == (34_314, 30_208, "flops", "torch")
    for item in data["items"]:
        assert {"ours", "theirs", "reason", "layer"} <= set(item) and isinstance(item["ours"], int)
        assert item.get("op") or item["layer"] is not None
    assert sum(item["ours"] - item["theirs"] for item in data["items"]) == data["ours"] - data["theirs"] == 4_106
    # bn 2,048 + relu 512 + the add 512 + the pool 512 priced at zero; the conv's and the head's biases 512 + 10
    assert data["by_reason"] == {"counted as zero": 3_584, "bias add": 522}


def test_the_1x1_convs_2_flops_against_fvcore(project: Path) -> None:
    pytest.importorskip("fvcore")
    result = flopbudget(
        project, "explain", "models:conv_1x1", "--input", "1,1,1,1", "--vs", "fvcore", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["ours"], data["theirs"], data["unit"]) == (2, 1, "macs")
    assert [(i["op"], i["ours"], i["theirs"], i["reason"]) for i in data["items"]] == [
        ("aten.convolution", 2, 1, "MACs vs FLOPs")
    ]


def test_a_bad_peer_name_is_one_line_listing_the_accepted_ones(project: Path) -> None:
    result = flopbudget(project, "explain", "tiny", "--vs", "flopcounter")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "flopbudget: error: --vs flopcounter: not a peer; accepted: fvcore, ptflops, thop, calflops, torch, "
        "deepspeed, xla, tf-profiler"
    )


def _torch_version() -> str:
    from importlib import metadata

    return metadata.version("torch")
