"""pytest plugin (entry point `pytest11`): placeholder until the budget plugin lands."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "flop_budget(flops=None, *, macs=None, params=None): compute budget")
