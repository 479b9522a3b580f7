"""The job summary of `flopbudget check --report markdown:PATH` when a model grows inside its budget: the growth
shows *where* (its per-layer diff, repeated blocks grouped), and the models that did not move are one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from e2e_helpers import MODELS
from e2e_helpers import flopbudget as flopbudget_command

pytest.importorskip("torch")

BLOCKS = """
class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(8, hidden)
        self.down = nn.Linear(hidden, 8)

    def forward(self, x):
        return self.down(self.up(x))


class Stack(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.layers = nn.ModuleList(Block(hidden) for _ in range(4))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def blocks():
    return Stack(HIDDEN)
"""

PYPROJECT = """\
[tool.flopbudget.models.blocks]
target = "models:blocks"
inputs = [[1, 8]]
macs = 10000

[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = 100

[tool.flopbudget.models.wide]
target = "models:wide"
inputs = [[1, 8]]
macs = 1000
"""


def write_models(root: Path, hidden: int) -> None:
    (root / "models.py").write_text(f"{MODELS}\nHIDDEN = {hidden}\n{BLOCKS}")


def check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return flopbudget_command(root, "check", *args)


def test_growth_inside_the_budget_shows_its_grouped_diff_and_unchanged_models_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    write_models(tmp_path, 16)
    created = check(tmp_path, "--update")
    assert created.returncode == 0, created.stderr
    write_models(tmp_path, 20)  # every block widened alike: +25% inside the budget

    result = check(tmp_path, "--report", "markdown:summary.md")

    assert result.returncode == 0, result.stderr
    text = (tmp_path / "summary.md").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("### flopbudget: ✅ 3 models within budget")
    assert "| ✅ | 2 models unchanged: small, wide |  |  |  |  |  |  |" in lines
    assert not any(line.startswith(("| ✅ | small |", "| ✅ | wide |")) for line in lines)
    assert "| ⚠️ |  | MACs | 10.0k | 1.04k | 1.30k | +256 (+24.6%) | █░░░░░░░░░ 13.0% |" in lines  # inside its budget
    # the model that grew, folded, with its change in totals and where it is
    assert "<summary>⚠️ blocks: 2.18 kFLOPs -&gt; 2.71 kFLOPs (+24.2%), 1.04 kMACs -&gt; 1.30 kMACs (+24.6%)" in text
    rows = [line.split() for line in lines]
    assert ["layers.{0..3}.up", "x4", "512", "640", "+128", "(+25.0%)"] in rows  # MACs: the four blocks, one row
    assert not any(row and row[0] == "layers.0.up" for row in rows)
