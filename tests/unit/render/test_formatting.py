"""The figures every output shares: values with their unit and prefix, pairs printed distinctly, signed percents."""

from __future__ import annotations

import pytest

from pytest_flopbudget._render.formatting import format_pair, format_percent, format_value


def test_close_values_are_printed_distinctly() -> None:
    assert format_pair(8_300_000_001, 8_300_000_000, "flops") == ("8.300000001 GFLOPs", "8.300000000 GFLOPs")
    assert format_pair(5, 5, "flops") == ("5 FLOPs", "5 FLOPs")


@pytest.mark.parametrize(
    ("delta", "base", "text"),
    [(27, 1000, "+2.7%"), (-5, 100, "-5.0%"), (0, 10, "+0.0%"), (1, 10_000, "+0.01%"), (5, 0, "new"), (0, 0, "+0.0%")],
)
def test_format_percent(delta: int, base: int, text: str) -> None:
    assert format_percent(delta, base) == text


def test_format_value_units() -> None:
    assert format_value(25_600_000, "params") == "25.6M params"
    assert format_value(1, "skipped") == "1 skipped op call"
    assert format_value(2_050_000_000, "macs") == "2.05 GMACs"
