"""A missing baseline is never silent (and fails where baselines are required); stale baselines are reported by a
pytest run that saw every test, and an update that sees every model removes them. Through `flopbudget check` and
pytest (tests/e2e/test_stale_baselines.py: which runs can judge them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import MODELS, clean_env, flopbudget

pytest.importorskip("torch")

PYPROJECT = '[tool.flopbudget.models.small]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = "1k"\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def pytest_in(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA", *args],
        cwd=root, env=clean_env(**env), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_missing_baseline_is_a_warning_locally(project: Path) -> None:
    done = flopbudget(project, "check", "--report", "json:r.json")
    assert done.returncode == 0
    assert "small: warning: no baseline (.flopbudget/small.json): run `flopbudget check --update`" in done.stdout
    (model,) = json.loads((project / "r.json").read_text())["models"]
    assert [f["kind"] for f in model["findings"]] == ["no baseline"]


def test_a_missing_baseline_fails_in_ci_and_when_required(project: Path) -> None:
    done = flopbudget(project, "check", CI="true")
    assert done.returncode == 1 and "small: no baseline (.flopbudget/small.json)" in done.stdout
    assert flopbudget(project, "check", "--no-require-baseline", CI="true").returncode == 0
    (project / "pyproject.toml").write_text("[tool.flopbudget]\nrequire-baseline = true\n\n" + PYPROJECT)
    assert flopbudget(project, "check").returncode == 1
    via_pytest = pytest_in(project, "pyproject.toml")
    assert via_pytest.returncode == 1 and "FAILED pyproject.toml::small - small: no baseline" in via_pytest.stdout
    assert flopbudget(project, "check", "--update").returncode == 0
    assert flopbudget(project, "check").returncode == 0


def test_pytest_requires_baselines_in_ci(project: Path) -> None:
    assert pytest_in(project, "pyproject.toml").returncode == 0
    assert pytest_in(project, "pyproject.toml", CI="true").returncode == 1
    assert pytest_in(project, "pyproject.toml", "--flopbudget-require-baseline").returncode == 1


def test_stale_baselines_are_reported_and_a_whole_pytest_update_removes_them(project: Path) -> None:
    assert flopbudget(project, "check", "--update").returncode == 0
    stale = project / ".flopbudget" / "renamed_away.json"
    stale.write_text((project / ".flopbudget" / "small.json").read_text())
    # the CLI cannot see marker tests, so it judges no file it does not use: not on every commit, not on update
    for args in (("check",), ("check", "--update")):
        done = flopbudget(project, *args)
        assert done.returncode == 0 and "stale baseline" not in done.stdout + done.stderr and stale.exists()
    # a pytest run of a part of the suite says nothing about the rest
    partial = pytest_in(project, "--flopbudget-update", "pyproject.toml")
    assert stale.exists() and "stale baseline" not in partial.stdout
    seen = pytest_in(project)
    assert "1 stale baseline in .flopbudget (no model of this run uses them): renamed_away.json" in seen.stdout
    whole = pytest_in(project, "--flopbudget-update")
    assert whole.returncode == 0, whole.stdout[-2000:]
    assert not stale.exists() and "1 stale removed" in whole.stdout
