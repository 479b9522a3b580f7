"""The tree keeps its style: `ruff format --check` and `ruff check` (configured in pyproject.toml) run as part of
the suite, so a change that is not formatted or breaks a lint rule fails here as well as in pre-commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_ruff_is_clean(command: list[str]) -> None:
    pytest.importorskip("ruff")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_no_two_test_files_share_a_name() -> None:
    """The test folders are not packages, so two `test_x.py` files cannot be collected in one run (pytest's
    "import file mismatch"): the whole suite would error where each folder alone passes."""
    names = sorted(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert sorted({name for name in names if names.count(name) > 1}) == []
