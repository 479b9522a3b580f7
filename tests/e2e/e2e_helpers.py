"""Machinery every end-to-end test shares (a module, not a conftest: `from conftest import` is ambiguous when
several test folders have a conftest.py): inner pytest runs, the `flopbudget` command, git, a tiny model.

Inner runs (pytester, subprocesses) must behave as a user's run would, whatever the outer suite is doing: they
must not inherit this run's xdist worker identity or its CI variables, and they use a wide terminal so that
messages are not cut.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
        k: v for k, v in os.environ.items() if not k.startswith((*CI_PREFIXES, "PYTEST_", "PRE_COMMIT")) and k != "CI"
    }
    env.update(overrides)
    return env


def pytest_in(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m pytest ARGS` in `cwd` as a user's project would run it (no cache, no hypothesis plugin), with a
    clean environment plus `env`: for the few tests that need a real process rather than pytester's."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args],
        cwd=cwd, capture_output=True, text=True, env=clean_env(**env), check=False, timeout=300,
    )  # fmt: skip


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


class ProjectTemplate:
    """A project built once, by the first test that asks for it, and copied afresh for every test.

    Building a project often runs `flopbudget check --update` (a process that imports torch and counts) or makes
    git commits; the result depends only on the files written, so every test of a module can start from a copy
    of the same one. It is built inside the first test (not at module set-up) so that it sees the test's
    environment, as a per-test build did: no CI variables, no count cache. `__pycache__` is not copied.
    """

    def __init__(self, where: Path, build: Callable[[Path], None]) -> None:
        self._where = where
        self._build = build
        self._built = False

    def copy_to(self, dest: Path) -> Path:
        if not self._built:
            self._where.mkdir(parents=True, exist_ok=True)
            self._build(self._where)
            self._built = True
        shutil.copytree(self._where, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        return dest


def init_repo(cwd: Path) -> None:
    git(cwd, "init", "-q", "-b", "main")
    git(cwd, "config", "user.email", "t@example.com")
    git(cwd, "config", "user.name", "t")


#: This repository's composite action; `run_action_step` runs its `run:` steps as GitHub would.
ACTION = Path(__file__).resolve().parents[2] / "action.yml"
_INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")
_TOKEN = re.compile(r"\$\{\{\s*github\.token\s*\}\}")
_STEP_OUTPUT = re.compile(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}")


def action_step(name: str) -> dict[str, Any]:
    """The step of action.yml whose name starts with `name`."""
    import yaml

    steps = yaml.safe_load(ACTION.read_text(encoding="utf-8"))["runs"]["steps"]
    return next(step for step in steps if step["name"].startswith(name))


def run_action_step(
    name: str,
    cwd: Path,
    inputs: dict[str, str] | None = None,
    *,
    event: str = "pull_request",
    base_branch: str = "main",
    path: Sequence[Path] = (),
    steps: Mapping[str, Mapping[str, str]] | None = None,
    token: str = "",
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run the `run:` script of the action step `name` in `cwd` with bash, as a GitHub runner would.

    The step's `env:` gets its `${{ inputs.* }}` from `inputs` or the action's defaults, `${{ github.token }}`
    as `token` (empty by default: a test passes GITHUB_TOKEN=... itself, or the job's token as `token` to see
    which steps the action hands it to), and `${{ steps.ID.outputs.NAME }}` from `steps` (the outputs of
    earlier steps by id, as `step_outputs` reads them or a test gives them for a `uses:` step this runner cannot
    run; empty when not given, as on GitHub for a step that was skipped; the id must be one of action.yml's).
    Any other expression fails the test: the script would see something this runner does not provide. And the
    variables GitHub sets: GITHUB_ACTIONS, CI, GITHUB_EVENT_NAME, GITHUB_BASE_REF (pull requests only),
    GITHUB_WORKSPACE, GITHUB_ACTION_PATH (this repository), GITHUB_STEP_SUMMARY (`cwd/../step-summary.md`),
    GITHUB_OUTPUT (`cwd/../step-output.txt`, emptied first: `step_outputs` reads it) and RUNNER_TEMP
    (`cwd/../runner-temp`). `path` is put in front of PATH, after this Python's own bin directory: tests put
    stand-ins for `python` or `flopbudget` there.
    """
    import yaml

    step = action_step(name)
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    defaults = {key: str(spec.get("default", "")) for key, spec in action["inputs"].items()}
    values = {**defaults, **(inputs or {})}
    ids = {other["id"] for other in action["runs"]["steps"] if "id" in other}

    def step_output(match: re.Match[str]) -> str:
        assert match.group(1) in ids, f"action.yml step {name!r}: no step has the id {match.group(1)!r}"
        return (steps or {}).get(match.group(1), {}).get(match.group(2), "")

    def expand(text: str) -> str:
        expanded = _INPUT.sub(lambda m: values[m.group(1)], str(text))
        expanded = _TOKEN.sub(token, expanded)  # the job's token, where a step's env: asks for it
        expanded = _STEP_OUTPUT.sub(step_output, expanded)
        assert "${{" not in expanded, f"action.yml step {name!r}: an expression this test cannot provide: {text}"
        return expanded

    summary = cwd.parent / "step-summary.md"
    summary.touch()
    outputs = cwd.parent / "step-output.txt"
    outputs.write_text("", encoding="utf-8")
    runner_temp = cwd.parent / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    github = {
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_EVENT_NAME": event, "GITHUB_WORKSPACE": str(cwd),
        "GITHUB_ACTION_PATH": str(ACTION.parent), "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs), "RUNNER_TEMP": str(runner_temp),
        "PATH": os.pathsep.join([*(str(p) for p in path), str(Path(sys.executable).parent), os.environ["PATH"]]),
    }  # fmt: skip
    if event == "pull_request":
        github["GITHUB_BASE_REF"] = base_branch
    step_env = {key: expand(value) for key, value in step.get("env", {}).items()}
    workdir = cwd / expand(step.get("working-directory", "."))
    script = cwd.parent / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    assert step["shell"] == "bash"
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=workdir, capture_output=True, text=True, env=clean_env(**{**github, **step_env, **env}), timeout=300,
    )  # fmt: skip


def step_outputs(cwd: Path) -> dict[str, str]:
    """The outputs the last `run_action_step` in `cwd` set (`NAME=value` lines of GITHUB_OUTPUT)."""
    outputs: dict[str, str] = {}
    for line in (cwd.parent / "step-output.txt").read_text(encoding="utf-8").splitlines():
        key, equals, value = line.partition("=")
        assert equals and "<<" not in key, f"an output line this runner cannot read: {line!r}"
        outputs[key] = value
    return outputs
