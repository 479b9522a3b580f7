"""Budget strings (`4.1G`, `300 MMACs`, `25.6M`, `2%`) and the `Budget` they make up.

Budgets are written by people, copied from papers and read in code review, so the grammar is small and strict:
the metric's prefixes only (decimal for FLOPs, MACs and params: no binary `Gi`), no lowercase `m` (milli or
mega?), no negative values. A value that is
not understood is an error that quotes it, says where it came from and shows the grammar; it is never guessed.
Parsing is exact (`4.1G` is 4_100_000_000, not 4_099_999_999) and bounded: budget text is ASCII, at most
`MAX_TEXT` characters with an exponent within +-`MAX_EXPONENT`, checked before any number is built, so a hostile
`1e10000000` costs no more than `1e9`; a count is at most `MAX_COUNT` (10^30) and a max-increase at most
`MAX_PERCENT` percent, so every later step (reports, growth, `--base-ref`) works with ordinary numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._metrics import METRICS, Metric, by_name
from pytest_flopbudget._report import MAX_COUNT
from pytest_flopbudget._units import SI, PrefixSystem

#: The pyproject keys of a model's budget beside each metric's own (`flops`, `params`, ...: `Metric.key`), spelled
#: here once for everything that reads or writes them (the config's validation, the count cache's ceiling keys,
#: `--base-ref`'s changes, the edit hints): growth over the baseline (`max-increase`, `warn-increase`), the budgets
#: on the curve (`max-degree`, `at`: docs/curve-budgets.md) and the per-phase budgets (`phases`: docs/generation.md).
MAX_INCREASE = "max-increase"
WARN_INCREASE = "warn-increase"
MAX_DEGREE = "max-degree"
AT = "at"
PHASES = "phases"
#: `convention = "megatron"`: the model's FLOPs are judged under a stack's convention (docs/conventions-profiles.md).
CONVENTION = "convention"
NON_METRIC_BUDGET_KEYS = (MAX_INCREASE, WARN_INCREASE, MAX_DEGREE, AT, PHASES, CONVENTION)

#: The accepted convention names (`_conventions/registry.py`), plugged in by the package root: the profiles read
#: Reports and sit above config/, which validates the key.
_convention_names: Callable[[], tuple[str, ...]] = tuple


def use_convention_names(names: Callable[[], tuple[str, ...]]) -> None:
    global _convention_names
    _convention_names = names


def convention_names() -> tuple[str, ...]:
    """Every name `convention = ...` accepts."""
    return _convention_names()


#: The largest count a budget can hold: far above any model (a 10^12-parameter model at 10^6 tokens is ~10^18
#: FLOPs) and small enough that every report, percentage and CI annotation handles it as an ordinary number.

#: The largest max-increase, in percent: 1,000,000% lets a model grow 10,000-fold; anything above is no limit.
MAX_PERCENT = 10**6

#: The longest budget string (after stripping spaces); checked before parsing so validation stays linear.
MAX_TEXT = 100

#: The largest exponent (either sign) in `4.1e9`; 10^30 needs 30, and 100 leaves room for `0.0001e34`.
MAX_EXPONENT = 100

GRAMMAR = (
    f"write a non-negative number up to 10^30 in ASCII with an optional {SI.description} "
    "and unit, e.g. 4.1G, 4.1e9, 8_200_000_000, '4.1 GFLOPs', '300 MMACs', '25.6M' (params)"
)
PERCENT_GRAMMAR = "write a non-negative percentage up to 1000000% such as '2%' or '0.5%'"

# ASCII digits only: `\d` would also match Arabic-Indic or full-width digits.
_NUMBER = re.compile(
    r"(?P<mantissa>[0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)(?:[eE](?P<exponent>[+-]?[0-9]+))?"
)


@dataclass(frozen=True)
class Limit:
    """A ceiling on one metric: `value` is the largest allowed count (inclusive); `text` is how it was written."""

    metric: Metric
    value: int
    text: str
    source: Location = field(default_factory=Location)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "text": self.text, "source": self.source.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limit:
        return cls(
            by_name(str(data["metric"])), int(data["value"]), str(data["text"]), Location.from_dict(data["source"])
        )


@dataclass(frozen=True)
class MaxIncrease:
    """Largest allowed growth over the baseline, as a fraction (`2%` -> 0.02), for flops, macs and params."""

    fraction: Decimal
    text: str
    source: Location = field(default_factory=Location)

    def allows(self, baseline: int, now: int) -> bool:
        """Exact: growth equal to the limit passes; any growth from a zero baseline fails."""
        return Fraction(now - baseline) <= baseline * Fraction(self.fraction)

    def to_dict(self) -> dict[str, Any]:
        return {"fraction": str(self.fraction), "text": self.text, "source": self.source.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaxIncrease:
        return cls(Decimal(str(data["fraction"])), str(data["text"]), Location.from_dict(data["source"]))


@dataclass(frozen=True)
class DegreeLimit:
    """`max-degree = { seq = 1 }`: `metric`'s formula may grow at most as `dim**degree` (docs/curve-budgets.md)."""

    metric: Metric
    dim: str
    degree: int
    source: Location = field(default_factory=Location)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "dim": self.dim, "degree": self.degree, "source": self.source.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DegreeLimit:
        source = Location.from_dict(data["source"])
        return cls(by_name(str(data["metric"])), str(data["dim"]), int(data["degree"]), source)


@dataclass(frozen=True)
class PointLimits:
    """`at = [{ seq = 8192, flops = "2T" }]`: ceilings at one point of the curve, judged on the model's formula."""

    point: Mapping[str, int]
    limits: Mapping[Metric, Limit]
    source: Location = field(default_factory=Location)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": dict(self.point),
            "limits": {m: lim.to_dict() for m, lim in self.limits.items()},
            "source": self.source.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PointLimits:
        return cls(
            {str(k): int(v) for k, v in data["point"].items()},
            {by_name(str(m)): Limit.from_dict(v) for m, v in data["limits"].items()},
            Location.from_dict(data["source"]),
        )


@dataclass(frozen=True)
class Budget:
    """Ceilings per metric plus an optional max-increase; `source` is where the budget as a whole is declared.

    `degrees` and `at` are the budgets on the curve (`max-degree`, `at`), judged on the model's formula."""

    limits: Mapping[Metric, Limit] = field(default_factory=dict)
    max_increase: MaxIncrease | None = None
    source: Location | None = None
    degrees: tuple[DegreeLimit, ...] = ()
    at: tuple[PointLimits, ...] = ()
    #: Ceilings per phase (`phases = { decode-mean = { flops = "15G" } }`, phase_budget.py): phase -> metric -> limit.
    phases: Mapping[str, Mapping[Metric, Limit]] = field(default_factory=dict)
    #: `warn-increase`: growth above it (and within max-increase) is a warning that does not fail; at most max-increase.
    warn_increase: MaxIncrease | None = None
    #: `convention = "megatron"`: the FLOPs judged (ceiling, growth) are the figure under this convention.
    convention: str | None = None

    def limit(self, metric: Metric) -> Limit | None:
        return self.limits.get(metric)

    @property
    def is_empty(self) -> bool:
        return (
            not self.limits
            and self.max_increase is None
            and self.warn_increase is None
            and not self.on_curve
            and not self.phases
        )

    @property
    def on_curve(self) -> bool:
        """Whether a part of this budget is judged on the model's formula (it needs a curve count)."""
        return bool(self.degrees or self.at)

    def override(self, other: Budget) -> Budget:
        """This budget with `other`'s limits replacing ours metric by metric (explicit marker args win)."""
        limits = {**self.limits, **other.limits}
        return Budget(
            limits={m: limits[m] for m in METRICS if m in limits},
            max_increase=other.max_increase if other.max_increase is not None else self.max_increase,
            source=other.source or self.source,
            degrees=other.degrees,  # the budget on the curve is not lent: it needs the curve count of its own entry
            at=other.at,
            phases={**self.phases, **other.phases},
            warn_increase=other.warn_increase if other.warn_increase is not None else self.warn_increase,
            convention=other.convention or self.convention,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "limits": {m: lim.to_dict() for m, lim in self.limits.items()},
            "max_increase": self.max_increase.to_dict() if self.max_increase else None,
            "source": self.source.to_dict() if self.source else None,
        }
        if self.on_curve:  # only when set, so the outputs of projects without curves do not change
            data["max_degree"] = [limit.to_dict() for limit in self.degrees]
            data["at"] = [point.to_dict() for point in self.at]
        if self.warn_increase is not None:  # only when set: every other budget's JSON is as it was
            data["warn_increase"] = self.warn_increase.to_dict()
        if self.convention is not None:  # only when set: every other budget's JSON is as it was
            data["convention"] = self.convention
        if self.phases:  # only when set: every other budget's JSON is as it was
            data["phases"] = {
                phase: {m: lim.to_dict() for m, lim in limits.items()} for phase, limits in self.phases.items()
            }
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Budget:
        increase = data.get("max_increase")
        warn = data.get("warn_increase")
        source = data.get("source")
        return cls(
            limits={by_name(str(m)): Limit.from_dict(v) for m, v in data.get("limits", {}).items()},
            max_increase=MaxIncrease.from_dict(increase) if increase else None,
            source=Location.from_dict(source) if source else None,
            degrees=tuple(DegreeLimit.from_dict(item) for item in data.get("max_degree", [])),
            at=tuple(PointLimits.from_dict(item) for item in data.get("at", [])),
            phases={
                str(phase): {by_name(str(m)): Limit.from_dict(v) for m, v in limits.items()}
                for phase, limits in data.get("phases", {}).items()
            },
            warn_increase=MaxIncrease.from_dict(warn) if warn else None,
            convention=str(data["convention"]) if data.get("convention") is not None else None,
        )


def parse_quantity(value: Any, slot: str = "flops", source: Location | None = None) -> Limit:
    """Parse one budget value written in the `slot` (`flops`, `macs`, `params` or `skipped`) into a `Limit`.

    Accepts ints, finite floats and strings in the documented grammar. Fractional counts round down, since every
    count is an integer: a ceiling of 1.5 allows 1. Raises `LocatedError` quoting the value and `source`.
    """
    slot_metric = METRICS.get(slot)
    if slot_metric is None:
        raise ValueError(f"unknown budget slot {slot!r}; expected one of {', '.join(METRICS)}")
    source = source or Location()
    metric, number = _parse(value, slot_metric, source)
    if metric.whole and number.denominator != 1:
        raise _error(value, source, f"a number of {metric.label} is a whole number", grammar(metric.prefixes))
    text = value if isinstance(value, str) else repr(value)
    return Limit(metric, int(number), text.strip(), source)


def parse_increase(value: Any, source: Location | None = None, key: str = MAX_INCREASE) -> MaxIncrease:
    """`"2%"` -> `MaxIncrease(Decimal("0.02"))`. A bare number is refused: is `2` two percent or 200 percent?
    `key` (`max-increase` or `warn-increase`) names the setting in the error."""
    source = source or Location()
    if not isinstance(value, str):
        raise _error(value, source, f"{key} is a percentage string", PERCENT_GRAMMAR, what="a percentage")
    text = _checked_text(value, source, PERCENT_GRAMMAR, "a percentage")
    if text.startswith("-"):
        raise _error(value, source, "it is negative", PERCENT_GRAMMAR, what="a percentage")
    if not text.endswith("%"):
        raise _error(value, source, "it has no '%' sign", PERCENT_GRAMMAR, what="a percentage")
    match = _NUMBER.fullmatch(text[:-1].strip())
    if not match:
        raise _error(value, source, "no number before '%'", PERCENT_GRAMMAR, what="a percentage")
    percent = _exact(match, value, source, PERCENT_GRAMMAR, "a percentage")
    if percent > MAX_PERCENT:
        raise _error(value, source, "it is more than 1000000%", PERCENT_GRAMMAR, what="a percentage")
    mantissa, exponent = match["mantissa"].replace("_", ""), int(match["exponent"] or 0)
    return MaxIncrease(Decimal(f"{mantissa}E{exponent - 2}"), text, source)  # exact, whatever the context


def parse_budget(values: Mapping[str, Any], sources: Mapping[str, Location], origin: Location | None = None) -> Budget:
    """A `Budget` from raw values keyed by slot (`flops`, `macs`, `params`, `skipped`, `max_increase`,
    `warn_increase`).

    Every bad value is reported, not only the first. A value in the flops slot with a MAC unit is a MAC budget;
    setting the same metric twice that way is an error, and so is a warn-increase above the max-increase.
    """
    problems: list[Problem] = []
    limits: dict[Metric, Limit] = {}
    increase: MaxIncrease | None = None
    warn: MaxIncrease | None = None
    for slot, value in values.items():
        if value is None:
            continue
        source = sources.get(slot, origin or Location())
        try:
            if slot == "max_increase":
                increase = parse_increase(value, source)
                continue
            if slot == "warn_increase":
                warn = parse_increase(value, source, WARN_INCREASE)
                continue
            limit = parse_quantity(value, slot, source)
        except LocatedError as exc:
            problems.extend(exc.problems)
            continue
        if limit.metric in limits:
            other = limits[limit.metric]
            problems.append(
                Problem(source, f"{limit.text!r} sets a {limit.metric} budget, but {other.text!r} already does")
            )
            continue
        limits[limit.metric] = limit
    if warn is not None and increase is not None and warn.fraction > increase.fraction:
        why = f"warn-increase {warn.text} is larger than max-increase {increase.text}: it would never warn"
        problems.append(Problem(warn.source, f"{why}; set it below max-increase"))
    if problems:
        raise LocatedError(problems)
    return Budget({m: limits[m] for m in METRICS if m in limits}, increase, origin, warn_increase=warn)


def grammar(prefixes: PrefixSystem) -> str:
    """The budget grammar for a metric written with `prefixes` (`GRAMMAR` for the decimal ones)."""
    return GRAMMAR if prefixes == SI else GRAMMAR.replace(SI.description, prefixes.description)


def _parse(value: Any, slot: Metric, source: Location) -> tuple[Metric, Fraction]:
    """The metric and exact value of `value`, at most `MAX_COUNT`; never builds a number larger than that."""
    rules = grammar(slot.prefixes)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _error(value, source, f"expected a number or a string, got {type(value).__name__}", rules)
    if isinstance(value, int):
        if value < 0:
            raise _error(value, source, "it is negative", rules)
        return slot, _bounded(Fraction(value), value, source, rules)
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            raise _error(value, source, "it is negative or not finite", rules)
        # repr: 4.1e9 means 4_100_000_000, not the binary float's exact value
        return slot, _bounded(Fraction(Decimal(repr(value))), value, source, rules)
    text = _checked_text(value, source, rules, "a budget")
    if text.startswith("-"):
        raise _error(value, source, "it is negative", rules)
    match = _NUMBER.match(text)
    if not match:
        raise _error(value, source, "it does not start with a number", rules)
    number = _exact(match, value, source, rules, "a budget")
    scale, metric = _suffix(text[match.end() :].strip(), slot, value, source)
    return metric, _bounded(number * scale, value, source, rules)


def _checked_text(value: str, source: Location, grammar: str, what: str) -> str:
    """`value` stripped, refused when too long or not ASCII (Arabic-Indic or full-width digits, no-break spaces)."""
    text = value.strip()
    if len(text) > MAX_TEXT:
        raise _error(value, source, f"it is longer than {MAX_TEXT} characters", grammar, what=what)
    if not value.isascii():
        char = next(c for c in value if not c.isascii())
        why = f"it contains the non-ASCII character {char!r} (U+{ord(char):04X}); only ASCII is accepted"
        raise _error(value, source, why, grammar, what=what)
    return text


def _exact(match: re.Match[str], value: Any, source: Location, grammar: str, what: str) -> Fraction:
    """The exact value of a `_NUMBER` match; the exponent is bounded first, so the result is never huge."""
    exponent = int(match["exponent"] or 0)  # at most MAX_TEXT digits: linear
    if abs(exponent) > MAX_EXPONENT:
        why = f"its exponent is outside -{MAX_EXPONENT}..{MAX_EXPONENT}"
        raise _error(value, source, why, grammar, what=what)
    return Fraction(Decimal(match["mantissa"].replace("_", ""))) * Fraction(10) ** exponent


def _bounded(number: Fraction, value: Any, source: Location, rules: str = GRAMMAR) -> Fraction:
    if number > MAX_COUNT:
        raise _error(value, source, "it is more than 10^30, the largest budget", rules)
    return number


def _suffix(suffix: str, slot: Metric, value: Any, source: Location) -> tuple[int, Metric]:
    """Split `GFLOPs` into its prefix scale and metric with the slot's prefix system; explain what is wrong with
    anything else."""
    if not suffix:
        return 1, slot
    unit = _unit(suffix, slot, value, source)
    if unit is not None:
        return 1, unit
    for scale, rest in slot.prefixes.split(suffix):
        rest = rest.strip()
        if not rest:
            return scale, slot
        unit = _unit(rest, slot, value, source)
        if unit is not None:
            return scale, unit
    head, rest = suffix[0], suffix[1:].strip()
    rules = grammar(slot.prefixes)
    if head == "m" and (not rest or METRICS.by_unit(rest) is not None):
        raise _error(value, source, "lowercase 'm' would mean milli; write 'M' for 10^6", rules)
    if SI.scale(head) is not None and rest[:1] == "i" and slot.prefixes.scale(f"{head}i") is None:
        raise _error(value, source, f"binary prefixes such as '{head}i' are not accepted; prefixes are decimal", rules)
    raise _error(value, source, f"unknown prefix or unit {suffix!r}", rules)


def _unit(text: str, slot: Metric, value: Any, source: Location) -> Metric | None:
    """The metric a unit names, None when `text` is not a unit; a unit that does not fit the slot is an error."""
    # bytes and param-bytes share the unit `B`: a slot's own unit is itself
    metric = slot if text.lower() in slot.units else METRICS.by_unit(text)
    if metric is None:
        return None
    if metric not in slot.slot_units:
        allowed = " or ".join(by_name(u).label for u in slot.slot_units) or "no unit"
        article = "an" if slot.key[:1].lower() in "aeiou" else "a"  # an int-ops budget, a flops budget
        why = f"{article} {slot.key} budget takes {allowed}, not {text!r}"
        raise _error(value, source, why, grammar(slot.prefixes))
    return metric


def _error(value: Any, source: Location, why: str, grammar: str, what: str = "a budget") -> LocatedError:
    return LocatedError([Problem(source, f"{shown(value)} is not {what}: {why}; {grammar}")])


def shown(value: Any, limit: int = 60) -> str:
    """`repr(value)` for a message, shortened when long: never more than about `limit` characters, never raising
    (the repr of an int over 4300 digits raises ValueError; a 10 MB string should not fill the terminal)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'-' if value < 0 else ''}an integer of about {digits} digits"
    if isinstance(value, str) and len(value) > limit:
        return f"{value[: limit - 20]!r}... ({len(value)} characters)"
    try:
        text = repr(value)
    except Exception:  # a message must not fail on a hostile __repr__
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({type(value).__name__})"
