"""Budget strings and budgets: the grammar, the errors, and both sides of every limit (see check tests)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_flopbudget._config.budget import (
    GRAMMAR,
    MAX_COUNT,
    MAX_EXPONENT,
    MAX_PERCENT,
    MAX_TEXT,
    PERCENT_GRAMMAR,
    Budget,
    Limit,
    MaxIncrease,
    parse_budget,
    parse_increase,
    parse_quantity,
    shown,
)
from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._units import SI

T = TypeVar("T")

#: The decimal prefixes budgets accept (the metrics' prefix system; `units.SI`).
PREFIXES = dict(SI.scales)

WHERE = Location("/proj/pyproject.toml", 12, "tool.flopbudget.models.resnet50.flops")


@pytest.mark.parametrize(
    ("text", "slot", "metric", "value"),
    [
        ("4.1G", "flops", "flops", 4_100_000_000),
        ("4.1e9", "flops", "flops", 4_100_000_000),
        ("8_200_000_000", "flops", "flops", 8_200_000_000),
        ("4.1 GFLOPs", "flops", "flops", 4_100_000_000),
        ("4.1GFLOPS", "flops", "flops", 4_100_000_000),
        ("4.1 Gflop", "flops", "flops", 4_100_000_000),
        ("300 MMACs", "flops", "macs", 300_000_000),  # a MAC unit in the flops slot makes a MAC budget
        ("300 MMACs", "macs", "macs", 300_000_000),
        ("300M", "macs", "macs", 300_000_000),
        ("25.6M", "params", "params", 25_600_000),
        ("25.6M params", "params", "params", 25_600_000),
        ("25.6 Mparams", "params", "params", 25_600_000),
        ("1k", "flops", "flops", 1_000),
        ("1K", "flops", "flops", 1_000),
        ("2T", "flops", "flops", 2 * 10**12),
        ("1.5P", "flops", "flops", 15 * 10**14),
        (".5k", "flops", "flops", 500),
        ("7", "flops", "flops", 7),
        ("  42  ", "flops", "flops", 42),
        ("1.5", "flops", "flops", 1),  # counts are integers: a ceiling of 1.5 allows 1
        ("0", "skipped", "skipped", 0),
        ("3", "skipped", "skipped", 3),
        ("1e3", "skipped", "skipped", 1000),
        (0, "skipped", "skipped", 0),
        (8_200_000_000, "flops", "flops", 8_200_000_000),
        (4.1e9, "flops", "flops", 4_100_000_000),
        (25.6e6, "params", "params", 25_600_000),
    ],
)
def test_accepted_budgets(text: object, slot: str, metric: str, value: int) -> None:
    limit = parse_quantity(text, slot, WHERE)
    assert (limit.metric, limit.value) == (metric, value)
    assert limit.source == WHERE


def test_decimal_parsing_is_exact() -> None:
    """4.1G is 4_100_000_000, not 4_099_999_999 as float arithmetic would give for some values."""
    assert parse_quantity("0.3G").value == 300_000_000
    assert parse_quantity("1.1T").value == 1_100_000_000_000
    assert parse_quantity("8.3G").value == 8_300_000_000


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("4.1m", "lowercase 'm' would mean milli"),
        ("4.1 mFLOPs", "lowercase 'm' would mean milli"),
        ("4.1Gi", "binary prefixes"),
        ("4.1 KiB", "binary prefixes"),
        ("-3G", "negative"),
        ("G", "does not start with a number"),
        ("", "does not start with a number"),
        ("4.1 GB", "a flops budget takes FLOPs or MACs, not 'B'"),  # B is the unit of bytes
        ("4.1 gflops", "unknown prefix or unit"),
        ("4.1G FLOPs extra", "unknown prefix or unit"),
        ("4,1G", "unknown prefix or unit"),
        ("nan", "does not start with a number"),
        ("inf", "does not start with a number"),
        ("1__000", "unknown prefix or unit"),
        ("4.1 params", "takes FLOPs or MACs, not 'params'"),
    ],
)
def test_rejected_budgets_quote_value_source_and_grammar(text: str, hint: str) -> None:
    with pytest.raises(LocatedError) as info:
        parse_quantity(text, "flops", WHERE)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("pyproject.toml:12: tool.flopbudget.models.resnet50.flops: ") or message.startswith(
        "/proj/pyproject.toml:12: tool.flopbudget.models.resnet50.flops: "
    )
    assert f"{text!r} is not a budget" in message
    assert hint in message
    assert GRAMMAR in message
    (problem,) = info.value.problems
    assert problem.source == WHERE
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("value", "slot", "hint"),
    [
        (-1, "flops", "negative"),
        (-0.5, "flops", "negative or not finite"),
        (float("nan"), "flops", "not finite"),
        (float("inf"), "params", "not finite"),
        (True, "flops", "got bool"),
        ([1], "flops", "got list"),
        (None, "flops", "got NoneType"),
        ("4 GFLOPs", "macs", "a macs budget takes MACs, not 'FLOPs'"),
        ("4 GFLOPs", "params", "a params budget takes params"),
        ("300 MMACs", "params", "a params budget takes params"),
        ("4 GFLOPs", "int-ops", "an int-ops budget takes integer ops, not 'FLOPs'"),
        ("1.5", "skipped", "whole number"),
        ("3 FLOPs", "skipped", "max-skipped-ops budget takes no unit"),
    ],
)
def test_rejected_values_by_type_and_slot(value: object, slot: str, hint: str) -> None:
    with pytest.raises(LocatedError, match="is not a budget") as info:
        parse_quantity(value, slot, WHERE)
    assert hint in str(info.value)


def test_unknown_slot_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown budget slot"):
        parse_quantity("1G", "gflops")


def test_limit_keeps_the_text_as_written() -> None:
    assert parse_quantity(" 4.1 GFLOPs ").text == "4.1 GFLOPs"
    assert parse_quantity(5).text == "5"


@pytest.mark.parametrize(
    ("text", "fraction"),
    [("2%", Decimal("0.02")), ("0%", Decimal(0)), ("0.5 %", Decimal("0.005")), ("150%", Decimal("1.5"))],
)
def test_max_increase(text: str, fraction: Decimal) -> None:
    increase = parse_increase(text, WHERE)
    assert increase.fraction == fraction
    assert increase.text == text.strip()


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (2, "percentage string"),
        (0.02, "percentage string"),
        ("2", "no '%' sign"),
        ("-2%", "negative"),
        ("%", "no number"),
        ("two%", "no number"),
    ],
)
def test_max_increase_rejects_ambiguous_values(value: object, hint: str) -> None:
    with pytest.raises(LocatedError, match="is not a percentage") as info:
        parse_increase(value, WHERE)
    assert hint in str(info.value)
    assert "'2%'" in str(info.value)


@pytest.mark.parametrize(
    ("baseline", "now", "allowed"),
    [
        (1000, 1020, True),  # exactly +2% passes
        (1000, 1021, False),
        (1000, 900, True),
        (0, 0, True),
        (0, 1, False),  # any growth from nothing is more than any percentage
        (3, 3, True),
    ],
)
def test_max_increase_is_inclusive(baseline: int, now: int, allowed: bool) -> None:
    assert parse_increase("2%").allows(baseline, now) is allowed


def test_warn_increase_is_parsed_like_max_increase_and_named_in_errors() -> None:
    sources = {
        slot: Location("/p/pyproject.toml", line, f"models.m.{slot.replace('_', '-')}")
        for line, slot in ((4, "max_increase"), (5, "warn_increase"))
    }
    budget = parse_budget({"max_increase": "10%", "warn_increase": "1%"}, sources)
    assert budget.warn_increase is not None and budget.warn_increase.fraction == Decimal("0.01")
    assert budget.warn_increase.source.line == 5 and not budget.is_empty
    assert Budget.from_dict(budget.to_dict()) == budget
    assert "warn_increase" not in Budget(max_increase=budget.max_increase).to_dict()  # unchanged JSON without it
    assert not parse_budget({"warn_increase": "1%"}, sources).is_empty  # warn-increase alone is a budget
    with pytest.raises(LocatedError) as info:
        parse_budget({"warn_increase": 1}, sources)
    assert str(info.value).startswith("/p/pyproject.toml:5: models.m.warn-increase: 1 is not a percentage: ")
    assert "warn-increase is a percentage string" in str(info.value)


def test_warn_increase_above_max_increase_is_a_one_line_error() -> None:
    sources = {
        slot: Location("/p/pyproject.toml", line, f"models.m.{slot.replace('_', '-')}")
        for line, slot in ((4, "max_increase"), (5, "warn_increase"))
    }
    with pytest.raises(LocatedError) as info:
        parse_budget({"max_increase": "2%", "warn_increase": "5%"}, sources)
    assert str(info.value) == (
        "/p/pyproject.toml:5: models.m.warn-increase: warn-increase 5% is larger than max-increase 2%: it would "
        "never warn; set it below max-increase"
    )
    assert parse_budget({"max_increase": "2%", "warn_increase": "2%"}, sources).warn_increase is not None


def test_parse_budget_collects_every_problem() -> None:
    sources = {
        slot: Location("/p/pyproject.toml", line, f"k.{slot}") for line, slot in enumerate(["flops", "params"], 3)
    }
    with pytest.raises(LocatedError) as info:
        parse_budget({"flops": "4.1m", "params": "-1", "macs": "1G"}, sources)
    assert [p.source.line for p in info.value.problems] == [3, 4]
    assert len(str(info.value).splitlines()) == 2


def test_parse_budget_mac_unit_in_flops_slot_conflicts_with_macs() -> None:
    with pytest.raises(LocatedError, match="already does"):
        parse_budget({"macs": "1G", "flops": "2 GMACs"}, {})


def test_parse_budget_builds_limits_in_metric_order() -> None:
    origin = Location("/p/pyproject.toml", 1, "tool.flopbudget.models.m")
    budget = parse_budget(
        {"params": "1M", "flops": "2 GMACs", "skipped": 0, "max_increase": "1%", "macs": None}, {}, origin
    )
    assert list(budget.limits) == ["macs", "params", "skipped"]
    assert budget.limit("macs") is not None and budget.limit("macs").value == 2 * 10**9
    assert budget.limit("flops") is None
    assert budget.max_increase is not None and budget.max_increase.fraction == Decimal("0.01")
    assert budget.source == origin
    assert not budget.is_empty
    assert Budget().is_empty


def test_override_replaces_metric_by_metric() -> None:
    base = parse_budget({"flops": "1G", "params": "1M", "max_increase": "2%"}, {}, Location(key="pyproject"))
    marker = parse_budget({"flops": "2G"}, {}, Location(key="marker"))
    merged = base.override(marker)
    assert merged.limit("flops").value == 2 * 10**9
    assert merged.limit("params").value == 10**6
    assert merged.max_increase == base.max_increase
    assert merged.source == Location(key="marker")


def test_budget_round_trips_through_dict() -> None:
    budget = parse_budget(
        {"flops": "4.1 GFLOPs", "params": 5, "max_increase": "2.5%"},
        {"flops": Location("/p/a.toml", 3, "x.flops")},
        Location("/p/a.toml", 2, "x"),
    )
    assert Budget.from_dict(budget.to_dict()) == budget
    assert Limit.from_dict(budget.limit("flops").to_dict()) == budget.limit("flops")
    assert MaxIncrease.from_dict(budget.max_increase.to_dict()) == budget.max_increase


def test_source_formats() -> None:
    assert Location("/p/pyproject.toml", 3, "a.b").where("/p") == "pyproject.toml:3: a.b"
    assert Location("/elsewhere/x.toml", None, "a").where("/p") == "/elsewhere/x.toml: a"
    assert Location(key="only").where() == "only"
    assert str(Problem(Location(), "bare")) == "bare"
    assert Location.from_dict(WHERE.to_dict()) == WHERE


# -- properties ------------------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**20))
def test_any_integer_spelling_parses_to_itself(n: int) -> None:
    assert parse_quantity(str(n)).value == n
    assert parse_quantity(f"{n:_}").value == n
    assert parse_quantity(n).value == n


@given(
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(sorted(PREFIXES)),
    st.sampled_from(["", " ", "FLOPs", " FLOPs", "MACs"]),
)
def test_prefixed_decimals_scale_exactly(number: Decimal, prefix: str, unit: str) -> None:
    text = f"{number}{prefix}{unit}" if unit.strip() else f"{number}{unit}{prefix}"
    limit = parse_quantity(text)
    assert limit.value == int(number * PREFIXES[prefix])
    assert limit.metric == ("macs" if "MAC" in unit else "flops")


@given(st.text(max_size=12))
def test_parser_never_raises_anything_but_a_located_error(text: str) -> None:
    try:
        limit = parse_quantity(text)
    except LocatedError as exc:
        assert "\n" not in str(exc)
    else:
        assert limit.value >= 0


def test_source_paths_are_shown_relative_through_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert Location(str(real / "sub" / "pyproject.toml"), 2, "k").where(str(link)) == "sub/pyproject.toml:2: k"


# -- hostile values (issue 12): ASCII only, bounded, linear, one line each ------------------------------------------


def _one_line_error(value: object, slot: str = "flops") -> str:
    with pytest.raises(LocatedError) as info:
        parse_quantity(value, slot, WHERE)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("/proj/pyproject.toml:12: tool.flopbudget.models.resnet50.flops: ") or message.startswith(
        "pyproject.toml:12: "
    )
    assert message.endswith(GRAMMAR)
    assert len(message) < 400  # the value is shortened, never pasted whole
    return message


#: The most memory a parse may take at its peak: a few KB of message and fractions (up to 10 KB measured). Building
#: the number `1e999999` asks for takes 415 KB; `1e10000000`, 4 MB and seconds.
SMALL_WORK = 64 * 2**10


def _traced(call: Callable[[], T]) -> tuple[T, int]:
    """`call()`'s result and the peak of the memory it allocated: the size of the largest number it built, whatever
    the machine's speed."""
    call()  # first-call caches (compiled patterns, interned strings) are not the work measured
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("\u0663\u0660k", "non-ASCII character '\u0663' (U+0663)"),  # Arabic-Indic 30k
        ("\uff13\uff10k", "non-ASCII character '\uff13' (U+FF13)"),  # full-width 30k
        ("4.1\u00a0G", "U+00A0"),  # a no-break space copied from a paper
        ("4.1 G\u0192LOPs", "U+0192"),
        ("\u20064.1G", "U+2006"),  # a six-per-em space stripped by str.strip(), still refused
        ("1e10000000", f"exponent is outside -{MAX_EXPONENT}..{MAX_EXPONENT}"),
        ("1e999999", "exponent is outside"),
        ("1e400", "exponent is outside"),
        ("1e-101", "exponent is outside"),
        ("1e31", "more than 10^30"),
        ("1000000000000000000000000000001", "more than 10^30"),
        ("1e28 k", "more than 10^30"),
        ("1e16 PFLOPs", "more than 10^30"),
        ("1" * (MAX_TEXT + 1), f"longer than {MAX_TEXT} characters"),
        ("1e" + "9" * 10_000_000, f"longer than {MAX_TEXT} characters"),
    ],
    ids=lambda v: v if len(v) < 40 else f"{len(v)} chars",
)
def test_hostile_strings_get_one_short_line(text: str, hint: str) -> None:
    message, peak = _traced(lambda: _one_line_error(text))
    assert peak < SMALL_WORK, "a number as large as the text asks for was built"
    assert hint in message
    assert "is not a budget" in message


def test_the_bound_itself_is_accepted_in_every_spelling() -> None:
    for value in (MAX_COUNT, "1e30", "1_000_000_000_000_000_000_000_000_000_000", "1e15 P", "1e21 GMACs", 1e30):
        assert parse_quantity(value).value == MAX_COUNT
    assert parse_quantity("0.0001e34").value == MAX_COUNT
    assert parse_quantity("1e-100").value == 0  # rounds down like any fraction of a count


@pytest.mark.parametrize(
    ("value", "hint", "shown_as"),
    [
        (10**5000, "more than 10^30", "an integer of about 5001 digits"),  # repr() itself raises past 4300 digits
        (-(10**5000), "negative", "-an integer of about 5001 digits"),
        (MAX_COUNT + 1, "more than 10^30", repr(MAX_COUNT + 1)),
        (1.5e30, "more than 10^30", "1.5e+30"),
        (1.7e308, "more than 10^30", "1.7e+308"),
    ],
    ids=["10**5000", "-10**5000", "10**30+1", "1.5e30", "1.7e308"],  # pytest's own ids cannot print 10**5000
)
def test_huge_numbers_are_refused_and_shown_short(value: object, hint: str, shown_as: str) -> None:
    message = _one_line_error(value)
    assert hint in message
    assert f": {shown_as} is not a budget" in message


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("1e999999%", "exponent is outside"),
        ("1e10000000%", "exponent is outside"),
        ("1000001%", "more than 1000000%"),
        ("1e7%", "more than 1000000%"),
        ("\u0662%", "U+0662"),
        ("2\uff05", "U+FF05"),  # full-width percent sign
        ("1" * 200 + "%", "longer than"),
    ],
)
def test_hostile_max_increase_is_refused(text: str, hint: str) -> None:
    with pytest.raises(LocatedError) as info:
        parse_increase(text, WHERE)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert hint in message
    assert message.endswith(PERCENT_GRAMMAR)


def test_the_largest_max_increase_is_exact_on_the_largest_counts() -> None:
    increase = parse_increase(f"{MAX_PERCENT}%")
    assert increase.fraction == MAX_PERCENT // 100
    assert increase.allows(MAX_COUNT, MAX_COUNT * 10_001)  # exactly +1,000,000%
    assert not increase.allows(MAX_COUNT, MAX_COUNT * 10_001 + 1)
    tiny = parse_increase("1e-100%")
    assert tiny.allows(10**30, 10**30) and not tiny.allows(10**30, 10**30 + 1)
    # 31 significant digits: beyond the default decimal context's 28, still exact
    odd = parse_increase("1.000000000000000000000000000001%")
    assert odd.allows(10**32, 10**32 + 10**30 + 1)
    assert not odd.allows(10**32, 10**32 + 10**30 + 2)


def test_shown_never_raises_and_stays_short() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert shown(Hostile()) == "a Hostile"
    assert shown([1] * 10_000).endswith("... (list)")
    assert shown("x" * 10_000).endswith("... (10000 characters)")
    assert shown(10**100_000) == "an integer of about 100001 digits"
    assert shown("4.1G") == "'4.1G'"


_NON_ASCII_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())


@given(
    st.lists(st.one_of(_NON_ASCII_DIGITS, st.sampled_from("0123456789")), min_size=1, max_size=8),
    st.sampled_from(["", "k", " G", "%"]),
)
def test_any_non_ascii_digit_is_refused_with_one_line(chars: list[str], suffix: str) -> None:
    text = "".join(chars) + suffix
    if text.isascii():
        return
    parse = (lambda v: parse_increase(v, WHERE)) if suffix == "%" else (lambda v: parse_quantity(v, "flops", WHERE))
    with pytest.raises(LocatedError, match="non-ASCII character") as info:
        parse(text)
    assert "\n" not in str(info.value)


_MANTISSAS = st.from_regex(r"\A(?:[0-9]{1,40}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})\Z")
_EXPONENTS = st.one_of(st.none(), st.integers(-150, 150), st.integers(-(10**60), 10**60))


@settings(max_examples=300)
@given(_MANTISSAS, _EXPONENTS, st.sampled_from(["", *sorted(PREFIXES)]), st.sampled_from(["", " FLOPs", " MACs"]))
def test_any_accepted_count_is_at_most_the_bound_and_validates_fast(
    mantissa: str, exponent: int | None, prefix: str, unit: str
) -> None:
    text = mantissa + ("" if exponent is None else f"e{exponent}") + (" " + prefix + unit.strip() if prefix else unit)

    def parsed() -> Limit | LocatedError:
        try:
            return parse_quantity(text, "flops", WHERE)
        except LocatedError as exc:
            return exc

    limit, peak = _traced(parsed)
    assert peak < SMALL_WORK, "a number as large as the text asks for was built"
    if isinstance(limit, LocatedError):
        assert "\n" not in str(limit) and len(str(limit)) < 400
    else:
        assert 0 <= limit.value <= MAX_COUNT
        exact = Fraction(Decimal(mantissa)) * Fraction(10) ** (exponent or 0) * PREFIXES.get(prefix, 1)
        assert limit.value == int(exact)  # exact: no rounding to the decimal context's 28 digits


@settings(max_examples=200)
@given(_MANTISSAS, _EXPONENTS, st.integers(0, MAX_COUNT), st.integers(0, MAX_COUNT))
def test_any_accepted_max_increase_is_bounded_and_never_crashes_on_growth(
    mantissa: str, exponent: int | None, baseline: int, now: int
) -> None:
    text = mantissa + ("" if exponent is None else f"e{exponent}") + "%"
    try:
        increase = parse_increase(text, WHERE)
    except LocatedError as exc:
        assert "\n" not in str(exc)
        return
    assert 0 <= increase.fraction <= MAX_PERCENT / 100
    assert isinstance(increase.allows(baseline, now), bool)
    assert MaxIncrease.from_dict(increase.to_dict()) == increase


@given(st.integers(min_value=0, max_value=10**40) | st.builds(lambda e: 10**e, st.integers(0, 6000)))
def test_any_integer_is_accepted_iff_at_most_the_bound(n: int) -> None:
    if n <= MAX_COUNT:
        assert parse_quantity(n).value == n
    else:
        assert "more than 10^30" in _one_line_error(n)
