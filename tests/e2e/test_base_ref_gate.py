"""The pull-request gate: `--base-ref` compares with the base's baselines, so a change that rewrites its own
baseline (or raises its budget with it) cannot hide its growth. Real temporary git repositories with branches,
through `flopbudget check` and pytest (serial and `-n 2`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import ProjectTemplate, clean_env, git, init_repo

pytest.importorskip("torch")

MODELS = """\
from torch import nn

WIDTH = {width}

def net():
    return nn.Sequential(nn.Linear(8, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 2))
"""

PYPROJECT = """\
[tool.flopbudget.models.net]
target = "models:net"
inputs = [[1, 8]]
macs = "{macs}"
max-increase = "5%"
"""


def flopbudget(repo: Path, *args: str, github: bool = False) -> subprocess.CompletedProcess[str]:
    env = clean_env(**_github_env(repo) if github else {})
    return subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", *args], cwd=repo, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def pytest_run(repo: Path, *args: str, github: bool = False) -> subprocess.CompletedProcess[str]:
    env = clean_env(**_github_env(repo) if github else {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA",
         "pyproject.toml", *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _github_env(repo: Path) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(repo), "GITHUB_STEP_SUMMARY": str(repo / "step.md")}


def build_repo(root: Path) -> None:
    """main: the net at width 16 (160 MACs) with its committed baseline; branch `grow`: width 24 (240 MACs,
    +50%), its baseline rewritten with `flopbudget check --update` and committed, as the docs used to suggest."""
    init_repo(root)
    (root / "models.py").write_text(MODELS.format(width=16))
    (root / "pyproject.toml").write_text(PYPROJECT.format(macs="1k"))
    assert flopbudget(root, "--update").returncode == 0
    git(root, "add", "-A")
    git(root, "commit", "-qm", "net at width 16")
    git(root, "checkout", "-qb", "grow")
    (root / "models.py").write_text(MODELS.format(width=24))
    assert flopbudget(root, "--update").returncode == 0
    git(root, "commit", "-qam", "wider net, baseline updated")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> ProjectTemplate:
    return ProjectTemplate(tmp_path_factory.mktemp("base-ref-template"), build_repo)


@pytest.fixture
def repo(template: ProjectTemplate, tmp_path: Path) -> Path:
    return template.copy_to(tmp_path / "repo")


def test_without_base_ref_the_rewritten_baseline_passes(repo: Path) -> None:
    # the behaviour without --base-ref is unchanged: this is the hole --base-ref closes
    assert flopbudget(repo).returncode == 0


def test_cli_fails_on_growth_over_the_base_baseline(repo: Path) -> None:
    done = flopbudget(repo, "--base-ref", "main", "--report", "json:r.json", github=True)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "net" in errors[0] and "+50.0%25 over baseline" in errors[0]
    assert "more than max-increase 5%25" in errors[0]
    warnings = [line for line in done.stdout.splitlines() if line.startswith("::warning")]
    assert any("baseline .flopbudget/net.json changed since main" in w for w in warnings)
    summary = (repo / "step.md").read_text()
    assert "MACs per layer, against main:.flopbudget/net.json:" in summary  # the diff is against the base's
    assert "| ❌ |  | MACs | 1.00k | 160 | 240 | +80 (+50.0%) | ██░░░░░░░░ 24.0% |" in summary
    results = json.loads((repo / "r.json").read_text())
    (model,) = results["models"]
    assert model["metrics"]["macs"]["baseline"] == 160 and model["metrics"]["macs"]["now"] == 240


def test_raising_the_budget_with_the_baseline_still_shows_the_growth(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(PYPROJECT.format(macs="2k"))
    git(repo, "commit", "-qam", "raise the budget too")
    done = flopbudget(repo, "--base-ref", "main", github=True)
    assert done.returncode == 1
    assert "net: macs budget raised from 1k to 2k (+100.0%) since main" in done.stdout
    summary = (repo / "step.md").read_text()
    assert "| ❌ |  | MACs | 2.00k | 160 | 240 | +80 (+50.0%) | █░░░░░░░░░ 12.0% |" in summary


@pytest.mark.parametrize("workers", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_pytest_fails_on_growth_over_the_base_baseline(repo: Path, workers: list[str]) -> None:
    done = pytest_run(repo, "--flopbudget-base-ref=main", *workers, github=True)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "FAILED pyproject.toml::net" in done.stdout
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "+50.0%25 over baseline" in errors[0]
    assert "main:.flopbudget/net.json" in (repo / "step.md").read_text()


def test_a_bad_base_ref_is_one_line(repo: Path) -> None:
    done = flopbudget(repo, "--base-ref", "no-such-branch")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no-such-branch" in done.stderr
    via_pytest = pytest_run(repo, "--flopbudget-base-ref=no-such-branch")
    assert via_pytest.returncode == 4 and "no-such-branch" in via_pytest.stderr
    assert "Traceback" not in via_pytest.stdout + via_pytest.stderr


def test_a_new_model_and_a_deleted_baseline_are_flagged(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        PYPROJECT.format(macs="1k") + '\n[tool.flopbudget.models.extra]\ntarget = "models:net"\ninputs = [[2, 8]]\n'
        'macs = "1k"\n'
    )
    os.remove(repo / ".flopbudget" / "net.json")
    done = flopbudget(repo, "--base-ref", "main")
    out = done.stdout
    assert "net: baseline main:.flopbudget/net.json deleted since main" in out
    assert "extra: new since main" in out
