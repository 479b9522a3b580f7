"""The `flopbudget` fixture: a test counts one model with it; the test's marker is checked when the test ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._plugin.names import default_name, item_location
from pytest_flopbudget._plugin.state import ITEM, SESSION, ItemState
from pytest_flopbudget._report import Report


@pytest.fixture
def flopbudget(request: pytest.FixtureRequest) -> FlopBudgetFixture:
    """Count a model for this test: `flopbudget.count(model, *inputs, **kw)` returns the Report.

    The test's `@pytest.mark.flop_budget(...)` is checked when the test finishes; the count is listed in the
    summary and written as a baseline by `--flopbudget-update`.
    """
    return FlopBudgetFixture(request.node, request.config.stash[SESSION].store)


class FlopBudgetFixture:
    """The `flopbudget` fixture: one count per test, checked against the test's marker when it finishes."""

    def __init__(self, item: pytest.Item, store: BaselineStore) -> None:
        self._item = item
        self._store = store

    @property
    def name(self) -> str:
        """The model's name: the marker's `name=`, else derived from the test id; it names the baseline file."""
        return self._state.name

    @property
    def budget(self) -> Budget | None:
        return self._state.budget

    @property
    def report(self) -> Report | None:
        return self._state.report

    @property
    def baseline(self) -> Report | None:
        """The saved baseline for this model, if any (raises `BaselineError` for a corrupt file)."""
        return self._store.load(self.name)

    def count(self, model: Any, *inputs: Any, **kwargs: Any) -> Report:
        """`pytest_flopbudget.count(model, *inputs, **kwargs)`, recorded for this test."""
        __tracebackhide__ = True
        state = self._unused_state()
        from pytest_flopbudget._backends import count

        try:
            report = count(model, *inputs, **kwargs)
        except FlopBudgetError as exc:
            raise exc.with_traceback(None) from None
        state.report = report
        return report

    def count_curve(
        self,
        model: Any,
        *shapes: Any,
        dims: Mapping[str, int],
        curve: Mapping[str, Sequence[int]],
        training: bool = False,
        method: str = "forward",
    ) -> Report:
        """Count `model` over a curve (`shapes` as pyproject's `inputs`, e.g. `[1, "seq"]`), as a pyproject model
        with these `dims` and `curve` is counted: the Report at `dims`, and the formula the marker's `max_degree=`
        and `at=` are judged on (docs/curve-budgets.md). One count per test, like `count`."""
        __tracebackhide__ = True
        state = self._unused_state()
        from pytest_flopbudget._plugin.fixture_curve import count_model_curve

        try:
            report, formula = count_model_curve(
                model, shapes, dims=dims, curve=curve, name=state.name, origin=state.origin,
                root=self._item.config.rootpath, training=training, method=method,
            )  # fmt: skip
        except FlopBudgetError as exc:
            raise exc.with_traceback(None) from None
        state.report, state.formula = report, formula
        return report

    def _unused_state(self) -> ItemState:
        """This test's state, refused if a count was recorded already: a test checks one model."""
        __tracebackhide__ = True
        state = self._state
        if state.report is not None:
            raise FlopBudgetError(
                f"flopbudget.count() was already called in {self._item.name}; a test checks one model: "
                f"split it into one test per model or parametrize it"
            )
        return state

    @property
    def _state(self) -> ItemState:
        state = self._item.stash.get(ITEM, None)
        if state is None:
            state = ItemState(default_name(self._item.nodeid), item_location(self._item))
            self._item.stash[ITEM] = state
        return state
