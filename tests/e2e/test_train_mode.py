"""A marker test that shares a pyproject model's name and forgets `.eval()` is told so, and its train-mode count
(batch-norm statistics) neither passes as the model nor replaces the shared baseline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import clean_env

pytest.importorskip("torch")

MODELS = """\
from torch import nn

def bn():
    return nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4))
"""

PYPROJECT = '[tool.flopbudget.models.bn]\ntarget = "models:bn"\ninputs = [[1, 3, 4, 4]]\nflops = "10k"\n'

TESTS = """\
import pytest
import torch
from models import bn

@pytest.mark.flop_budget(name="bn")
def test_forgot_eval(flopbudget):
    flopbudget.count(bn(), torch.zeros(1, 3, 4, 4))

@pytest.mark.flop_budget(name="bn")
def test_in_eval(flopbudget):
    flopbudget.count(bn().eval(), torch.zeros(1, 3, 4, 4))
"""


def test_a_train_mode_count_of_a_shared_model_fails_and_is_not_recorded(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "test_bn.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA",
         "--flopbudget-update", "test_bn.py", "pyproject.toml"],
        cwd=tmp_path, env=clean_env(COLUMNS="400"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "FAILED test_bn.py::test_forgot_eval - test_forgot_eval (bn): the model was counted in train mode" in (
        done.stdout
    )
    assert "PASSED test_bn.py::test_in_eval" in done.stdout
    baseline = (tmp_path / ".flopbudget" / "bn.json").read_text()
    assert '"train_mode"' not in baseline  # the shared baseline is the eval-mode count
