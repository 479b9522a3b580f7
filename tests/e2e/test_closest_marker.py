"""The closest `flop_budget` marker wins: a `pytest.param(..., marks=flop_budget(...))` over the function's own.

pytest lists a function's markers before a parameter's, so its `get_closest_marker` used to hand the function's
budget to every parameter and silently ignore the per-parameter one. Run through pytester, serially and under
xdist (the marker is chosen where the test runs).
"""

from __future__ import annotations

import pytest
from e2e_helpers import inner_pytest

pytest.importorskip("torch")

TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.parametrize(
    "width",
    [
        pytest.param(2, id="default"),
        pytest.param(4, id="tight", marks=pytest.mark.flop_budget(macs="20")),
        pytest.param(64, id="loose", marks=[pytest.mark.slow, pytest.mark.flop_budget(macs="1k")]),
    ],
)
@pytest.mark.flop_budget(macs="100")
def test_linear(flopbudget, width):
    flopbudget.count(nn.Linear(8, width), torch.zeros(1, 8))
"""


@pytest.mark.parametrize("mode", ["serial", pytest.param("xdist", marks=pytest.mark.slow)])
def test_a_parameters_marker_wins_over_the_functions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    pytester.makeini("[pytest]\nmarkers = slow: slow\n")
    pytester.makepyfile(test_budgets=TESTS)
    result = inner_pytest(pytester, monkeypatch, mode)("-rA", "--flopbudget-update")
    assert result.ret == 0, result.stdout.str()
    result = inner_pytest(pytester, monkeypatch, mode)("-rA")
    text = result.stdout.str()
    # default: 8*2 = 16 MACs within the function's 100; tight: 8*4 = 32 MACs over its own 20 (the function's 100
    # would pass it); loose: 8*64 = 512 MACs within its own 1k (the function's 100 would fail it)
    assert "PASSED test_budgets.py::test_linear[default]" in text
    assert "FAILED test_budgets.py::test_linear[tight] - test_linear[tight]: 32 MACs > budget 20 MACs (+60.0%)" in text
    assert "PASSED test_budgets.py::test_linear[loose]" in text
    # the hint points at the parameter's marker (line 10), not at the function's decorator
    assert 'to accept: set macs="32" in the flop_budget marker at test_budgets.py:10; then run' in text
    assert result.ret == 1
