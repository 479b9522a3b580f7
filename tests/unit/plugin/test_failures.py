"""A clean, traceback-free failure of a test (pytest_flopbudget/_plugin/failures.py)."""

from __future__ import annotations

import pytest

from pytest_flopbudget._plugin.failures import SECTION, Failure, fail


def report() -> pytest.TestReport:
    return pytest.TestReport("t.py::t", ("t.py", 0, "t"), {}, "passed", None, "call")


def test_fail_sets_the_reason_and_the_details_section() -> None:
    failed = report()
    fail(failed, "net: 2 MFLOPs > budget 1 MFLOPs", "the per-layer diff")
    assert failed.failed and failed.longrepr == "net: 2 MFLOPs > budget 1 MFLOPs"
    assert failed.sections == [(SECTION, "the per-layer diff")]


def test_fail_without_details_adds_no_section_and_makes_text_inert() -> None:
    failed = report()
    fail(failed, "net\x1b[31m: over")
    assert "\x1b" not in str(failed.longrepr) and failed.sections == []


def test_failure_carries_reason_and_details() -> None:
    failure = Failure("one line", "more")
    assert (str(failure), failure.reason, failure.details) == ("one line", "one line", "more")
