"""What the plugin keeps on pytest's objects: the session's state on the config, each test's on its item.

pytest's stash instead of attributes, so nothing of ours collides with another plugin's, and in one module so the
fixture, the hooks and the items find the same keys without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from pytest_flopbudget.config.budget import Budget
from pytest_flopbudget.config.location import Location
from pytest_flopbudget.report import Report

if TYPE_CHECKING:
    from pytest_flopbudget.plugin.session import FlopBudgetSession


@dataclass
class ItemState:
    """What one test counts and is held to; `budget` is None when the test has no marker."""

    name: str
    origin: Location
    budget: Budget | None = None
    report: Report | None = None


SESSION: pytest.StashKey[FlopBudgetSession] = pytest.StashKey()
ITEM = pytest.StashKey[ItemState]()
