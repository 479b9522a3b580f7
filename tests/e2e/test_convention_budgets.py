"""A budget on a stack's convention (`convention = "megatron-causal"`) end to end under pytest: the pyproject item
passes at the figure under the convention and fails one FLOP below it, naming the convention, in the same words as
`flopbudget check` (tests/unit/cli/test_cli_conventions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import inner_pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a pytest process that imports torch: ~15 s

MODELS = """\
from torch import nn
from torch.nn import functional as F


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.RMSNorm(4)
        self.q, self.k, self.v = nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False)
        self.lm_head = nn.Linear(4, 10, bias=False)

    def forward(self, ids):
        x = self.norm(self.embed(ids))
        q, k, v = (proj(x).unsqueeze(1) for proj in (self.q, self.k, self.v))
        return self.lm_head(x + F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1))


def tiny():
    return Tiny()
"""

PYPROJECT = """\
[tool.flopbudget.models.{name}]
target = "tinylm:tiny"
inputs = [{{ shape = [1, 3], dtype = "int64" }}]
flops = {flops}
convention = "megatron-causal"
"""


def test_the_pyproject_item_is_judged_under_its_convention(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "tinylm.py").write_text(MODELS)
    # exact 792 FLOPs; under megatron-causal 2 x (144 + 120) + 72 = 600 (tests/unit/conventions derives it)
    Path(pytester.path / "pyproject.toml").write_text(
        PYPROJECT.format(name="within", flops=600) + PYPROJECT.format(name="over", flops=599)
    )
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("pyproject.toml")
    result.assert_outcomes(passed=1, failed=1)
    assert "over: 600 FLOPs under the megatron-causal convention > budget 599 FLOPs" in result.stdout.str()
