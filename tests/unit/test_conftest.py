"""The suite's own settings (tests/conftest.py): nothing in it fails a test for the machine's speed."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_hypothesis_sets_no_wall_clock_limit() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
