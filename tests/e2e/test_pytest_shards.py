"""`pytest --flopbudget-shard K/N`: each shard runs its part of the budget tests (pyproject items, markers, the
fixture), leaves the other tests alone, and `flopbudget merge` judges the shards' results as the whole session, in
process and under pytest-xdist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import clean_env, inner_pytest

pytest.importorskip("torch")

MODELS = """\
from torch import nn

WIDTH = 8


def small():
    return nn.Linear(8, 2)


def wide():
    return nn.Linear(8, WIDTH * 8)


def deep():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
"""

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = "1k"

[tool.flopbudget.models.wide]
target = "models:wide"
inputs = [[1, 8]]
macs = "600"

[tool.flopbudget.models.deep]
target = "models:deep"
inputs = [[1, 8]]
macs = "1k"
"""

TESTS = """\
import pytest
import torch

import models


@pytest.mark.flop_budget(macs="1k")
def test_small(flopbudget):
    flopbudget.count(models.small(), torch.zeros(1, 8))


@pytest.mark.flop_budget(macs="1k", name="wide")
def test_wide_again(flopbudget):
    flopbudget.count(models.wide(), torch.zeros(1, 8))


def test_deep_unbudgeted(flopbudget):
    flopbudget.count(models.deep(), torch.zeros(1, 8))


def test_plain():
    pass
"""
#: The budget tests: three pyproject items, two marker tests and a fixture test (six); one plain test.
BUDGET_TESTS = sorted(
    ["pyproject.toml::small", "pyproject.toml::wide", "pyproject.toml::deep", "test_budgets.py::test_small",
     "test_budgets.py::test_wide_again", "test_budgets.py::test_deep_unbudgeted"]
)  # fmt: skip


@pytest.fixture
def files(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(models=MODELS, test_budgets=TESTS)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    return pytester


@pytest.fixture
def project(files: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester = files
    run = inner_pytest(pytester, monkeypatch, "serial")
    run("--flopbudget-update", "test_budgets.py", "pyproject.toml").assert_outcomes(passed=7, warnings=1)
    (pytester.path / "models.py").write_text(MODELS.replace("WIDTH = 8", "WIDTH = 10"))  # wide: 640 MACs > 600
    return pytester


def merge(*argv: str) -> int:
    from pytest_flopbudget._cli import main

    return main(["merge", *argv])


@pytest.mark.slow
def test_shards_of_a_session_merge_to_the_whole_session(project: pytest.Pytester, monkeypatch) -> None:
    run = inner_pytest(project, monkeypatch, "serial")
    args = ["test_budgets.py", "pyproject.toml", "-p", "no:randomly"]
    whole = run(*args, "--flopbudget-report=json:whole.json", "--flopbudget-report=markdown:whole.md")
    whole.assert_outcomes(passed=6, failed=1, warnings=1)  # wide: its pyproject ceiling (the marker allows 1k)
    parts = []
    for index in (1, 2):
        shard = run(*args, f"--flopbudget-shard={index}/2", f"--flopbudget-report=json:shard-{index}.json")
        outcomes = shard.parseoutcomes()
        assert outcomes["deselected"] == 6 - len(
            json.loads((project.path / f"shard-{index}.json").read_text())["shard"]["part"]
        )
        parts.append(json.loads((project.path / f"shard-{index}.json").read_text())["shard"])
        shard.stdout.fnmatch_lines(["PASSED test_budgets.py::test_plain"])  # every shard runs the other tests
    assert sorted(nodeid for part in parts for nodeid in part["part"]) == BUDGET_TESTS
    assert sorted(item["nodeid"] for item in parts[0]["plan"]) == BUDGET_TESTS
    assert parts[0]["configuration"]["front end"] == "pytest"
    code = merge("shard-1.json", "shard-2.json", "--report", "json:merged.json", "--report",
                 "markdown:merged.md")  # fmt: skip
    assert code == 1
    assert (project.path / "merged.json").read_text() == (project.path / "whole.json").read_text()
    assert (project.path / "merged.md").read_text() == (project.path / "whole.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--flopbudget-shard=1/2"], "--flopbudget-shard 1/2: the shard's results go nowhere: add "
                                     "--flopbudget-report json:PATH"),
        (["--flopbudget-shard=1/2", "--flopbudget-update", "--flopbudget-report=json:r.json"],
         "--flopbudget-shard with --flopbudget-update: record baselines in one run of every test"),
        (["--flopbudget-shard=2", "--flopbudget-report=json:r.json"], "--flopbudget-shard '2': expected K/N"),
    ],
)  # fmt: skip
def test_a_shard_it_cannot_run_is_a_usage_error(files: pytest.Pytester, monkeypatch, argv, message) -> None:
    result = inner_pytest(files, monkeypatch, "serial")("test_budgets.py", *argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


@pytest.mark.slow
def test_under_xdist_every_worker_plans_alike_and_the_controller_writes_the_plan(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "test_budgets.py").write_text(TESTS)

    def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p",
             "no:randomly", "test_budgets.py", "pyproject.toml", *args],
            cwd=tmp_path, env=clean_env(COLUMNS="400"), capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    assert pytest_run("--flopbudget-update").returncode == 0
    serial = pytest_run("--flopbudget-shard=2/2", "--flopbudget-report=json:serial.json")
    parallel = pytest_run("-n", "2", "--flopbudget-shard=2/2", "--flopbudget-report=json:parallel.json")
    assert serial.returncode == parallel.returncode == 0, parallel.stdout[-2000:]
    assert (tmp_path / "parallel.json").read_text() == (tmp_path / "serial.json").read_text()
    assert json.loads((tmp_path / "parallel.json").read_text())["shard"]["index"] == 2
