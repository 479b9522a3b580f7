"""`git.py`: the one place git is run from, and how its complaint is read back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_flopbudget._git import git_said, run_git

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
def test_run_git_runs_in_the_directory_and_returns_text(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = run_git(tmp_path, "rev-parse", "--show-toplevel")
    assert done.returncode == 0
    assert Path(done.stdout.strip()).resolve() == tmp_path.resolve()


@needs_git
def test_a_failing_git_is_a_result_not_an_exception(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    done = run_git(tmp_path, "rev-parse", "HEAD")
    assert done.returncode != 0
    assert "not a git repository" in git_said(done)


def test_no_git_on_path_is_file_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError):
        run_git(tmp_path, "status")


def test_git_said_is_the_first_line_that_says_something() -> None:
    result = subprocess.CompletedProcess(["git"], 128, "", "\n  \nfatal: bad revision 'nope'\nhint: more\n")
    assert git_said(result) == "fatal: bad revision 'nope'"
    assert git_said(subprocess.CompletedProcess(["git"], 1, "", "")) == ""
