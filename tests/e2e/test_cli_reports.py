"""`flopbudget check --report` and `--base-ref` as a CI job runs them: a real subprocess in a real git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import MODELS, git
from e2e_helpers import flopbudget as flopbudget_command

pytest.importorskip("torch")


def pyproject(macs: int) -> str:
    return f'[tool.flopbudget.models.small]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = {macs}\n'


def flopbudget(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return flopbudget_command(cwd, "check", *args, **env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(pyproject(16))  # 8*2 = 16 MACs: exactly at the budget
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "-c", "user.email=t@e", "-c", "user.name=t", "add", ".")
    git(tmp_path, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "budget")
    return tmp_path


def test_base_ref_warns_about_a_raised_budget_and_reports_are_written(project: Path) -> None:
    (project / "pyproject.toml").write_text(pyproject(32))
    summary = project / "summary.md"
    result = flopbudget(
        project,
        "--base-ref",
        "HEAD",
        "--report",
        "gitlab:gl.json",
        "--report",
        "json:all.json",
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(project),
        GITHUB_STEP_SUMMARY=str(summary),
    )
    assert result.returncode == 0, result.stderr
    assert "small" in result.stdout and "raised" in result.stdout.lower()
    warnings = [line for line in result.stdout.splitlines() if line.startswith("::warning ")]
    assert any("file=pyproject.toml" in line and "small" in line for line in warnings)
    assert json.loads((project / "gl.json").read_text()) != []
    assert json.loads((project / "all.json").read_text())["passed"] is True
    assert "small" in summary.read_text()


def test_overrun_is_an_error_annotation_and_exit_1(project: Path) -> None:
    (project / "pyproject.toml").write_text(pyproject(15))
    result = flopbudget(project, "--report", "github", GITHUB_WORKSPACE=str(project))
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1 and errors[0].startswith("::error file=pyproject.toml,line=4,")


def test_bad_report_spec_and_unknown_ref_exit_2_in_one_line(project: Path) -> None:
    bad_spec = flopbudget(project, "--report", "xml:out.xml")
    unknown_ref = flopbudget(project, "--base-ref", "no-such-ref")
    for result in (bad_spec, unknown_ref):
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr
    assert "xml:out.xml" in bad_spec.stderr and "no-such-ref" in unknown_ref.stderr
