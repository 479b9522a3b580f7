"""Budgets on the curve judged on a formula: the degree names its term and layers, ceilings at points, and every
way a formula cannot answer fails (never a silent pass)."""

from __future__ import annotations

from pytest_flopbudget._config.budget import Budget, DegreeLimit, PointLimits, parse_quantity
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.polynomial import parse
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import ERROR, WARNING, FindingKind, Measurement, evaluate
from pytest_flopbudget._metrics import FLOPS, MACS, PARAMS, PEAK_MEMORY, Metric
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report

DIMS = ("seq",)
SOURCE = Location("/p/pyproject.toml", 7, "tool.flopbudget.models.gpt.max-degree.seq")


def formula(attn: str = "140*seq**2", mlp: str = "16000*seq", holds: Holds | None = None) -> Formula:
    """Two blocks, each an attention and an MLP, and a head: the totals are the sums of the layers."""
    layers = {
        f"h.{i}.{name}": {FLOPS: parse(text, DIMS), MACS: parse(text, DIMS) if name == "mlp" else parse("0", DIMS)}
        for i in range(2)
        for name, text in (("attn", attn), ("mlp", mlp))
    }
    layers["head"] = {FLOPS: parse("4096*seq", DIMS), PARAMS: parse("4160", DIMS)}
    totals = {}
    for metric in (FLOPS, MACS, PARAMS):
        total = parse("0", DIMS)
        for polys in layers.values():
            total = total + polys.get(metric, parse("0", DIMS))
        totals[metric] = total
    return Formula(
        dims=DIMS,
        totals=totals,
        layers=layers,
        holds=holds or Holds(step={"seq": 1}, ranges={"seq": (16, 512)}),
        point={"seq": 128},
    )


def report() -> Report:
    return Report(layers={"": LayerCost(flops=10, macs=5)}, forward=PhaseTotals(flops=10, macs=5))


def measure(budget: Budget, found: Formula | None) -> Measurement:
    origin = Location("/p/pyproject.toml", 1, "tool.flopbudget.models.gpt")
    return Measurement("gpt", report(), budget, origin, formula=found)


def degrees(degree: int, *metrics: Metric) -> Budget:
    return Budget(degrees=tuple(DegreeLimit(m, "seq", degree, SOURCE) for m in metrics or (FLOPS,)))


def at(seq: int, flops: str) -> Budget:
    where = Location("/p/pyproject.toml", 9, "tool.flopbudget.models.gpt.at.0")
    return Budget(at=(PointLimits({"seq": seq}, {FLOPS: parse_quantity(flops, "flops", where)}, where),))


def test_a_quadratic_cost_over_a_linear_degree_names_the_term_and_the_attention_layers() -> None:
    verdict = evaluate(measure(degrees(1), formula()))
    (finding,) = verdict.violations
    assert finding.kind == FindingKind.DEGREE and finding.severity == ERROR
    assert finding.message == ("FLOPs grow as seq**2 (max-degree seq = 1): seq**2 term 280*seq**2 from h.{0..1}.attn")
    assert (finding.actual, finding.limit, finding.source) == (2, 1, SOURCE)
    assert reason(verdict).startswith("gpt: FLOPs grow as seq**2")


def test_a_finding_about_a_degree_carries_its_dim_as_a_field() -> None:
    (over,) = evaluate(measure(degrees(1), formula())).violations
    assert over.kind == FindingKind.DEGREE and over.dim == "seq"
    holds = Holds(step={"seq": 1}, ranges={"seq": (16, 300)}, piecewise=True, broken_at={"seq": 301})
    (unknown,) = evaluate(measure(degrees(2), formula(holds=holds))).violations
    assert unknown.kind == FindingKind.NO_FORMULA and unknown.dim == "seq"
    # a finding about no dim has none
    budget = Budget(limits={FLOPS: parse_quantity(1, "flops", SOURCE)})
    assert [f.dim for f in evaluate(measure(budget, formula())).violations] == [None]


def test_a_degree_within_its_budget_passes() -> None:
    assert evaluate(measure(degrees(2, FLOPS, MACS, PARAMS), formula())).passed
    assert evaluate(measure(degrees(1, FLOPS, MACS), formula(attn="300*seq"))).passed


def test_a_degree_of_zero_caps_a_cost_that_must_not_grow_at_all() -> None:
    verdict = evaluate(measure(degrees(0, PARAMS, MACS), formula()))
    assert [f.metric for f in verdict.violations] == [MACS]
    assert "MACs grow as seq (max-degree seq = 0): seq term 32000*seq from h.{0..1}.mlp" in reason(verdict)


def test_the_degree_violation_comes_before_a_ceiling_in_the_reason() -> None:
    budget = Budget(limits={FLOPS: parse_quantity(1, "flops", SOURCE)}, degrees=(DegreeLimit(FLOPS, "seq", 1, SOURCE),))
    verdict = evaluate(measure(budget, formula()))
    assert [f.kind for f in verdict.violations] == [FindingKind.DEGREE, FindingKind.CEILING]
    assert reason(verdict).endswith("(+1 more: FLOPs)")


def test_a_piecewise_formula_fails_a_degree_budget_closed() -> None:
    holds = Holds(step={"seq": 1}, ranges={"seq": (16, 300)}, piecewise=True, broken_at={"seq": 301})
    verdict = evaluate(measure(degrees(2), formula(holds=holds)))
    (finding,) = verdict.violations
    assert finding.kind == FindingKind.NO_FORMULA
    assert finding.message.startswith("FLOPs: the formula is not exact on the curve (piecewise: exact on seq in")
    assert finding.message.endswith("so max-degree seq = 2 cannot be checked")


def test_an_inexact_metric_fails_its_degree_budget_closed() -> None:
    holds = Holds(step={"seq": 1}, ranges={"seq": (16, 512)}, inexact=(PEAK_MEMORY,))
    found = formula(holds=holds)
    found.totals[PEAK_MEMORY] = parse("1424*seq + 175616", DIMS)
    verdict = evaluate(measure(degrees(1, PEAK_MEMORY), found))
    assert [f.kind for f in verdict.violations] == [FindingKind.NO_FORMULA]
    assert "not exact for peak memory" in verdict.violations[0].message


def test_a_budget_on_the_curve_without_a_formula_fails() -> None:
    verdict = evaluate(measure(degrees(1), None))
    (finding,) = verdict.violations
    assert finding.kind == FindingKind.NO_FORMULA and "set curve = { dim = [low, high] }" in finding.message


def test_a_ceiling_at_a_point_is_read_off_the_formula() -> None:
    # 280*512**2 + 2*16000*512 + 4096*512 = 91,881,472
    assert evaluate(measure(at(512, "91881472"), formula())).passed
    verdict = evaluate(measure(at(512, "91881471"), formula()))
    (finding,) = verdict.violations
    assert finding.kind == FindingKind.POINT_CEILING
    assert (finding.actual, finding.limit) == (91_881_472, 91_881_471)
    assert finding.message.startswith("FLOPs at seq=512: 91.881472 MFLOPs > budget 91.881471 MFLOPs")


def test_a_point_where_the_formula_does_not_hold_fails_closed() -> None:
    holds = Holds(step={"seq": 32}, ranges={"seq": (32, 512)})
    verdict = evaluate(measure(at(100, "1T"), formula(holds=holds)))
    (finding,) = verdict.violations
    assert finding.kind == FindingKind.NO_FORMULA
    assert finding.message.startswith("at seq=100: the formula does not hold there (exact at seq multiple of 32")
    assert finding.message.endswith("so the ceiling 1T cannot be checked")


def test_changed_terms_against_the_baseline_formula_are_a_warning_naming_them() -> None:
    base = formula()
    now = formula(attn="280*seq**2")
    verdict = evaluate(measure(Budget(), now), baseline_formula=base)
    assert verdict.passed
    (finding,) = [f for f in verdict.findings if f.kind == FindingKind.FORMULA]
    assert finding.severity == WARNING and finding.metric == FLOPS
    assert finding.message == "FLOPs formula changed: seq**2 term of h.{0..1}.attn +100.0%"


def test_a_model_without_a_formula_or_a_budget_on_the_curve_judges_as_before() -> None:
    assert evaluate(measure(Budget(), None)).findings == []
