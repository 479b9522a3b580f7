"""judge/phase_growth.py: max-increase judged per budgeted phase, so a costlier generated token cannot hide behind
a total that barely moved."""

from __future__ import annotations

from pytest_flopbudget._config.budget import Budget, parse_increase
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.phase_budget import parse_phase_budgets
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, evaluate
from pytest_flopbudget._metrics import FLOPS, MACS
from pytest_flopbudget._report import LayerCost, Phase, PhaseTotals, Report

INCREASE = Location("/p/pyproject.toml", 12, "models.chat.max-increase")


def generation(prefill: int, decode: list[int]) -> Report:
    phases = [Phase("prefill", {FLOPS: prefill})] + [Phase(f"decode {k + 1}", {FLOPS: f}) for k, f in enumerate(decode)]
    total = sum(p.flops for p in phases)
    layer = LayerCost()
    layer.add_op("aten.mm", {FLOPS: total})
    return Report(layers={"l": layer}, forward=PhaseTotals({FLOPS: total}), phases=phases)


def budget(phases: dict[str, dict[str, str]], increase: str | None = "10%") -> Budget:
    return Budget(
        max_increase=parse_increase(increase, INCREASE) if increase else None,
        phases=parse_phase_budgets(phases, Location()),
    )


def judged(report: Report, baseline: Report | None, phases: dict[str, dict[str, str]], increase: str | None = "10%"):  # type: ignore[no-untyped-def]
    return evaluate(Measurement("chat", report, budget(phases, increase)), baseline)


BASE = generation(10_000, [100, 100, 100])
#: Every decode step +30%: the total grows 0.9%, within max-increase 10%.
NOW = generation(10_000, [130, 130, 130])


def test_a_mean_decode_step_grown_past_max_increase_fails_naming_the_phase() -> None:
    verdict = judged(NOW, BASE, {"decode-mean": {"flops": "1G"}})
    assert [f.message for f in verdict.violations] == [
        "decode mean per token +30.0% > max-increase 10% (130 FLOPs, baseline 100 FLOPs)"
    ]
    finding = verdict.violations[0]
    assert finding.kind == FindingKind.INCREASE and finding.metric == FLOPS
    assert (finding.actual, finding.baseline, finding.limit, finding.source) == (130, 100, 110, INCREASE)


def test_growth_within_max_increase_and_unbudgeted_phases_pass() -> None:
    assert judged(generation(10_000, [110, 110, 110]), BASE, {"decode-mean": {"flops": "1G"}}).passed  # exactly 10%
    assert judged(NOW, BASE, {"prefill": {"flops": "1G"}}).passed  # only budgeted phases are judged per phase
    assert judged(NOW, BASE, {"decode-mean": {"macs": "1G"}}).passed  # and only the metrics budgeted there


def test_nothing_to_compare_is_not_judged() -> None:
    assert judged(NOW, None, {"decode-mean": {"flops": "1G"}}).passed  # no baseline
    assert judged(NOW, BASE, {"decode-mean": {"flops": "1G"}}, increase=None).passed  # no max-increase
    flat = generation(10_390, [])  # a baseline from before generate = N: it has no decode steps
    assert judged(NOW, flat, {"decode-mean": {"flops": "1G"}}).passed


def test_training_phases_are_judged_too() -> None:
    base = Report(training=True, forward=PhaseTotals({MACS: 100}), backward=PhaseTotals({MACS: 200}))
    now = Report(training=True, forward=PhaseTotals({MACS: 80}), backward=PhaseTotals({MACS: 240}))
    verdict = judged(now, base, {"forward": {"macs": "1G"}, "backward": {"macs": "1G"}})
    assert [f.message for f in verdict.violations] == [
        "backward +20.0% > max-increase 10% (240 MACs, baseline 200 MACs)"
    ]
