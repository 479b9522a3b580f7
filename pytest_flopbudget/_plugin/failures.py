"""How the plugin fails a test cleanly: one line of reason, the per-layer diff in a report section, no traceback.

A budget overrun is a finding, not a crash in the test's code: pytest's traceback would point into the plugin and
bury the one line that says which model is over which budget.
"""

from __future__ import annotations

import pytest

from pytest_flopbudget._safe_text import safe_text

#: The report section a failure's details (per-layer diff, what to do) go into.
SECTION = "flopbudget per-layer diff"


class Failure(Exception):
    """A clean, traceback-free failure: `reason` is the one-line report, `details` goes into a report section."""

    def __init__(self, reason: str, details: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


def fail(report: pytest.TestReport, text: str, details: str = "") -> None:
    """Turn `report` into a failure that says `text` (and `details` in its own section), every line made inert."""
    report.outcome = "failed"
    report.longrepr = safe_text(text)
    if details:
        report.sections.append((SECTION, safe_text(details)))
