"""The MFU numerator: a training step's FLOPs per token as an exact formula of the sequence length, exact and
under each LLM stack's convention, with the difference itemised by reason, each a formula too.

The model is counted as a training step at the sizes the curve machinery's fit asks for (`_curve/fit.py`: a
lattice, each series interpolated exactly and verified at sizes it was not built from), and each count is priced
under every training convention (`llm.PROFILES`, all but the inference-only vllm). The series fitted are the
exact FLOPs per step, each convention's, each convention's difference per reason, and the tokens per step, so
every figure is a polynomial of the dims; per token is the step's polynomial over the tokens' (a polynomial again
where the step's has no constant term: `(c2*seq**2 + c1*seq) / seq`).

The artifact (`--out PATH`) is JSON: the formulas as text (`render`: Python syntax) and, per convention, one
Python expression of the dims a training loop evaluates each step (docs/conventions-profiles.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from fractions import Fraction
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends import entry_counter
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._conventions.llm import PROFILES
from pytest_flopbudget._conventions.llm_facts import facts_of
from pytest_flopbudget._curve.engine import count_point
from pytest_flopbudget._curve.fit import FitError, Point, fit
from pytest_flopbudget._curve.polynomial import Polynomial, render
from pytest_flopbudget._errors import CountingError

#: The layout of the artifact `flopbudget mfu --out` writes.
FORMAT = "pytest-flopbudget/mfu/1"
#: The series key of the exact count's FLOPs per step (a convention's is its name).
EXACT = "exact"
TOKENS = "tokens"


@dataclasses.dataclass(frozen=True)
class Numerator:
    """One figure per step (`per_step`) and per token (`per_token`, None where it is no polynomial), as formulas."""

    name: str
    per_step: Polynomial
    per_token: Polynomial | None
    tokens: Polynomial
    #: ours - theirs by reason, per step (only for a convention).
    by_reason: dict[str, Polynomial] = dataclasses.field(default_factory=dict)

    def per_token_text(self) -> str:
        if self.per_token is not None:
            return render(self.per_token)
        return f"({render(self.per_step)}) / ({render(self.tokens)})"

    def python(self) -> str:
        """One line of Python: the FLOPs per token, a float, from the dims as variables."""
        return f"({render(self.per_step)}) / ({render(self.tokens)})"

    def at(self, point: dict[str, int]) -> Fraction:
        return self.per_step.at(point) / self.tokens.at(point)


@dataclasses.dataclass(frozen=True)
class MfuFormulas:
    model: str
    dims: tuple[str, ...]
    ranges: dict[str, tuple[int, int]]
    numerators: tuple[Numerator, ...]
    samples: int

    def to_dict(self) -> dict[str, Any]:
        exact = self.numerators[0]
        return {
            "format": FORMAT,
            "model": self.model,
            "dims": list(self.dims),
            "ranges": {dim: list(bounds) for dim, bounds in self.ranges.items()},
            "tokens": render(exact.tokens),
            "expression": exact.python(),
            "flops_per_step": {n.name: render(n.per_step) for n in self.numerators},
            "flops_per_token": {n.name: n.per_token_text() for n in self.numerators},
            "python": {n.name: n.python() for n in self.numerators},
            "by_reason": {
                n.name: {reason: render(poly) for reason, poly in n.by_reason.items()}
                for n in self.numerators
                if n.by_reason
            },
            "samples": self.samples,
        }


def mfu_formulas(entry: ModelEntry, root: Path) -> MfuFormulas:
    """The formulas of `entry` counted as a training step over its `curve` (see the module's docstring)."""
    dims = tuple(entry.curve)
    if not dims:
        raise CountingError(f"{entry.name}: give a range of the sequence length, e.g. --dim seq=64..8192")
    entry = dataclasses.replace(entry, training=True)
    count_at = entry_counter(entry, root)
    profiles = [profile for profile in PROFILES if not profile.inference_only]

    def sample(point: Point) -> dict[Hashable, int]:
        report = count_point(count_at, entry, dict(zip(dims, point)))
        tokens = facts_of(report).tokens
        if not tokens:
            raise CountingError(f"{entry.name}: no integer input (token ids) to count tokens; e.g. --input 1,seq:int64")
        series: dict[Hashable, int] = {EXACT: report.flops, TOKENS: tokens}
        for profile in profiles:
            explained = profile.apply(report)
            if explained.ours != report.flops:
                raise AssertionError(f"{profile.name}: ours {explained.ours} is not the count {report.flops}")
            series[profile.name] = explained.theirs
            for reason, difference in explained.by_reason().items():
                series[(profile.name, reason)] = difference
        return series

    try:
        found = fit(sample, dims, [entry.curve[dim] for dim in dims])
    except FitError as exc:
        raise CountingError(f"{entry.name}: {exc}") from None
    if found.piecewise or found.failing:
        raise CountingError(f"{entry.name}: the FLOPs are no single polynomial of {', '.join(dims)} on the range")
    tokens = found.polys[TOKENS]
    numerators = [_numerator(EXACT, found.polys[EXACT], tokens, {})]
    for profile in profiles:
        reasons = {
            key[1]: poly
            for key, poly in found.polys.items()
            if isinstance(key, tuple) and key[0] == profile.name and poly.terms
        }
        numerators.append(_numerator(profile.name, found.polys[profile.name], tokens, reasons))
    return MfuFormulas(entry.name, dims, dict(entry.curve), tuple(numerators), found.samples)


def _numerator(name: str, step: Polynomial, tokens: Polynomial, reasons: dict[str, Polynomial]) -> Numerator:
    return Numerator(name, step, _divided(step, tokens), tokens, reasons)


def _divided(step: Polynomial, tokens: Polynomial) -> Polynomial | None:
    """`step / tokens` where `tokens` is one monomial dividing every term of `step` (else None)."""
    if len(tokens.terms) != 1:
        return None
    [(exponents, coefficient)] = tokens.terms.items()
    terms = {}
    for term, value in step.terms.items():
        lowered = tuple(a - b for a, b in zip(term, exponents))
        if any(e < 0 for e in lowered):
            return None
        terms[lowered] = value / coefficient
    return Polynomial(step.dims, terms)
