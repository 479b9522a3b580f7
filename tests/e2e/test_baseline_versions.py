"""Baselines record the library versions they were counted with: a count that moved while torch moved says so in
the failure's details, `flopbudget diff` and the Markdown summary; versions alone never rewrite a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import MODELS, flopbudget

pytest.importorskip("torch")


def pyproject(target: str) -> str:
    return f'[tool.flopbudget.models.net]\ntarget = "models:{target}"\ninputs = [[1, 8]]\nmacs = 100\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """`net` (16 MACs) with its baseline, whose recorded torch version is then edited to an older one."""
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(pyproject("small"))
    written = flopbudget(tmp_path, "check", "--update")
    assert written.returncode == 0, written.stdout + written.stderr
    return tmp_path


def set_torch_version(project: Path, version: str) -> str:
    """Rewrite the baseline's recorded torch version; returns the version the count recorded."""
    path = project / ".flopbudget" / "net.json"
    data = json.loads(path.read_text())
    counted = data["versions"]["torch"]
    data["versions"]["torch"] = version
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n")
    return counted


def test_a_grown_model_counted_with_another_torch_says_so(project: Path) -> None:
    now = set_torch_version(project, "2.0.0")
    (project / "pyproject.toml").write_text(pyproject("wide"))  # 512 MACs: over the budget of 100
    line = f"note: counted with torch 2.0.0 at the base, {now} now"

    failed = flopbudget(project, "check", "--report", "markdown:summary.md")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert line in failed.stdout.splitlines()
    assert line in (project / "summary.md").read_text().splitlines()

    diffed = flopbudget(project, "diff", "net")
    assert line in diffed.stdout.splitlines(), diffed.stdout + diffed.stderr

    (project / "pyproject.toml").write_text(pyproject("small"))  # back to the baseline's count: nothing to say
    passed = flopbudget(project, "check", "--report", "markdown:same.md")
    assert passed.returncode == 0 and "counted with" not in passed.stdout + (project / "same.md").read_text()


def test_versions_alone_do_not_rewrite_the_baseline_but_a_moved_count_records_them(project: Path) -> None:
    baseline = project / ".flopbudget" / "net.json"
    now = set_torch_version(project, "2.0.0")
    before = baseline.read_bytes()
    same = flopbudget(project, "check", "--update")
    assert same.returncode == 0, same.stdout + same.stderr
    assert baseline.read_bytes() == before

    (project / "pyproject.toml").write_text(pyproject("wide").replace("macs = 100", "macs = 1000"))
    grown = flopbudget(project, "check", "--update")
    assert grown.returncode == 0, grown.stdout + grown.stderr
    assert json.loads(baseline.read_text())["versions"]["torch"] == now
