"""Warn-then-fail end to end: a model that grows 5% with warn-increase 1% and max-increase 10% passes with a warning
in the terminal and a `::warning` annotation, from pytest (pyproject and marker) and from `flopbudget check`."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import flopbudget, inner_pytest

pytest.importorskip("torch")


def models(width: int) -> str:
    return f"from torch import nn\n\n\ndef grows():\n    return nn.Linear({width}, 1)\n"


def pyproject(width: int, warn: str = "1%", most: str = "10%") -> str:
    return (
        f'[tool.flopbudget.models.grows]\ntarget = "models:grows"\ninputs = [[1, {width}]]\n'
        f'max-increase = "{most}"\nwarn-increase = "{warn}"\n'
    )


MARKED = """\
import pytest
import torch
from models import grows


@pytest.mark.flop_budget(max_increase="10%", warn_increase="1%")
def test_marked(flopbudget):
    model = grows()
    flopbudget.count(model, torch.zeros(1, model.in_features))
"""

WARNING = "more than warn-increase 1%"


def grow(path: Path, width: int) -> None:
    (path / "models.py").write_text(models(width))
    (path / "pyproject.toml").write_text(pyproject(width))


def test_pytest_warns_without_failing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    run = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)
    pytester.makepyfile(test_marked=MARKED)
    grow(pytester.path, 100)
    run("--flopbudget-update").assert_outcomes(passed=2)
    grow(pytester.path, 105)  # +5% MACs, params and FLOPs
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    result = run("--flopbudget-report=github")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    text = result.stdout.str()
    assert f"grows: warning: 105 MACs is +5.0% over baseline 100 MACs, {WARNING}" in text
    warnings = [line for line in result.outlines if line.startswith("::warning ")]
    assert len(warnings) == 2, warnings  # the pyproject model and the marked test, one annotation each
    assert any(line.startswith("::warning file=pyproject.toml,line=5,") for line in warnings)
    assert all("grew more than warn-increase" in line and "1%25" in line for line in warnings)
    assert not [line for line in result.outlines if line.startswith("::error")]


def test_cli_warns_without_failing_and_fails_over_max_increase(tmp_path: Path) -> None:
    grow(tmp_path, 100)
    assert flopbudget(tmp_path, "check", "--update").returncode == 0
    grow(tmp_path, 105)
    result = flopbudget(tmp_path, "check", "--report", "github", GITHUB_WORKSPACE=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert WARNING in result.stdout + result.stderr
    (warning,) = [line for line in result.stdout.splitlines() if line.startswith("::warning ")]
    assert warning.startswith("::warning file=pyproject.toml,line=5,title=flopbudget%3A grows ")
    (tmp_path / "models.py").write_text(models(120))  # +20%: over max-increase
    (tmp_path / "pyproject.toml").write_text(pyproject(120))
    failed = flopbudget(tmp_path, "check", "--report", "github", GITHUB_WORKSPACE=str(tmp_path))
    assert failed.returncode == 1
    assert [line for line in failed.stdout.splitlines() if line.startswith("::error ")]
    assert WARNING not in failed.stdout + failed.stderr  # the failure already says it grew


def test_warn_increase_above_max_increase_is_a_one_line_config_error(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(models(100))
    (tmp_path / "pyproject.toml").write_text(pyproject(100, warn="20%"))
    result = flopbudget(tmp_path, "check")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "warn-increase" in line]
    assert line.startswith("flopbudget: error: pyproject.toml:5: tool.flopbudget.models.grows.warn-increase: ")
    assert line.endswith(
        "warn-increase 20% is larger than max-increase 10%: it would never warn; set it below max-increase"
    )
