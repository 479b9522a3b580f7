"""What the outputs say about a curve model: its formula in the details, the max-degree edit that accepts a degree,
the annotation's title, and the JSON results' formula keys (only for a model with a curve)."""

from __future__ import annotations

from pytest_flopbudget._config.budget import Budget, DegreeLimit
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.polynomial import parse
from pytest_flopbudget._judge.verdict import Measurement, evaluate
from pytest_flopbudget._metrics import FLOPS, MACS
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import annotations, json_report
from pytest_flopbudget._reporters.curve_lines import formula_lines
from pytest_flopbudget._reporters.terminal import finding_edit

DIMS = ("seq",)
SOURCE = Location("/p/pyproject.toml", 7, "tool.flopbudget.models.gpt.max-degree.seq", ("max-degree", "seq"))


def formula(attn: str) -> Formula:
    total = parse(f"{attn} + 100*seq", DIMS)
    return Formula(
        dims=DIMS,
        totals={FLOPS: total, MACS: parse("0", DIMS)},
        layers={"h.0.attn": {FLOPS: parse(attn, DIMS)}, "head": {FLOPS: parse("100*seq", DIMS)}},
        holds=Holds(step={"seq": 1}, ranges={"seq": (16, 512)}),
        point={"seq": 128},
    )


def verdict(found: Formula | None, base: Formula | None = None):  # type: ignore[no-untyped-def]
    report = Report(layers={"": LayerCost(flops=10)}, forward=PhaseTotals(flops=10))
    budget = Budget(degrees=(DegreeLimit(FLOPS, "seq", 1, SOURCE),)) if found is not None else Budget()
    measurement = Measurement("gpt", report, budget, Location("/p/pyproject.toml", 1, "gpt"), formula=found)
    return evaluate(measurement, baseline_formula=base)


def test_the_details_print_the_formula_and_the_baseline_formula_where_it_differs() -> None:
    lines = formula_lines(verdict(formula("2*seq**2"), formula("seq**2")))
    assert lines == [
        "formula in seq, exact on seq in [16, 512]:",
        "  FLOPs  2*seq**2 + 100*seq  (baseline seq**2 + 100*seq)",
        "  MACs   0",
    ]
    assert formula_lines(verdict(None)) == []


def test_a_degree_finding_is_accepted_by_raising_max_degree() -> None:
    (finding,) = verdict(formula("2*seq**2")).violations
    # the setting is max-degree's seq, written in the model's table: the degree the formula has is what passes
    assert finding_edit(finding, start="/p") == (
        "set seq = 2 at pyproject.toml:7 (tool.flopbudget.models.gpt.max-degree)"
    )


def test_the_annotation_is_titled_by_what_the_budget_on_the_curve_says() -> None:
    (annotation,) = annotations.from_verdict(verdict(formula("2*seq**2")))
    assert annotation.title == "flopbudget: gpt FLOPs grow faster than max-degree"
    assert annotation.source_line == 7


def test_json_results_carry_the_formula_only_for_a_curve_model() -> None:
    entry = json_report.model_entry(verdict(formula("2*seq**2"), formula("seq**2")), root="/p")
    assert entry["formula"]["formula"]["flops"] == "2*seq**2 + 100*seq"
    assert entry["baseline_formula"]["formula"]["flops"] == "seq**2 + 100*seq"
    assert entry["budget"]["max_degree"][0]["dim"] == "seq"
    plain = json_report.model_entry(verdict(None), root="/p")
    assert "formula" not in plain and "baseline_formula" not in plain and "max_degree" not in plain["budget"]


def test_the_summary_compares_base_and_head_curves_along_the_range() -> None:
    from pytest_flopbudget._reporters.curve_lines import curve_table

    rows = curve_table(verdict(formula("2*seq**2"), formula("seq**2")))
    assert rows[0] == "| seq | FLOPs base \u2192 now |"
    # sizes: the range [16, 512] by powers of two; at 16 the base is 16**2 + 100*16 = 1,856 FLOPs and the head
    # 2*16**2 + 1600 = 2,112 (+13.8%); at 512, 262,144 + 51,200 = 313,344 against 575,488 (+83.7%)
    assert [row.split(" | ")[0].strip("| ") for row in rows[2:]] == ["16", "32", "64", "128", "256", "512"]
    assert rows[2] == "| 16 | 1.86 kFLOPs \u2192 2.11 kFLOPs (+13.8%) |"
    assert rows[-1] == "| 512 | 313 kFLOPs \u2192 575 kFLOPs (+83.7%) |"
    assert curve_table(verdict(formula("seq**2"), formula("seq**2"))) == []  # unchanged: no table
    assert curve_table(verdict(formula("seq**2"))) == []  # no baseline formula: nothing to compare


def test_the_job_summary_shows_the_curves_of_a_model_whose_formula_changed_even_when_it_passed() -> None:
    from pytest_flopbudget._front_ends import CLI
    from pytest_flopbudget._reporters.markdown import summary

    grown = verdict(formula("3*seq"), formula("seq"))  # degree 1 within max-degree seq = 1: it passes
    assert grown.passed
    text = summary([grown], front_end=CLI)
    assert "<summary>\U0001f4c8 gpt: cost curve changed in seq</summary>" in text
    # at 512: 512 + 100*512 = 51,712 FLOPs at the base, 3*512 + 51,200 = 52,736 now (+2.0%)
    assert "| 512 | 51.7 kFLOPs \u2192 52.7 kFLOPs (+2.0%) |" in text
    assert "- FLOPs: base `101*seq`, now `103*seq`" in text
    failed = summary([verdict(formula("2*seq**2"), formula("seq**2"))], front_end=CLI)
    assert "| 512 | 313 kFLOPs \u2192 575 kFLOPs (+83.7%) |" in failed
    same = summary([verdict(formula("seq"), formula("seq"))], front_end=CLI)
    assert "cost curve" not in same
