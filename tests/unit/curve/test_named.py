"""The public `count_curve(name)`: a pyproject model's formula, found as the CLI finds the project."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget import FlopBudgetError, Formula, count_curve

pytest.importorskip("torch")

PYPROJECT = """
[tool.flopbudget.models.mlp]
target = "mlp_models:mlp"
inputs = [["rows", 5]]
dims = { rows = 4 }
curve = { rows = [1, 64] }
flops = "1M"
"""

MODELS = """
from torch import nn

def mlp():
    return nn.Linear(5, 6, bias=False)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tmp_path / "mlp_models.py").write_text(MODELS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_nearest_pyprojects_model_gives_its_point_count_and_formula(project: Path) -> None:
    report, formula = count_curve("mlp")
    assert isinstance(formula, Formula)
    # 2*M*N*K = 2*4*6*5 = 240 at rows = 4; 2*rows*6*5 = 60*rows as a formula
    assert report.flops == 240
    assert str(formula.total("flops")) == "60*rows"
    assert formula.total("flops").at({"rows": 64}) == 60 * 64


def test_a_named_file_and_a_name_with_spaces(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.parent)
    report, _ = count_curve("  mlp ", pyproject=project / "pyproject.toml")
    assert report.macs == 120  # M*N*K = 4*6*5


def test_a_missing_file_or_model_is_one_line(project: Path) -> None:
    with pytest.raises(FlopBudgetError, match=r"^count_curve\(pyproject='nope.toml'\): no such file$"):
        count_curve("mlp", pyproject="nope.toml")
    with pytest.raises(FlopBudgetError, match=r"count_curve\('mpl'\): no such model in .*\(models: mlp\)$"):
        count_curve("mpl")
