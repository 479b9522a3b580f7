"""The front ends as outputs name them (pytest_flopbudget/_front_ends.py)."""

from __future__ import annotations

from pytest_flopbudget._front_ends import ANY_UPDATE_HINT, CLI, EITHER, PYTEST


def test_each_front_end_names_its_own_update_command() -> None:
    assert CLI.update_hint == "`flopbudget check --update`" and not CLI.shows_failures
    assert PYTEST.update_hint == "`pytest --flopbudget-update`" and PYTEST.shows_failures
    assert ANY_UPDATE_HINT == "`flopbudget check --update` or `pytest --flopbudget-update`"


def test_outputs_read_outside_either_front_end_name_both_commands() -> None:
    assert EITHER.update_hint == ANY_UPDATE_HINT and not EITHER.shows_failures
    assert EITHER not in (CLI, PYTEST)
