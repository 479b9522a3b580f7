"""The hooks every process runs (pytest_flopbudget/_plugin/session.py): configuration errors, what the run saw."""

from __future__ import annotations

import pytest

from pytest_flopbudget._plugin.state import SESSION


class Narrowed:
    """Records why the session did not see the whole suite, as the session judges it at its end."""

    def __init__(self) -> None:
        self.why: str | None = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.why = session.config.stash[SESSION].narrowed(session)


def narrowed(pytester: pytest.Pytester, *args: str) -> str | None:
    pytester.makepyprojecttoml("[tool.flopbudget]\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    probe = Narrowed()
    pytester.inline_run(*args, plugins=[probe])
    return probe.why


def test_a_whole_run_is_not_narrowed(pytester: pytest.Pytester) -> None:
    assert narrowed(pytester) == ""


def test_selection_narrows_the_run(pytester: pytest.Pytester) -> None:
    assert narrowed(pytester, "-k", "not test_b") == "-k, deselected tests"


def test_a_configuration_error_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.flopbudget]\nbaseline-dir = 3\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *baseline-dir*"])


def test_a_bad_report_spec_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.flopbudget]\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess("--flopbudget-report=xml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown report 'xml'*"])
