"""Hostile budget values (issue 12) end to end: each is one line naming the key and the value, with the documented
exit code (CLI 2, pytest usage error 4 for pyproject, a failing test for a marker), never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from e2e_helpers import MODELS, clean_env, flopbudget

# one model table per hostile value: every one must be reported, each on its own line
BAD = {
    "arabic": ('flops = "\u0663\u0660k"', "U+0663"),
    "fullwidth": ('params = "\uff13\uff10M"', "U+FF13"),
    "overflow": ('flops = "1e10000000"', "exponent is outside"),
    "slow": ('flops = "1e999999"', "exponent is outside"),
    "reporters": ('flops = "1e400"', "exponent is outside"),
    "above": ('macs = "1e31"', "more than 10^30"),
    "growth": ('flops = "1G"\nmax-increase = "1e999999%"', "exponent is outside"),
    "percent": ('flops = "1G"\nmax-increase = "1000001%"', "more than 1000000%"),
}

MARKER_TESTS = """\
import pytest
from torch import nn


@pytest.mark.flop_budget(10**5000)
def test_huge(flopbudget):
    flopbudget.count(nn.Linear(8, 2), (1, 8))


@pytest.mark.flop_budget(macs="\u0663\u0660k")
def test_arabic(flopbudget):
    flopbudget.count(nn.Linear(8, 2), (1, 8))
"""


def _project(path: Path) -> None:
    (path / "models.py").write_text(MODELS)
    tables = [
        f'[tool.flopbudget.models.{name}]\ntarget = "models:small"\ninputs = [[1, 8]]\n{body}\n'
        for name, (body, _) in BAD.items()
    ]
    (path / "pyproject.toml").write_text("[tool.flopbudget]\n\n" + "\n".join(tables), encoding="utf-8")


def _assert_one_line_each(output: str) -> None:
    assert "Traceback" not in output and "INTERNALERROR" not in output
    for name, (_, hint) in BAD.items():
        lines = [line for line in output.splitlines() if f"tool.flopbudget.models.{name}." in line]
        assert len(lines) == 1, (name, output)
        assert hint in lines[0] and "pyproject.toml:" in lines[0]
        assert len(lines[0]) < 500


def test_cli_reports_every_hostile_value_on_one_line_and_exits_2(tmp_path: Path) -> None:
    _project(tmp_path)
    result = flopbudget(tmp_path, "check")
    assert result.returncode == 2, result.stdout + result.stderr
    _assert_one_line_each(result.stderr)


def test_pytest_reports_every_hostile_value_as_a_usage_error(tmp_path: Path) -> None:
    _project(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"],
        cwd=tmp_path, capture_output=True, text=True, env=clean_env(COLUMNS="400"), check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode == 4, result.stdout + result.stderr
    _assert_one_line_each(result.stdout + result.stderr)


def test_hostile_marker_values_fail_their_test_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "test_markers.py").write_text(MARKER_TESTS, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA",
         "test_markers.py"],
        cwd=tmp_path, capture_output=True, text=True, env=clean_env(COLUMNS="400"), check=False, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "INTERNALERROR" not in output and "Traceback" not in output and "ValueError" not in output
    huge = [line for line in output.splitlines() if "an integer of about 5001 digits is not a budget" in line]
    assert huge and all("more than 10^30" in line and len(line) < 500 for line in huge)
    assert any("flop_budget(macs=...)" in line and "U+0663" in line for line in output.splitlines())
    assert "2 failed" in output or "2 error" in output
