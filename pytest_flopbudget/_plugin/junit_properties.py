"""Each flop-budget test's figures as user properties, which `--junitxml` writes into its `<testcase>`.

What `record_property` does, without the fixture: a pyproject model item and a marker test append
`(name, value)` pairs to `item.user_properties` once judged, and pytest's JUnit XML writes them as `<property>`
elements of that test case (under xdist they travel with the test's reports). A CI system that keeps JUnit XML
(GitLab, Jenkins, Azure Pipelines) then keeps the figures with the test, run after run:
`flopbudget.model`, `flopbudget.verdict` (`pass`, `fail`, or `unchecked` for a model that could not be counted),
and per metric the model measured (`reporters/trend.py` chooses them, as for the other history exports)
`flopbudget.<metric>`, `flopbudget.<metric>.budget` where a ceiling is set and `flopbudget.<metric>.baseline`
where the baseline has a figure.
"""

from __future__ import annotations

import pytest

from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._reporters.trend import figures
from pytest_flopbudget._safe_text import one_line

PREFIX = "flopbudget."


def properties(verdict: Verdict) -> list[tuple[str, object]]:
    """The model's name, its verdict, then each figure with its ceiling and baseline where there are any."""
    found: list[tuple[str, object]] = [
        (f"{PREFIX}model", one_line(verdict.name)),
        (f"{PREFIX}verdict", "pass" if verdict.passed else "fail"),
    ]
    for figure in figures(verdict):
        found.append((f"{PREFIX}{figure.metric}", figure.value))
        if figure.limit is not None:
            found.append((f"{PREFIX}{figure.metric}.budget", figure.limit))
        if figure.baseline is not None:
            found.append((f"{PREFIX}{figure.metric}.baseline", figure.baseline))
    return found


def unchecked_properties(name: str) -> list[tuple[str, object]]:
    """A model that could not be counted: no figure, only that it is unchecked."""
    return [(f"{PREFIX}model", one_line(name)), (f"{PREFIX}verdict", "unchecked")]


def record(item: pytest.Item, found: list[tuple[str, object]]) -> None:
    """Add `found` to the test's user properties (those of an earlier attempt, under a rerun plugin, replaced)."""
    item.user_properties[:] = [pair for pair in item.user_properties if not str(pair[0]).startswith(PREFIX)]
    item.user_properties.extend(found)
