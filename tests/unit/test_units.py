"""Prefix systems, checked by hand: what each prefix scales by, and how counts print and round up with it."""

from __future__ import annotations

import pytest

from pytest_flopbudget._units import BINARY, SI, PrefixSystem


def test_si_prefixes_are_powers_of_ten_and_k_is_written_either_way() -> None:
    assert [SI.scale(p) for p in ("k", "K", "M", "G", "T", "P")] == [1_000, 1_000, 10**6, 10**9, 10**12, 10**15]
    assert SI.scale("Ki") is None and SI.scale("m") is None


def test_binary_prefixes_are_powers_of_1024() -> None:
    assert BINARY.scale("Ki") == 1024
    assert BINARY.scale("Mi") == 1024 * 1024 == 1_048_576
    assert BINARY.scale("Gi") == 1_073_741_824
    assert BINARY.scale("Ti") == 1_099_511_627_776
    assert BINARY.scale("Pi") == 1_125_899_906_842_624
    assert 512 * 2**20 == 536_870_912 == 512 * BINARY.scales["Mi"]  # "512MiB"
    assert BINARY.scale("M") is None


def test_split_prefers_the_longest_prefix() -> None:
    both = BINARY | SI
    assert both.split("MiB") == [(1_048_576, "B"), (1_000_000, "iB")]
    assert both.split("GFLOPs") == [(10**9, "FLOPs")]
    assert SI.split("MiB") == [(1_000_000, "iB")]
    assert SI.split("FLOPs") == []


def test_a_union_accepts_both_and_prints_with_the_first() -> None:
    both = BINARY | SI
    assert both.scale("Gi") == 2**30 and both.scale("G") == 10**9
    assert both.format(536_870_912, "B") == "512 MiB"
    assert both.description == f"{BINARY.description} or {SI.description}"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0, "", "0"),
        (999, "", "999"),
        (1000, "", "1.00k"),
        (8_178_368_512, "", "8.18G"),
        (8_178_368_512, "FLOPs", "8.18 GFLOPs"),
        (25_557_032, "", "25.6M"),
        (-2_500, "", "-2.50k"),
        (1.5, "", "1.50"),
        (3 * 10**15, "", "3.00P"),
        (7, "MACs", "7 MACs"),
    ],
)
def test_si_format(value: float, unit: str, text: str) -> None:
    assert SI.format(value, unit) == text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1023, "B", "1023 B"),
        (1024, "B", "1.00 KiB"),
        (536_870_912, "B", "512 MiB"),  # 512 * 2**20
        (22 * 2**30, "B", "22.0 GiB"),
        (3 * 2**29, "", "1.50Gi"),  # 1.5 * 2**30
        (2**50, "B", "1.00 PiB"),
    ],
)
def test_binary_format(value: int, unit: str, text: str) -> None:
    assert BINARY.format(value, unit) == text


@pytest.mark.parametrize(
    ("system", "value", "text"),
    [
        (SI, 240, "240"),
        (SI, 8_523_456_789, "8.53G"),  # 8.523... rounds up to 8.53
        (SI, 8_520_000_000, "8.52G"),  # exact: no rounding up
        (SI, 999_999_600, "1G"),  # 999.9996M rounds up to 1000M: that is 1G
        (BINARY, 1000, "1000"),  # below 1 Ki: as it is
        (BINARY, 536_870_912, "512Mi"),
        (BINARY, 536_870_913, "513Mi"),  # 512.000001 Mi rounds up to 513
        (BINARY, 1_073_741_823, "1Gi"),  # 1023.99999 Mi rounds up to 1024 Mi: that is 1 Gi
    ],
)
def test_ceiling_above_never_falls_below_the_count(system: PrefixSystem, value: int, text: str) -> None:
    assert system.ceiling_above(value) == text
    number, scale = text, 1
    for prefix in system.shown:
        if text.endswith(prefix):
            number, scale = text[: -len(prefix)], system.scales[prefix]
            break
    assert float(number) * scale >= value
