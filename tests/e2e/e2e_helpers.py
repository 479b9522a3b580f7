"""Machinery every end-to-end test shares (a module, not a conftest: `from conftest import` is ambiguous when
several test folders have a conftest.py): inner pytest runs, the `flopbudget` command, git, a tiny model.

Inner runs (pytester, subprocesses) must behave as a user's run would, whatever the outer suite is doing: they
must not inherit this run's xdist worker identity or its CI variables, and they use a wide terminal so that
messages are not cut.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

#: The smallest torch model project: `models:small` is nn.Linear(8, 2) (16 MACs on one row), `models:wide`
#: nn.Linear(8, 64) (512 MACs).
MODELS = """\
from torch import nn

def small():
    return nn.Linear(8, 2)

def wide():
    return nn.Linear(8, 64)
"""

XDIST_IDENTITY = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
CI_PREFIXES = ("GITHUB_", "GITLAB_", "CI_")

RunPytest = Callable[..., pytest.RunResult]


def forget_outer_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this suite runs under xdist, inner runs must not inherit the outer worker's identity."""
    for name in XDIST_IDENTITY:
        monkeypatch.delenv(name, raising=False)


def inner_pytest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str, *, subprocess_run: bool = False
) -> RunPytest:
    """`run(*args)`: pytest in the pytester directory, serially (`mode="serial"`) or with `-n 2` (`"xdist"`)."""
    monkeypatch.setenv("COLUMNS", "400")
    forget_outer_xdist(monkeypatch)
    extra = ["-n", "2"] if mode == "xdist" else []
    # hypothesis's plugin re-imports hypothesis in every in-process run (seconds each): not needed here
    base = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", *extra]

    def run_pytest(*args: str) -> pytest.RunResult:
        if subprocess_run:
            return pytester.runpytest_subprocess(*base, *args)
        return pytester.runpytest("-rA", *base, *args)

    return run_pytest


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without CI variables, pytest's or pre-commit's, plus `overrides`."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith((*CI_PREFIXES, "PYTEST_", "PRE_COMMIT")) and k != "CI"
    }
    env.update(overrides)
    return env


def flopbudget(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m pytest_flopbudget ARGS` in `cwd`, with a clean environment plus `env`."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", *args],
        cwd=cwd, capture_output=True, text=True, env=clean_env(**env), check=False, timeout=300,
    )  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` (fails the test on error) and return its output."""
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def init_repo(cwd: Path) -> None:
    git(cwd, "init", "-q", "-b", "main")
    git(cwd, "config", "user.email", "t@example.com")
    git(cwd, "config", "user.name", "t")
