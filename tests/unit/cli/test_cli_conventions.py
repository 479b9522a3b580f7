"""`--convention NAME` on `flopbudget count` and `check`, `convention = NAME` on a budget, and `flopbudget mfu`, in
process on a tiny hand-derivable decoder (tests/unit/conventions/test_conventions_llm.py derives its figures)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")

from pytest_flopbudget._cli import main

MODELS = """\
import torch
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
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1)
        return self.lm_head(x + attended)


def tiny():
    return Tiny()


def linear():
    return nn.Linear(4, 4)
"""

PYPROJECT = """\
[tool.flopbudget.models.tiny]
target = "{module}:tiny"
inputs = [{{ shape = [1, 3], dtype = "int64" }}]
flops = {flops}
convention = {convention}
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "convention_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    (tmp_path / f"{name}.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_count_prints_the_figure_under_each_convention(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "count", f"{module}:tiny", "--input", "1,3:int64", "--convention", "megatron",
        "--convention", "megatron-causal",
    )  # fmt: skip
    assert code == 0, err
    # 2 x (q, k, v 144 + lm_head 120 + attention 72 MACs) = 672; attention halved: 600 (hand-derived in the unit test)
    assert "under the megatron convention" in out and re.search(r"\n  megatron +672 FLOPs", out)
    assert re.search(r"\n  megatron-causal +600 FLOPs", out)
    assert "causal halving" in out and "outside the convention" in out


def test_count_json_has_each_convention_with_items_summing_to_the_difference(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "count", f"{module}:tiny", "--input", "1,3:int64", "--training", "--convention", "torchtitan",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    titan = data["under_conventions"]["torchtitan"]
    # 6 x 92 parameters (132 less the 40 of the embedding) x 3 tokens + 12·L·H·Q·T x tokens = 1656 + 432
    assert (titan["ours"], titan["theirs"]) == (data["totals"]["flops"], 2088)
    assert sum(item["difference"] for item in titan["items"]) == titan["difference"] == titan["ours"] - 2088
    assert {"ours", "theirs", "reason"} <= set(titan["items"][0]) and titan["source"]
    assert isinstance(data["conventions"]["flops"], str)  # the Report's own key is untouched: it reads back


def test_an_unknown_convention_is_one_line(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", f"{module}:tiny", "--input", "1,3:int64", "--convention", "megatorn")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "unknown convention 'megatorn'; accepted: megatron, megatron-causal" in err


def test_a_budget_judges_the_figure_under_its_convention(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    Path("pyproject.toml").write_text(PYPROJECT.format(module=module, flops=600, convention='"megatron-causal"'))
    code, out, err = run(capsys, "check", "--no-cache")
    assert code == 0, out + err  # exact 792 FLOPs, 600 under megatron-causal: within 600
    Path("pyproject.toml").write_text(PYPROJECT.format(module=module, flops=599, convention='"megatron-causal"'))
    code, out, err = run(capsys, "check", "--no-cache", "--convention", "megatron-causal", "--format", "json")
    assert code == 1
    assert "600 FLOPs under the megatron-causal convention > budget 599 FLOPs" in err
    document = json.loads(out)
    [model] = document["models"] if "models" in document else document["verdicts"]
    assert model["budget"]["convention"] == "megatron-causal"
    assert document["under_conventions"]["tiny"]["megatron-causal"]["theirs"] == 600


def test_a_bad_convention_in_pyproject_is_one_line_naming_file_and_key(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("pyproject.toml").write_text(PYPROJECT.format(module=module, flops=600, convention='"megatorn"'))
    code, _out, err = run(capsys, "check", "--no-cache")
    assert code == 2
    assert err.count("\n") == 1
    assert "pyproject.toml:5: tool.flopbudget.models.tiny.convention: unknown convention 'megatorn'" in err
    assert "expected one of: megatron, megatron-causal, palm, torchtitan, maxtext, vllm" in err


def test_a_convention_that_cannot_price_the_model_fails_it_in_one_line(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("pyproject.toml").write_text(
        f'[tool.flopbudget.models.lin]\ntarget = "{module}:linear"\ninputs = [[2, 4]]\nflops = 1000\n'
        'convention = "palm"\n'
    )
    code, out, err = run(capsys, "check", "--no-cache")
    assert code == 1
    assert "lin: convention = 'palm' cannot be judged: palm: the convention is per token" in out + err


def test_mfu_gives_per_token_formulas_and_the_artifact(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "mfu", f"{module}:tiny", "--input", "1,seq:int64", "--dim", "seq=8..64", "--out", "mfu.json"
    )
    assert code == 0, err
    artifact = json.loads(Path("mfu.json").read_text())
    # per token at T = seq tokens: forward MACs q, k, v 48·seq, lm_head 40·seq, attention 2·4·seq² = 8·seq²
    assert artifact["flops_per_token"]["megatron"] == "48*seq + 528"  # 6 x (88·seq + 8·seq²) / seq
    assert artifact["flops_per_token"]["megatron-causal"] == "24*seq + 528"  # attention halved
    assert artifact["flops_per_token"]["palm"] == "48*seq + 792"  # 6 x 132 + 12·1·1·4·seq
    assert artifact["flops_per_token"]["torchtitan"] == "48*seq + 552"  # 6 x 92 + 12·1·1·4·seq
    assert artifact["tokens"] == "seq"
    # the one-line expression a training loop evaluates each step
    assert eval(artifact["python"]["megatron"], {"seq": 2048}) == 48 * 2048 + 528
    assert "48*seq + 528" in out and "causal halving" in out


def test_mfu_needs_a_range(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "mfu", f"{module}:tiny", "--input", "1,seq:int64", "--dim", "seq=64")
    assert code == 2 and err.count("\n") == 1 and "--dim seq=64..8192" in err
