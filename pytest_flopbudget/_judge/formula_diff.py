"""Which term of a model's formula changed, and in which layers: `seq**2 term of h.{0..11}.attn +100%`.

A point count says a model grew 3%; its formula says *how*: the `seq**2` term of the attention layers doubled,
which at 8k tokens is not 3% at all. Repeated layers (`h.0.attn`, `h.1.attn`, ...) are summed into one group
(`h.{0..11}.attn`), so that a change made to every block reads as one change, as it was made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.polynomial import Exponents, Polynomial
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import format_percent, layer_label

_INDEX = re.compile(r"\d+")


def layer_group(path: str) -> str:
    """The group a layer path belongs to: every index replaced by `*` (`h.3.attn` -> `h.*.attn`)."""
    return ".".join("*" if _INDEX.fullmatch(part) else part for part in path.split(".")) if path else path


def group_label(paths: Iterable[str]) -> str:
    """The paths of one group as one label: `h.{0..11}.attn` for consecutive indices, `h.{0,2}.attn` for a few
    others, `h.*.attn` for many; the path itself for one, `(model)` for the root."""
    unique = sorted(set(paths), key=_natural)
    if len(unique) == 1:
        return layer_label(unique[0])
    split = [path.split(".") for path in unique]
    parts = []
    for position, part in enumerate(split[0]):
        values = {segments[position] for segments in split}
        if len(values) == 1:
            parts.append(part)
            continue
        numbers = sorted(int(value) for value in values)
        if numbers == list(range(numbers[0], numbers[-1] + 1)):
            parts.append(f"{{{numbers[0]}..{numbers[-1]}}}")
        elif len(numbers) <= 4:
            parts.append("{" + ",".join(str(n) for n in numbers) + "}")
        else:
            parts.append("*")
    return ".".join(parts)


def grouped_labels(paths: Iterable[str]) -> list[str]:
    """`paths` as group labels, in the order their groups first appear."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(layer_group(path), []).append(path)
    return [group_label(members) for members in groups.values()]


@dataclass(frozen=True)
class TermChange:
    """One monomial's coefficient in one group of layers, before and after (zero where it had none)."""

    monomial: str
    layers: str
    degree: int
    baseline: Fraction
    now: Fraction

    @property
    def change(self) -> str:
        if not self.baseline:
            return "new"
        if not self.now:
            return "removed"
        return format_percent(self.now - self.baseline, self.baseline)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.monomial} term of {self.layers} {self.change}"


def term_changes(baseline: Formula, now: Formula, metric: Metric) -> list[TermChange]:
    """Every (monomial, group of layers) whose coefficient of `metric` changed, the highest power first and then
    the largest change; empty when the two formulas are in different dims (there is nothing to compare term by
    term: the dims themselves changed)."""
    if baseline.dims != now.dims:
        return []
    old, new = _by_group(baseline, metric), _by_group(now, metric)
    changes = []
    for group in dict.fromkeys([*new, *old]):
        before, after = old.get(group, ({}, [])), new.get(group, ({}, []))
        label = group_label([*before[1], *after[1]])
        for exponents in dict.fromkeys([*after[0], *before[0]]):
            a, b = before[0].get(exponents, Fraction(0)), after[0].get(exponents, Fraction(0))
            if a != b:
                monomial = Polynomial(now.dims).monomial(exponents)
                changes.append(TermChange(monomial, label, sum(exponents), a, b))
    changes.sort(key=lambda c: (-c.degree, -abs(c.now - c.baseline)))
    return changes


def _by_group(formula: Formula, metric: Metric) -> dict[str, tuple[dict[Exponents, Fraction], list[str]]]:
    """Per group of layers: the summed coefficient of each monomial, and the layers summed."""
    groups: dict[str, tuple[dict[Exponents, Fraction], list[str]]] = {}
    for path in formula.layers:
        poly = formula.layer(path, metric)
        if not poly.terms:
            continue
        terms, members = groups.setdefault(layer_group(path), ({}, []))
        members.append(path)
        for exponents, coefficient in poly.terms.items():
            terms[exponents] = terms.get(exponents, Fraction(0)) + coefficient
    return groups


def _natural(path: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if _INDEX.fullmatch(p) else (1, p) for p in path.split(".")]
