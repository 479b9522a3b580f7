"""render/phase_diff.py: the phases base vs now, shown only when a phase moved."""

from __future__ import annotations

from pytest_flopbudget._metrics import FLOPS, MACS
from pytest_flopbudget._render.phase_diff import phase_diff, phase_diffs
from pytest_flopbudget._report import Phase, PhaseTotals, Report


def generation(prefill: int, decode: list[int]) -> Report:
    phases = [Phase("prefill", {FLOPS: prefill})] + [Phase(f"decode {k + 1}", {FLOPS: f}) for k, f in enumerate(decode)]
    return Report(forward=PhaseTotals({FLOPS: prefill + sum(decode)}), phases=phases)


def test_a_generation_shows_prefill_first_last_and_mean() -> None:
    lines = phase_diff(generation(10_000, [100, 100, 101]), generation(10_000, [130, 130, 131]), FLOPS, "b.json")
    assert lines == [
        "FLOPs per phase, against b.json:",
        "  phase                  baseline    now         delta",
        "  prefill                   10.0k  10.0k     0 (+0.0%)",
        "  first decode step           100    130  +30 (+30.0%)",
        "  last decode step            101    131  +30 (+29.7%)",
        "  decode mean per token       100    130  +30 (+29.9%)",
    ]


def test_nothing_when_no_phase_moved_or_there_is_nothing_to_compare() -> None:
    assert phase_diff(generation(10, [1, 2]), generation(10, [1, 2]), FLOPS, "b") == []
    assert (
        phase_diff(Report(forward=PhaseTotals({FLOPS: 10})), Report(forward=PhaseTotals({FLOPS: 12})), FLOPS, "b") == []
    )
    # a baseline from before generate = N: only the phases both counts have are compared (none here)
    assert phase_diff(Report(forward=PhaseTotals({FLOPS: 10})), generation(10, [2]), FLOPS, "b") == []


def test_training_shows_forward_and_backward() -> None:
    base = Report(training=True, forward=PhaseTotals({MACS: 100}), backward=PhaseTotals({MACS: 200}))
    now = Report(training=True, forward=PhaseTotals({MACS: 100}), backward=PhaseTotals({MACS: 260}))
    lines = phase_diffs(base, now, [FLOPS, MACS], "b")
    assert lines[0] == "MACs per phase, against b:"
    assert lines[2:] == ["  forward        100  100     0 (+0.0%)", "  backward       200  260  +60 (+30.0%)"]
