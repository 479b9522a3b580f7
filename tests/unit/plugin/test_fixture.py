"""The `flopbudget` fixture (pytest_flopbudget/_plugin/fixture.py): its model's name, budget and baseline."""

from __future__ import annotations

import pytest

TESTS = """\
import pytest


def test_plain(flopbudget):
    assert flopbudget.name == "test_fix.test_plain"
    assert flopbudget.budget is None and flopbudget.report is None and flopbudget.baseline is None


@pytest.mark.flop_budget(params="10", name="shared")
def test_named(flopbudget):
    assert flopbudget.name == "shared" and flopbudget.budget.limit("params").value == 10
    assert flopbudget.baseline is None
"""


def test_the_fixture_knows_its_test_before_counting(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.flopbudget]\n")
    pytester.makepyfile(test_fix=TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    # test_named never counts: that is its failure; the fixture itself answered
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*flop_budget is set but the test never called flopbudget.count*"])
