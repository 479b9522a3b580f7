"""The one-line failure reason every output starts with: the documented shape, the worst violation first."""

from __future__ import annotations

from test_verdict import REPORT, make_report, measure

from pytest_flopbudget._judge.reason import reason, reason_clause
from pytest_flopbudget._judge.verdict import evaluate


def test_reason_line_matches_the_documented_shape() -> None:
    """`resnet50: 8.52 GFLOPs > budget 8.30 GFLOPs (+2.7%); baseline 8.18 GFLOPs`."""
    now = make_report({"layer4": (8_520_000_000, 4_000_000_000, 25_000_000)})
    baseline = make_report({"layer4": (8_180_000_000, 4_000_000_000, 25_000_000)})
    verdict = evaluate(measure(now, "resnet50", flops="8.3G"), baseline)
    assert reason(verdict) == "resnet50: 8.52 GFLOPs > budget 8.30 GFLOPs (+2.7%); baseline 8.18 GFLOPs"
    assert evaluate(measure(now, "resnet50", flops="8.3G")).violations[0].message == (
        "8.52 GFLOPs > budget 8.30 GFLOPs (+2.7%)"
    )


def test_reason_is_one_short_line_worst_violation_first() -> None:
    # FLOPs are 20% over, params 1.7%: the worst first, the other named, not repeated
    verdict = evaluate(measure(REPORT, flops=1000, params="59"))
    text = reason(verdict)
    assert "\n" not in text
    assert text == "m: 1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%) (+1 more: params)"


def test_the_clause_is_the_reason_without_the_models_name() -> None:
    # a front end that names the model its own way (a marker test's line) takes the clause, never cuts the reason
    verdict = evaluate(measure(REPORT, "m: x", flops=1000, params="59"))
    assert reason_clause(verdict) == "1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%) (+1 more: params)"
    assert reason(verdict) == f"m: x: {reason_clause(verdict)}"
    assert reason_clause(evaluate(measure(REPORT, skipped=2))) == "within budget"
