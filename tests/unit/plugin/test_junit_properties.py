"""The user properties a flop-budget test records for `--junitxml`: its model, its verdict, its figures."""

from __future__ import annotations

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.verdict import Measurement, Verdict, evaluate
from pytest_flopbudget._plugin.junit_properties import properties, record, unchecked_properties
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def report(flops: int) -> Report:
    return Report(
        layers={"a": LayerCost(flops=flops, macs=flops // 2, params=1)},
        forward=PhaseTotals(flops=flops, macs=flops // 2),
    )


def verdict(name: str, now: Report, baseline: Report | None = None) -> Verdict:
    origin = Location("pyproject.toml", 1, f"tool.flopbudget.models.{name}")
    budget = parse_budget({"flops": "1k"}, {"flops": origin}, origin)
    return evaluate(Measurement(name, now, budget, origin, f"pyproject.toml::{name}"), baseline)


def test_model_verdict_and_each_figure_with_budget_and_baseline() -> None:
    assert properties(verdict("resnet", report(1200), report(800))) == [
        ("flopbudget.model", "resnet"),
        ("flopbudget.verdict", "fail"),
        ("flopbudget.flops", 1200),
        ("flopbudget.flops.budget", 1000),
        ("flopbudget.flops.baseline", 800),
        ("flopbudget.macs", 600),
        ("flopbudget.macs.baseline", 400),
        ("flopbudget.params", 1),
        ("flopbudget.params.baseline", 1),
        ("flopbudget.skipped", 0),
        ("flopbudget.skipped.baseline", 0),
    ]
    passing = properties(verdict("resnet", report(10)))
    assert passing[:3] == [("flopbudget.model", "resnet"), ("flopbudget.verdict", "pass"), ("flopbudget.flops", 10)]


def test_names_are_one_inert_line() -> None:
    assert properties(verdict("a\n\x1b[2J", report(10)))[0] == ("flopbudget.model", "a\\x0a\\x1b[2J")
    assert unchecked_properties("b\n") == [("flopbudget.model", "b\\x0a"), ("flopbudget.verdict", "unchecked")]


class FakeItem:
    def __init__(self) -> None:
        self.user_properties: list[tuple[str, object]] = [("mine", 1), ("flopbudget.flops", 5)]


def test_a_rerun_replaces_its_earlier_figures_and_keeps_the_users() -> None:
    item = FakeItem()
    record(item, unchecked_properties("m"))  # type: ignore[arg-type]
    assert item.user_properties == [("mine", 1), ("flopbudget.model", "m"), ("flopbudget.verdict", "unchecked")]
