"""Budgets per phase end to end: a budget on the mean decode step fails `flopbudget check` and pytest when a change
makes every generated token costlier while the prefill stays within its budget, and the reason names the phase."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from e2e_helpers import flopbudget, git, init_repo, pytest_in

pytest.importorskip("transformers")

MODELS = """\
import torch
import transformers

FFN = {ffn}


def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=FFN, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(config)
"""

PYPROJECT = """\
[tool.flopbudget.models.chat]
target = "models:llama"
inputs = [{{ shape = [1, 64], dtype = "int64" }}]
generate = 6
phases = {{ prefill = {{ flops = {prefill} }}, decode-mean = {{ flops = {decode} }} }}
"""


def figures(ffn: int) -> tuple[int, Fraction]:
    """The prefill's FLOPs and the mean decode step's, counted here as the check will."""
    import torch
    import transformers

    from pytest_flopbudget._counting.torch.backend import count_torch
    from pytest_flopbudget._counting.torch.generation import Generation

    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=ffn, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, attn_implementation="eager",
    )  # fmt: skip
    with torch.no_grad():
        report = count_torch(
            transformers.LlamaForCausalLM(config).eval(),
            (torch.zeros(1, 64, dtype=torch.int64),),
            {},
            generation=Generation(6),
        )
    steps = report.phases[1:]
    return report.phases[0].flops, Fraction(sum(step.flops for step in steps), len(steps))


@pytest.fixture(scope="module")
def budgets() -> tuple[int, int]:
    """A prefill budget both versions meet and a decode-mean budget only the smaller FFN meets."""
    small_prefill, small_decode = figures(48)
    large_prefill, large_decode = figures(96)
    assert large_decode > small_decode and large_prefill > small_prefill
    return large_prefill, int(small_decode) + 1


def project(tmp_path: Path, ffn: int, budgets: tuple[int, int]) -> Path:
    (tmp_path / "models.py").write_text(MODELS.format(ffn=ffn))
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(prefill=budgets[0], decode=budgets[1]))
    return tmp_path


def test_check_fails_on_the_mean_decode_step_and_names_it(tmp_path: Path, budgets: tuple[int, int]) -> None:
    passing = flopbudget(project(tmp_path, 48, budgets), "check", "--no-cache")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    failing = flopbudget(project(tmp_path, 96, budgets), "check", "--no-cache")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "chat: decode mean per token: " in failing.stdout
    assert "prefill:" not in failing.stdout  # the prefill stays within its budget


def test_pytest_fails_the_model_item_with_the_same_reason(tmp_path: Path, budgets: tuple[int, int]) -> None:
    project(tmp_path, 96, budgets)
    result = pytest_in(tmp_path, "pyproject.toml", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "decode mean per token: " in result.stdout


def test_a_decode_budget_on_a_count_without_generate_cannot_pass(tmp_path: Path, budgets: tuple[int, int]) -> None:
    project(tmp_path, 48, budgets)
    text = (tmp_path / "pyproject.toml").read_text().replace("generate = 6\n", "")
    (tmp_path / "pyproject.toml").write_text(text)
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "chat: prefill: no such phase in this count" in result.stdout


MARKER_TESTS = """\
import pytest
import torch
import transformers
from torch import nn


def llama():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.flop_budget(phases={"backward": {"flops": "100"}, "forward": {"flops": "1G"}})
def test_training(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.randn(4, 8), training=True)


@pytest.mark.flop_budget(phases={"decode-last": {"macs": "10"}})
def test_generation(flopbudget):
    flopbudget.count(llama(), torch.zeros(1, 8, dtype=torch.int64), generate=4)


@pytest.mark.flop_budget(phases={"decode-last": {"macs": "1G"}, "prefill": {"flops": "1G"}})
def test_generation_within(flopbudget):
    report = flopbudget.count(llama(), torch.zeros(1, 8, dtype=torch.int64), generate=4)
    assert [phase.name for phase in report.phases] == ["prefill", "decode 1", "decode 2", "decode 3"]
"""


def test_the_marker_budgets_training_and_generation_phases(tmp_path: Path) -> None:
    (tmp_path / "test_markers.py").write_text(MARKER_TESTS)
    result = pytest_in(tmp_path, "test_markers.py", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed, 1 passed" in result.stdout
    assert "backward: " in result.stdout and "> budget 100 FLOPs" in result.stdout
    assert "last decode step: " in result.stdout and "> budget 10 MACs" in result.stdout


TRAINING_MODELS = """\
from torch import nn

FROZEN = {frozen}


def net():
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
    model[0].requires_grad_(not FROZEN)  # unfrozen: the backward gains its weight gradient and one input gradient
    return model
"""

TRAINING_PYPROJECT = """\
[tool.flopbudget.models.train_step]
target = "models:net"
inputs = [[4, 32]]
training = true
max-increase = "50%"
phases = { forward = { flops = "1G" }, backward = { flops = "1G" } }
"""


def training_project(tmp_path: Path, *, frozen: bool) -> Path:
    (tmp_path / "models.py").write_text(TRAINING_MODELS.format(frozen=frozen))
    (tmp_path / "pyproject.toml").write_text(TRAINING_PYPROJECT)
    return tmp_path


def test_a_phase_grown_past_max_increase_fails_while_the_total_passes_it(tmp_path: Path) -> None:
    """The backward grows by two thirds, the total by a third: max-increase 50% fails on the backward alone, in
    `flopbudget check` and in pytest, and the details show the phases base vs now."""
    updated = flopbudget(training_project(tmp_path, frozen=True), "check", "--no-cache", "--update")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    failing = flopbudget(training_project(tmp_path, frozen=False), "check", "--no-cache")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "train_step: backward +66.7% > max-increase 50% (41.6 kFLOPs, baseline 25.0 kFLOPs)" in failing.stdout
    assert "more than max-increase" not in failing.stdout  # the total grew 33.3%, within it
    table = failing.stdout.split("FLOPs per phase, against ")[1].splitlines()
    assert table[1].split() == ["phase", "baseline", "now", "delta"]
    assert table[2].split()[:3] == ["forward", "25.3k", "25.3k"] and "(+0.0%)" in table[2]
    assert table[3].split()[:3] == ["backward", "25.0k", "41.6k"] and "(+66.7%)" in table[3]
    assert "backward flops" in failing.stdout  # the budget use column: the phase nearest its ceiling
    diff = flopbudget(tmp_path, "diff", "train_step")
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "MACs per phase, against .flopbudget/train_step.json:" in diff.stdout
    result = pytest_in(tmp_path, "pyproject.toml", COLUMNS="200")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "backward +66.7% > max-increase 50%" in result.stdout
    assert "FLOPs per phase, against " in result.stdout


def test_base_ref_flags_a_raised_phase_ceiling_and_judges_the_phase_against_the_base(tmp_path: Path) -> None:
    """A change that lifts the backward's ceiling and rewrites its own baseline: `--base-ref` says the ceiling was
    raised and still fails the backward's growth over the base's baseline."""
    init_repo(tmp_path)
    assert flopbudget(training_project(tmp_path, frozen=True), "check", "--no-cache", "--update").returncode == 0
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "frozen first layer")
    git(tmp_path, "checkout", "-qb", "unfreeze")
    training_project(tmp_path, frozen=False)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('backward = { flops = "1G" }', 'backward = { flops = "2G" }'))
    assert flopbudget(tmp_path, "check", "--no-cache", "--update").returncode == 0
    git(tmp_path, "commit", "-qam", "unfrozen, baseline and backward ceiling raised")
    result = flopbudget(tmp_path, "check", "--no-cache", "--base-ref", "main")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train_step: backward +66.7% > max-increase 50%" in result.stdout
    assert "train_step: phases.backward.flops budget raised from 1G to 2G (+100.0%) since main" in result.stdout
