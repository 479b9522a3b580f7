"""The package type-checks: mypy (configured in pyproject.toml) runs as part of the suite, so CI runs it too; and it
ships `py.typed`, so the type checkers of projects that use it read its hints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a minute or more of the suite's time: `-m "not slow"` leaves it to the full run
def test_mypy_is_clean(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_package_ships_py_typed() -> None:
    assert (ROOT / "pytest_flopbudget" / "py.typed").is_file()
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["pytest_flopbudget"]
