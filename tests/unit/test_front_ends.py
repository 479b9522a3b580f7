"""The front ends as outputs name them (pytest_flopbudget/_front_ends.py)."""

from __future__ import annotations

from pytest_flopbudget._front_ends import ANY_UPDATE_HINT, CLI, PYTEST


def test_each_front_end_names_its_own_update_command() -> None:
    assert CLI.update_hint == "`flopbudget check --update`" and not CLI.shows_failures
    assert PYTEST.update_hint == "`pytest --flopbudget-update`" and PYTEST.shows_failures
    assert ANY_UPDATE_HINT == "`flopbudget check --update` or `pytest --flopbudget-update`"
