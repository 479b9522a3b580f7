"""What the plugin keeps on pytest's objects: the session's state on the config, each test's on its item.

pytest's stash instead of attributes, so nothing of ours collides with another plugin's, and in one module so the
fixture, the hooks and the items find the same keys without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.pyproject import Settings
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._report import Report
from pytest_flopbudget._run import Run
from pytest_flopbudget._shard import Shard


class SessionState(Protocol):
    """What the items, the fixture and the xdist transport ask of the session (`session.FlopBudgetSession`),
    named here so that they need not import the module that imports them."""

    config: pytest.Config
    settings: Settings
    store: BaselineStore
    run: Run
    owners: set[str]
    deselected: int
    lost_worker: bool
    #: `--flopbudget-shard`: the plan this shard (or, under xdist, any worker) computed at collection.
    shard: Shard | None

    def run_model(self, item: Any) -> None: ...

    def narrowed(self, session: pytest.Session) -> str: ...


@dataclass
class ItemState:
    """What one test counts and is held to; `budget` is None when the test has no marker."""

    name: str
    origin: Location
    budget: Budget | None = None
    report: Report | None = None
    #: The formula of a curve count (`flopbudget.count_curve`), None for a point count.
    formula: Formula | None = None


SESSION: pytest.StashKey[SessionState] = pytest.StashKey()
ITEM = pytest.StashKey[ItemState]()
