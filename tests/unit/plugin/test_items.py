"""pyproject models as test items (pytest_flopbudget/_plugin/items.py)."""

from __future__ import annotations

import pytest

PYPROJECT = """\
[tool.flopbudget.models.net]
target = "no_such_module_here:net"
inputs = [[1, 8]]
flops = "1k"
"""


def test_every_model_is_an_item_of_pyproject(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    result.stdout.fnmatch_lines(["pyproject.toml::net"])


def test_a_model_that_cannot_be_counted_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*_ flopbudget model net _*", "pyproject.toml:2: tool.flopbudget.models.net.target*"])
    assert "Traceback" not in result.stdout.str()
