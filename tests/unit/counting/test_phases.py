"""counting/phases.py: decode steps read off the line two counted steps fix, checked at steps it did not use."""

from __future__ import annotations

import pytest

from pytest_flopbudget._counting.phases import CountedPhase, NotLinear, decode_line, flatten, generation
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._metrics import FLOPS, MACS


def step(context: int, *, skipped: int = 1) -> CountedPhase:
    """A decode step over `context` cached tokens: a constant projection and attention growing with the cache."""
    tally = Tally()
    tally.add_values("proj", "aten.mm", {FLOPS: 20, MACS: 10})
    tally.add_values("attn", "aten.bmm", {FLOPS: 2 * context, MACS: context}, calls=2)
    tally.skip("", "aten.isin", "no formula", calls=skipped)
    return CountedPhase(tally, peak_memory=1000 + 8 * context)


def prefill() -> CountedPhase:
    tally = Tally()
    tally.add_values("proj", "aten.mm", {FLOPS: 200, MACS: 100})
    return CountedPhase(tally, peak_memory=5000)


PROMPT = 10


def test_steps_off_the_line_sum_to_counting_every_one() -> None:
    steps = 40
    everything = {k: step(PROMPT + k - 1) for k in range(1, steps + 1)}
    counted = {k: everything[k] for k in (1, 2, 3, steps - 1, steps)}
    line, peak_line = decode_line(counted, (3, steps - 1))
    fast, phases = generation(prefill(), counted, steps, line, peak_line)
    slow, slow_phases = generation(prefill(), everything, steps)
    assert flatten(fast) == flatten(slow)
    assert fast.layers == slow.layers and fast.skipped == slow.skipped
    assert [(p.name, p.values, p.peak_memory) for p in phases] == [
        (p.name, p.values, p.peak_memory) for p in slow_phases
    ]
    assert phases[0].name == "prefill" and phases[-1].name == f"decode {steps}"


def test_a_figure_off_the_line_is_refused() -> None:
    counted = {1: step(PROMPT), 2: step(PROMPT + 1), 3: step(PROMPT + 2, skipped=2)}
    with pytest.raises(NotLinear, match=r"aten\.isin"):
        decode_line(counted, (3,))


def test_a_peak_off_its_line_or_not_measured_is_not_derived() -> None:
    counted = {1: step(PROMPT), 2: step(PROMPT + 1), 3: step(PROMPT + 2)}
    counted[3].peak_memory = 1
    assert decode_line(counted, (3,))[1] is None
    counted[3].peak_memory = None
    line, peak_line = decode_line(counted, (3,))
    assert peak_line is None
    _, phases = generation(prefill(), counted, 5, line, peak_line)
    assert [p.peak_memory for p in phases[4:]] == [None, None]
