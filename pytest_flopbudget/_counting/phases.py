"""A generation's decode steps from a few counted ones: each step's cost is linear in its cache length.

Decode step k (the cached forward that yields token k + 1) differs from step k + 1 only in the length of the cache
it attends over, so every figure of it (each op's calls and metrics in each layer, its skipped ops, its peak
memory) is a polynomial of degree one in k. Counting all N - 1 steps would cost N - 1 forwards; instead two steps
fix the line (`FIT`), further counted steps that the line did not use check it exactly (as `curve/` checks a
fit off its lattice), and the rest are derived. A line that a check refutes is never used: the caller counts
every step instead.

Framework-free: it reads and builds `Tally`s, which both backends fill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._metrics import METRICS, by_name
from pytest_flopbudget._report import PREFILL, EstimatedOp, LayerCost, Phase, SkippedOp, decode_step_name

#: The decode steps whose costs fix each line.
FIT = (1, 2)

#: One flat figure of a tally: ("op", path, op, metric|"calls"), ("skip", path, op), ("skipped", op),
#: ("estimated", op) or ("phase", metric).
Key = tuple[str, ...]


@dataclass
class CountedPhase:
    """What one counted phase tallied, and its peak of live tensor bytes (None when not measured)."""

    tally: Tally
    peak_memory: int | None = None


class NotLinear(Exception):
    """A counted step the line did not use disagrees with it: the steps must all be counted."""


def flatten(tally: Tally) -> dict[Key, int]:
    """Every figure of `tally` under its own key (what a line is fitted to, figure by figure)."""
    flat: dict[Key, int] = {}
    for path, layer in tally.layers.items():
        for op, cost in layer.ops.items():
            flat["op", path, op, "calls"] = cost.calls
            for metric, value in cost.values.items():
                flat["op", path, op, metric] = value
        for op, calls in layer.skipped.items():
            flat["skip", path, op] = calls
    for op, skipped in tally.skipped.items():
        flat["skipped", op] = skipped.calls
    for op, estimated in tally.estimated.items():
        flat["estimated", op] = estimated.calls
    for metric, value in tally.forward.values.items():
        flat["phase", metric] = value
    return flat


def decode_line(
    counted: Mapping[int, CountedPhase], checks: Sequence[int]
) -> tuple[dict[Key, tuple[int, int]], tuple[int, int] | None]:
    """Each figure's line `value(k) = start + slope * (k - 1)` through the steps `FIT`, verified exactly at every
    step of `checks`; the peak's line too, or None where a step's peak was not measured or is off its line (a
    peak is a maximum: it may move within the step). Raises `NotLinear` when a figure is off its line."""
    first, second = (flatten(counted[step].tally) for step in FIT)
    line = {key: (first.get(key, 0), second.get(key, 0) - first.get(key, 0)) for key in {*first, *second}}
    for step in checks:
        seen = flatten(counted[step].tally)
        for key in {*line, *seen}:
            start, slope = line.get(key, (0, 0))
            if seen.get(key, 0) != start + slope * (step - 1):
                raise NotLinear(f"{'/'.join(key)} at decode step {step}")
    peaks = [counted[step].peak_memory for step in (*FIT, *checks)]
    if any(peak is None for peak in peaks):
        return line, None
    start, after = (counted[step].peak_memory or 0 for step in FIT)
    peak_line = (start, after - start)
    if any((counted[step].peak_memory or 0) != start + peak_line[1] * (step - 1) for step in checks):
        return line, None
    return line, peak_line


def generation(
    prefill: CountedPhase,
    counted: Mapping[int, CountedPhase],
    steps: int,
    line: Mapping[Key, tuple[int, int]] | None = None,
    peak_line: tuple[int, int] | None = None,
) -> tuple[Tally, list[Phase]]:
    """The whole generation's tally (the prefill and decode steps 1 .. `steps`) and its phases. A step in
    `counted` is taken as counted; every other one is read off `line` (required when a step is missing)."""
    total = Tally()
    total.merge(prefill.tally)
    phases = [Phase(PREFILL, prefill.tally.forward.values, prefill.peak_memory)]
    derived = [step for step in range(1, steps + 1) if step not in counted]
    for step in range(1, steps + 1):
        if step in counted:
            total.merge(counted[step].tally)
            phases.append(Phase(decode_step_name(step), counted[step].tally.forward.values, counted[step].peak_memory))
            continue
        assert line is not None, "a step was neither counted nor derivable"
        values = {metric: _at(line.get(("phase", metric), (0, 0)), step) for metric in METRICS.per_op}
        peak = None if peak_line is None else _at(peak_line, step)
        phases.append(Phase(decode_step_name(step), values, peak))
    if derived:
        assert line is not None
        _add_derived(total, line, derived, counted)
    return total, phases


def _at(line: tuple[int, int], step: int) -> int:
    start, slope = line
    return start + slope * (step - 1)


def _add_derived(
    total: Tally, line: Mapping[Key, tuple[int, int]], steps: Sequence[int], counted: Mapping[int, CountedPhase]
) -> None:
    """Add the figures of every step in `steps` (read off `line`, summed in closed form) to `total`."""
    times = len(steps)
    offsets = sum(step - 1 for step in steps)
    summed = {key: start * times + slope * offsets for key, (start, slope) in line.items()}
    reasons = {op: entry.reason for phase in counted.values() for op, entry in phase.tally.skipped.items()}
    rules = {op: entry.rule for phase in counted.values() for op, entry in phase.tally.estimated.items()}
    layers_of: dict[tuple[str, str], list[str]] = {}
    for phase in counted.values():
        for kind, entries in (("skipped", phase.tally.skipped), ("estimated", phase.tally.estimated)):
            for op, listed in entries.items():
                layers_of.setdefault((kind, op), []).extend(listed.layers)
    ops: dict[tuple[str, str], dict[str, int]] = {}
    for key, value in summed.items():
        if key[0] == "op":
            ops.setdefault((key[1], key[2]), {})[key[3]] = value
    for (path, op), figures in ops.items():
        calls = figures.pop("calls", 0)
        total.add_values(path, op, {by_name(metric): value for metric, value in figures.items()}, calls)
    # add_values added each op's figures to the forward totals already; the phase keys only name the steps' totals
    for key, value in summed.items():
        if key[0] == "skip":
            total.layers.setdefault(key[1], LayerCost()).add_skipped(key[2], value)
        elif key[0] == "skipped" and value:
            entry = total.skipped.setdefault(key[1], SkippedOp(reason=reasons.get(key[1], "")))
            entry.calls += value
            _extend(entry.layers, layers_of.get(("skipped", key[1]), []))
        elif key[0] == "estimated" and value:
            estimated = total.estimated.setdefault(key[1], EstimatedOp(rule=rules.get(key[1], "")))
            estimated.calls += value
            _extend(estimated.layers, layers_of.get(("estimated", key[1]), []))


def _extend(listed: list[str], more: Sequence[str]) -> None:
    for path in more:
        if path not in listed:
            listed.append(path)
