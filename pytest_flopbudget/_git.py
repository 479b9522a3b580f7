"""Every git command this tool runs goes through `run_git`: one place that says how git is started (in a given
directory, text decoded as UTF-8 with undecodable bytes replaced, never raising on a failing exit status) and how
its complaint is read back (`git_said`). A leaf: callers turn a failure into their own error."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_git(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`git -C DIRECTORY ARGS...`, its output captured as text; raises `FileNotFoundError` when git is not
    installed or not on PATH."""
    return subprocess.run(
        ["git", "-C", str(directory), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )


def git_said(result: subprocess.CompletedProcess[str]) -> str:
    """git's own first non-blank line on stderr, which often says why it failed; "" when it said nothing."""
    return next((line.strip() for line in result.stderr.splitlines() if line.strip()), "")
