"""Verdicts on integer ops (`int-ops`): budgeted and grown like FLOPs, shown by every check output for a model that
has or budgets some, and by none for a model without them; a baseline without the figure holds zero."""

from __future__ import annotations

import json

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, evaluate
from pytest_flopbudget._metrics import FLOPS, INT_OPS, MACS, PARAMS
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import json_report, markdown, terminal


def quantized(flops: int, int_ops: int) -> Report:
    """A model with a float head and an integer body."""
    layers = {
        "body": LayerCost({INT_OPS: int_ops, PARAMS: 64}),
        "head": LayerCost({FLOPS: flops, MACS: flops // 2, PARAMS: 8}),
    }
    return Report(layers=layers, forward=PhaseTotals({FLOPS: flops, MACS: flops // 2, INT_OPS: int_ops}), model="Q")


def measure(report: Report, **budget: object) -> Measurement:
    sources = {key: Location("/p/pyproject.toml", 10 + i, f"models.m.{key}") for i, key in enumerate(budget)}
    origin = Location("/p/pyproject.toml", 9, "models.m")
    return Measurement("m", report, parse_budget(budget, sources, origin), origin)


def test_an_int_ops_budget_below_the_count_fails_with_a_reason_naming_it() -> None:
    verdict = evaluate(measure(quantized(100, 131_072), **{"int-ops": "100k", "flops": "1k"}))
    assert not verdict.passed and verdict.failed_metrics() == [INT_OPS]
    assert reason(verdict) == "m: 131k int ops > budget 100k int ops (+31.1%)"
    assert evaluate(measure(quantized(100, 131_072), **{"int-ops": "0.2 GOPs"})).passed


def test_max_increase_applies_to_integer_ops_like_flops() -> None:
    verdict = evaluate(measure(quantized(100, 2_000), flops="1k", max_increase="10%"), quantized(100, 1_000))
    assert [f.kind for f in verdict.violations] == [FindingKind.INCREASE] and verdict.failed_metrics() == [INT_OPS]
    assert verdict.violations[0].message == (
        "2.00k int ops is +100.0% over baseline 1.00k int ops, more than max-increase 10%"
    )


def test_a_baseline_without_integer_ops_holds_zero_so_integer_work_that_appears_is_said() -> None:
    """An older file (or any report without integer work) lacks the key: zero, not "not measured". A model whose
    integer work moved out of FLOPs fails max-increase on int-ops rather than looking cheaper."""
    old = quantized(100, 0).to_dict()
    assert "int-ops" not in old["totals"]
    baseline = Report.from_dict(json.loads(json.dumps(old)))
    assert baseline.measures(INT_OPS) and baseline.int_ops == 0
    verdict = evaluate(measure(quantized(100, 4_096), flops="1k", max_increase="2%"), baseline)
    assert [f.kind for f in verdict.violations] == [FindingKind.INCREASE]
    assert verdict.violations[0].message == "4.10k int ops is new over baseline 0 int ops, more than max-increase 2%"


def test_a_model_without_integer_ops_shows_none_anywhere(tmp_path: object) -> None:
    plain = Report(layers={"fc": LayerCost({FLOPS: 100, PARAMS: 8})}, forward=PhaseTotals({FLOPS: 100}), model="P")
    verdict = evaluate(measure(plain, flops="1k"), plain)
    assert not verdict.judges(INT_OPS)
    assert "int" not in "\n".join(terminal.summary_lines([verdict]))
    entry = json_report.model_entry(verdict, root="/p")
    assert "int-ops" not in entry["metrics"] and "int-ops" not in json.dumps(entry)
    assert "int" not in "\n".join(markdown._rows(verdict))


def test_a_model_with_integer_ops_shows_them_in_every_output_without_a_budget_on_them() -> None:
    verdict = evaluate(measure(quantized(100, 131_072), flops="1k"), quantized(100, 131_072))
    assert verdict.passed and verdict.judges(INT_OPS)
    lines = terminal.summary_lines([verdict])
    assert lines[0].split()[2:6] == ["FLOPs", "MACs", "int", "ops"]
    assert "131k" in lines[1]
    entry = json_report.model_entry(verdict, root="/p")
    assert entry["metrics"]["int-ops"]["now"] == 131_072 and entry["metrics"]["int-ops"]["baseline"] == 131_072
    assert any("integer ops" in row and "131k" in row for row in markdown._rows(verdict))


def test_integer_ops_that_went_away_are_shown_against_the_baseline() -> None:
    verdict = evaluate(measure(quantized(100, 0), flops="1k"), quantized(100, 4_096))
    assert verdict.judges(INT_OPS) and verdict.delta(INT_OPS) == -4_096
    assert "-100.0% int-ops" in terminal.summary_lines([verdict])[1]
