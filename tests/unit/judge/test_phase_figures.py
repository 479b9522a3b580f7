"""judge/phase_figures.py and the verdict on ceilings per phase: the reason names the phase."""

from __future__ import annotations

from fractions import Fraction

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.phase_budget import parse_phase_budgets
from pytest_flopbudget._judge.phase_figures import phase_figure
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, evaluate
from pytest_flopbudget._metrics import FLOPS, MACS
from pytest_flopbudget._report import LayerCost, Phase, PhaseTotals, Report


def generation(decode: list[int]) -> Report:
    phases = [Phase("prefill", {FLOPS: 1000})] + [Phase(f"decode {k + 1}", {FLOPS: f}) for k, f in enumerate(decode)]
    total = sum(p.flops for p in phases)
    layer = LayerCost()
    layer.add_op("aten.mm", {FLOPS: total})
    return Report(layers={"l": layer}, forward=PhaseTotals({FLOPS: total}), phases=phases)


def test_the_figures_of_each_phase() -> None:
    report = generation([10, 11, 13])
    assert phase_figure(report, "prefill", FLOPS) == 1000
    assert phase_figure(report, "decode-mean", FLOPS) == Fraction(34, 3)
    assert phase_figure(report, "decode-last", FLOPS) == 13
    assert phase_figure(report, "forward", FLOPS) is None
    training = Report(training=True, forward=PhaseTotals({MACS: 5}), backward=PhaseTotals({MACS: 9}))
    assert (phase_figure(training, "forward", MACS), phase_figure(training, "backward", MACS)) == (5, 9)
    assert phase_figure(training, "decode-mean", MACS) is None


def judged(report: Report, phases: dict[str, dict[str, str]]):  # type: ignore[no-untyped-def]
    return evaluate(Measurement("chat", report, Budget(phases=parse_phase_budgets(phases, Location()))))


def test_a_costlier_mean_decode_step_fails_and_names_the_phase() -> None:
    verdict = judged(generation([10, 11, 13]), {"prefill": {"flops": "1000"}, "decode-mean": {"flops": "11"}})
    assert [f.message for f in verdict.violations] == ["decode mean per token: 12 FLOPs > budget 11 FLOPs (+9.1%)"]
    assert verdict.violations[0].kind == FindingKind.CEILING and verdict.violations[0].metric == FLOPS
    # exact: a mean of 34/3 is over a budget of 11 even though it rounds to 11
    assert not judged(generation([10, 11, 13]), {"decode-mean": {"flops": "12"}}).violations


def test_a_phase_the_count_does_not_have_cannot_pass() -> None:
    verdict = judged(generation([]), {"decode-last": {"flops": "1G"}})
    assert verdict.violations[0].kind == FindingKind.NOT_MEASURED
    assert verdict.violations[0].message.startswith("last decode step: no such phase")


def test_budget_use_counts_the_phase_ceilings() -> None:
    verdict = judged(generation([10, 11, 13]), {"prefill": {"flops": "2000"}, "decode-mean": {"flops": "17"}})
    assert verdict.highest_usage() == ("decode-mean flops", float(Fraction(34, 51)))  # 66.7% beats the prefill's 50%
    assert judged(generation([]), {"decode-mean": {"flops": "1"}}).highest_usage() is None  # no such phase
