"""Budgets on the curve end to end: `max-degree = { seq = 1 }` fails a GPT-style decoder with softmax attention in
`flopbudget check` and in pytest with a line naming `seq**2` and the attention layers, and passes a linear-attention
decoder; the baseline keeps the formula and the next check names the term that changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget, git, init_repo, inner_pytest

pytest.importorskip("torch")

#: The repository's own GPT-2-style decoder (examples/decoder.py), copied next to the project's models.
DECODER = (Path(__file__).resolve().parents[2] / "examples" / "decoder.py").read_text()

MODELS = """\
import torch
from torch import nn

from decoder import GPT, GPTConfig


def gpt():
    \"\"\"Softmax attention: its QK^T and AV matmuls grow as seq**2.\"\"\"
    return GPT(GPTConfig(vocab=64, n_ctx=512, d_model=WIDTH, n_layers=2, n_heads=2))


class LinearAttention(nn.Module):
    \"\"\"Attention through the d x d state K^T V: linear in the sequence length.\"\"\"

    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(q @ (k.transpose(-2, -1) @ v))


class LinearDecoder(nn.Module):
    def __init__(self, vocab=64, d=32, n=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LinearAttention(d) for _ in range(n))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


def linear():
    return LinearDecoder()
"""

PYPROJECT = """\
[tool.flopbudget]

[tool.flopbudget.models.gpt]
target = "models:gpt"
inputs = [{ shape = [1, "seq"], dtype = "int64" }]
dims = { seq = 128 }
curve = { seq = [16, 512] }
max-degree = { seq = DEGREE }

[tool.flopbudget.models.linear]
target = "models:linear"
inputs = [{ shape = [1, "seq"], dtype = "int64" }]
dims = { seq = 128 }
curve = { seq = [16, 512] }
max-degree = { seq = 1 }
at = [{ seq = 512, flops = "20M" }]
"""

FAILURE = (
    "gpt: FLOPs grow as seq**2 (max-degree seq = 1): seq**2 term 280*seq**2 from h.{0..1}.attn (+1 more: MACs degree)"
)


def project(where: Path, degree: int = 1, width: int = 32) -> Path:
    (where / "decoder.py").write_text(DECODER)
    (where / "models.py").write_text(MODELS.replace("WIDTH", str(width)))
    (where / "pyproject.toml").write_text(PYPROJECT.replace("DEGREE", str(degree)))
    return where


def test_check_fails_softmax_attention_naming_seq_squared_and_the_attention_layers(tmp_path: Path) -> None:
    project(tmp_path)
    for args in (["--no-cache"], ["--cache", "--cache-dir", str(tmp_path / "cache")]):
        result = flopbudget(tmp_path, "check", *args)
        assert result.returncode == 1, result.stdout + result.stderr
        assert FAILURE + "\n" in result.stdout
        row = next(line for line in result.stdout.splitlines() if line.startswith("linear "))
        assert row.split()[1] == "ok"  # linear attention: degree 1 in seq, and 18.9 MFLOPs at seq=512
    # the curve's record holds its formula: a second check answers both models from the cache, with the same verdict
    again = flopbudget(tmp_path, "check", "--cache", "--cache-dir", str(tmp_path / "cache"))
    assert again.stdout == result.stdout and "not cached" not in result.stderr + again.stderr
    assert "2 of 2 models unchanged since their cached count" in again.stderr


def test_pytest_fails_the_pyproject_item_with_the_same_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(pytester.path)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("pyproject.toml")
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    assert f"FAILED pyproject.toml::gpt - {FAILURE}" in result.stdout.str()


def test_the_baseline_keeps_the_formula_and_the_check_names_the_term_that_changed(tmp_path: Path) -> None:
    project(tmp_path, degree=2)
    update = flopbudget(tmp_path, "check", "--no-cache", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    baseline = json.loads((tmp_path / ".flopbudget" / "gpt.json").read_text())
    assert baseline["formula"]["flops"] == "280*seq**2 + 55520*seq"
    assert baseline["curve"]["layers"]["h.0.attn"]["flops"] == "140*seq**2"

    project(tmp_path, degree=2, width=64)  # twice as wide: the attention's seq**2 term doubles
    result = flopbudget(tmp_path, "check", "--no-cache", "--report", "json:results.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gpt: warning: MACs formula changed: seq**2 term of h.{0..1}.attn +100.0%; seq term of" in result.stdout
    assert "gpt: warning: FLOPs formula changed: seq**2 term of h.{0..1}.attn +91.4%; seq term of" in result.stdout
    data = json.loads((tmp_path / "results.json").read_text())
    gpt = next(model for model in data["models"] if model["name"] == "gpt")
    assert gpt["formula"]["formula"]["flops"] == "536*seq**2 + 209344*seq"
    assert gpt["baseline_formula"]["formula"]["flops"] == "280*seq**2 + 55520*seq"
    assert any(f["kind"] == "formula" for f in gpt["findings"])


MARKER_TESTS = """\
import pytest
import torch

from models import gpt, linear

IDS = {"shape": [1, "seq"], "dtype": "int64"}


@pytest.mark.flop_budget(max_degree={"seq": 1})
def test_gpt(flopbudget):
    flopbudget.count_curve(gpt(), IDS, dims={"seq": 128}, curve={"seq": (16, 512)})


@pytest.mark.flop_budget(max_degree={"seq": 1}, at=[{"seq": 512, "flops": "20M"}])
def test_linear(flopbudget):
    flopbudget.count_curve(linear(), IDS, dims={"seq": 128}, curve={"seq": (16, 512)})


@pytest.mark.flop_budget(max_degree={"seq": 1})
def test_point(flopbudget):
    flopbudget.count(linear(), torch.zeros(1, 128, dtype=torch.long))
"""


def test_the_marker_judges_a_curve_counted_by_the_fixture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(pytester.path)
    (pytester.path / "pyproject.toml").write_text("[tool.flopbudget]\ncollect-models = false\n")
    (pytester.path / "test_curves.py").write_text(MARKER_TESTS)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("test_curves.py")
    output = result.stdout.str()
    result.assert_outcomes(passed=1, failed=2)
    assert (
        "FAILED test_curves.py::test_gpt - test_gpt: FLOPs grow as seq**2 (max-degree seq = 1): seq**2 term "
        "280*seq**2 from h.{0..1}.attn" in output
    )
    assert (
        "FAILED test_curves.py::test_point - test_point: max-degree and at are judged on the model's formula" in output
    )


def test_base_ref_compares_the_formula_with_the_base_baseline(tmp_path: Path) -> None:
    project(tmp_path, degree=2)
    assert flopbudget(tmp_path, "check", "--no-cache", "--update").returncode == 0
    init_repo(tmp_path)
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    project(tmp_path, degree=3, width=64)  # wider, and the degree raised: both for the reviewer to see
    assert flopbudget(tmp_path, "check", "--no-cache", "--update").returncode == 0
    result = flopbudget(tmp_path, "check", "--no-cache", "--base-ref", "main")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gpt: warning: MACs formula changed: seq**2 term of h.{0..1}.attn +100.0%" in result.stdout
    assert "gpt: max-degree.seq budget raised from 2 to 3 since main" in result.stdout
