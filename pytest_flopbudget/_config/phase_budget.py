"""Budgets per phase: `phases = { prefill = { flops = "30T" }, decode-mean = { flops = "15G" } }`.

A generation's total hides a costlier generated token behind a cheap prefill, and a training step's total hides a
backward regression behind its forward; a budget per phase gates each on its own. The phases a budget can name
are a generation's prefill, its mean decode step per generated token and its last (most expensive) decode step,
and a training step's forward and backward. Their ceilings are per-op metrics (FLOPs, MACs, bytes), parsed by
the same grammar as every other budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._metrics import METRICS, Metric

#: phase key -> how outputs name it.
PHASES = {
    "prefill": "prefill",
    "decode-mean": "decode mean per token",
    "decode-last": "last decode step",
    "forward": "forward",
    "backward": "backward",
}
#: The phases of a generation (`generate = N`) and of a training step.
GENERATION_PHASES = ("prefill", "decode-mean", "decode-last")
TRAINING_PHASES = ("forward", "backward")

#: Ceilings per phase: phase key -> metric -> limit (built by `parse_phase_budgets`).
PhaseLimits = Mapping[str, Mapping[Metric, Any]]


def parse_phase_budgets(value: Any, source: Location, source_of: Any = None) -> dict[str, dict[Metric, Any]]:
    """`{"decode-mean": {"flops": "15G"}, ...}` -> limits per phase, every problem reported with `source` (or
    `source_of(phase, key)`, the location of one value, where the caller knows it)."""
    from pytest_flopbudget._config.budget import parse_quantity

    where = source_of or (lambda phase, key: source)
    if not isinstance(value, Mapping):
        raise LocatedError([Problem(source, f"phases: expected a table of phases ({', '.join(PHASES)})")])
    problems: list[Problem] = []
    limits: dict[str, dict[Metric, Any]] = {}
    per_op = {metric.key: metric for metric in METRICS.per_op}
    for phase, budgets in value.items():
        if phase not in PHASES:
            problems.append(
                Problem(where(phase, None), f"phases: unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
            )
            continue
        if not isinstance(budgets, Mapping) or not budgets:
            problems.append(
                Problem(where(phase, None), f'phases.{phase}: expected a table such as {{ flops = "15G" }}')
            )
            continue
        for key, text in budgets.items():
            metric = per_op.get(str(key).replace("_", "-"))
            if metric is None:
                keys = ", ".join(per_op)
                problems.append(Problem(where(phase, key), f"phases.{phase}.{key}: a phase budget is one of {keys}"))
                continue
            try:
                limit = parse_quantity(text, str(metric), where(phase, key))
            except LocatedError as exc:
                problems.extend(exc.problems)
                continue
            limits.setdefault(phase, {})[limit.metric] = limit
    if problems:
        raise LocatedError(problems)
    return limits
