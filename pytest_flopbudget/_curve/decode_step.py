"""A generation's decode step as an exact formula of its context length, read off the Report's phases.

Decode step k runs with `context` = prompt + k - 1 tokens in the cache (the prompt's, then one per earlier step;
the length the decode-step protocol's `decode-inputs(model, context)` is called with), and every figure of it is
linear in k, so in `context` (counting/phases.py). Each metric's formula is the line through decode 1 and 2,
checked exactly at every other decode step the Report has: where the engine counted every step (8 tokens or
fewer, or its fallback) that is every counted step; above, the steps it did not count were read off this same
line, and its own counted checks (3 and N-2) and the last step are among those checked here.

The last step may stand apart: a Hugging Face `generate` prepares the next step's inputs after each forward (ops
that belong to the step that ran), and after the last forward there is no next step, so the last step can miss
the others' line by that preparation (the tiny Llama's two 16-byte `clone`s). That is said with the formula
(`last_off`), never folded into it. Three decode steps at least are needed (two fix the line, one more checks it,
the last only where it is on the line); a metric whose steps are not on one line gets no formula, only the first
step that misses it: never a formula that a figure of the Report contradicts.

Written with the curve's polynomial conventions (`8192*context + 6476005376`, which sympy parses), so it reads like
`flopbudget count --dim`'s formulas; derived from the phases, never stored in a baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_flopbudget._curve.polynomial import Polynomial, parse
from pytest_flopbudget._json_fields import a_str, an_object, field_of, show
from pytest_flopbudget._metrics import METRICS, Metric, by_name
from pytest_flopbudget._report import Report

#: The formula's variable: the tokens in the cache when a decode step runs.
CONTEXT = "context"
#: What `CONTEXT` means, as the JSON states it.
CONTEXT_MEANING = "the tokens in the cache when a decode step runs: prompt + k - 1 at decode step k"


@dataclass(frozen=True)
class DecodeFormula:
    """Each metric of one decode step as a polynomial in `context` (`formulas`), exact at every decode step of the
    generation (`context` in [`prompt`, `prompt` + `steps` - 1]) but where `last_off[metric]` gives the last
    step's difference from it; `missing[metric]` says why a metric has none (all of them, with `prompt` None,
    where the prompt's length is not known)."""

    prompt: int | None
    steps: int
    formulas: dict[Metric, Polynomial] = field(default_factory=dict)
    last_off: dict[Metric, int] = field(default_factory=dict)
    missing: dict[Metric, str] = field(default_factory=dict)

    @property
    def contexts(self) -> tuple[int, int] | None:
        """The first and the last decode step's context: where the formulas were checked."""
        return None if self.prompt is None else (self.prompt, self.prompt + self.steps - 1)

    def describe(self) -> str:
        """`exact on context in [2048, 2302]`, as a curve's `Holds.describe` words it."""
        if self.contexts is None:
            return f"{self.steps} decode steps, the prompt's length not known"
        low, high = self.contexts
        return f"exact on {CONTEXT} in [{low}, {high}]"

    def to_dict(self) -> dict[str, Any]:
        """The `"decode_formula"` object of `count --format json`: `formula` maps each metric to a string sympy
        parses, `last_off` a metric whose last step is off it to the difference, `no_formula` each metric without
        one to the reason."""
        data: dict[str, Any] = {
            "formula": {str(metric): str(poly) for metric, poly in self.formulas.items()},
            "variable": CONTEXT,
            "context": CONTEXT_MEANING,
            "prompt": self.prompt,
            "steps": self.steps,
            "text": self.describe(),
        }
        if self.contexts is not None:
            data["range"] = list(self.contexts)
        if self.last_off:
            data["last_off"] = {str(metric): off for metric, off in self.last_off.items()}
        if self.missing:
            data["no_formula"] = {str(metric): reason for metric, reason in self.missing.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecodeFormula:
        """Inverse of `to_dict` (also reads the object out of a count's whole JSON); raises `ValueError`."""
        if "decode_formula" in data:
            data = an_object(data["decode_formula"], "decode_formula")
        prompt = data.get("prompt")
        formulas = an_object(field_of(data, "formula", ""), "formula")
        last_off = an_object(data.get("last_off", {}), "last_off")
        missing = an_object(data.get("no_formula", {}), "no_formula")
        return cls(
            prompt=None if prompt is None else _integer(prompt, "prompt", minimum=0),
            steps=_integer(field_of(data, "steps", ""), "steps", minimum=1),
            formulas={_metric(m, "formula"): parse(a_str(t, f"formula.{m}"), (CONTEXT,)) for m, t in formulas.items()},
            last_off={_metric(m, "last_off"): _integer(v, f"last_off.{m}") for m, v in last_off.items()},
            missing={_metric(m, "no_formula"): a_str(t, f"no_formula.{m}") for m, t in missing.items()},
        )


def decode_formula(report: Report) -> DecodeFormula | None:
    """The decode step's formula per metric of a generation's `report`; None when it has no decode step."""
    steps = report.phases[1:]
    if not steps:
        return None
    prompt = prompt_length(report.inputs)
    metrics = [metric for metric in METRICS.per_op if report.measures(metric)]
    shown = [m for m in metrics if not m.omit_zero or any(step.get(m) for step in steps)]
    if prompt is None:
        why = "the prompt's length is not known (the first input is not the prompt's token ids)"
        return DecodeFormula(None, len(steps), missing=dict.fromkeys(shown, why))
    found = DecodeFormula(prompt, len(steps))
    for metric in shown:
        line = _line([step.get(metric) for step in steps], metric)
        if isinstance(line, str):
            found.missing[metric] = line
            continue
        start, slope, off = line  # decode k: start + slope * (k - 1) = slope * context + start - slope * prompt
        found.formulas[metric] = Polynomial((CONTEXT,), {(1,): slope, (0,): start - slope * prompt})
        if off:
            found.last_off[metric] = off
    return found


def prompt_length(inputs: Sequence[Any]) -> int | None:
    """The prompt's length: the last dim of the first input, when that is token ids (integers, as `generate` takes
    them); None otherwise (embeddings, say), rather than a length read off the wrong axis."""
    first = inputs[0] if inputs else None
    shape = first.get("shape") if isinstance(first, Mapping) else None
    dtype = first.get("dtype") if isinstance(first, Mapping) else None
    if not isinstance(shape, list) or not shape or type(shape[-1]) is not int:
        return None
    if not isinstance(dtype, str) or not dtype.startswith(("int", "uint")):
        return None
    return int(shape[-1])


def _line(values: Sequence[int], metric: Metric) -> tuple[int, int, int] | str:
    """(value at decode 1, growth per step, the last step's difference from the line) through decode 1 and 2,
    checked at every other step; or why there is no line."""
    if len(values) < 3:
        return f"{len(values)} decode step{'s' if len(values) > 1 else ''}: two fix a line and a third must check it"
    start, slope = values[0], values[1] - values[0]
    misses = [k for k, value in enumerate(values, start=1) if value != start + slope * (k - 1)]
    last = len(values)
    if not misses:
        return start, slope, 0
    if misses == [last] and last > 3:
        return start, slope, values[-1] - (start + slope * (last - 1))
    k = misses[0]
    if misses == [last]:
        return (
            f"only the last step (decode {k}) could check the line through decode 1 and 2, and it stands apart "
            f"({values[k - 1]:,} {metric.label}, the line gives {start + slope * (k - 1):,})"
        )
    return (
        f"the decode steps are not on one line: decode {k} has {values[k - 1]:,} {metric.label}, "
        f"the line through decode 1 and 2 gives {start + slope * (k - 1):,}"
    )


def _integer(value: object, where: str, minimum: int | None = None) -> int:
    if type(value) is not int or (minimum is not None and value < minimum):
        at_least = "" if minimum is None else f" of at least {minimum}"
        raise ValueError(f"{where} must be an integer{at_least}, got {show(value)}")
    return value


def _metric(name: str, where: str) -> Metric:
    if name not in METRICS:
        raise ValueError(f"{where} has an unknown metric {name!r}")
    return by_name(name)
