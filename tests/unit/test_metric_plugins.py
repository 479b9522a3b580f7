"""Metrics from other packages (`define_metric`, entry-point group `pytest_flopbudget.metrics`), without installing
one: the loader given stand-in entry points, the definition's checks, and a plugin metric read off a report's ops,
budgeted and judged against a baseline. tests/e2e/test_third_party_metric.py installs a real one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.pyproject import BUDGET_KEYS, MODEL_KEYS
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Measurement, evaluate
from pytest_flopbudget._metrics import (
    ENTRY_POINT_GROUP,
    FLOPS,
    MACS,
    METRICS,
    PLUGIN_PROBLEMS,
    RESERVED_NAMES,
    Metric,
    OpFigures,
    by_name,
    define_metric,
    load_plugins,
)
from pytest_flopbudget._plugin.marker import _marker_signature
from pytest_flopbudget._render.count_json import count_data
from pytest_flopbudget._render.table import format_plugin_metrics
from pytest_flopbudget._report import CONVENTIONS, LayerCost, PhaseTotals, Report
from pytest_flopbudget.metrics import ENTRY_POINT_GROUP as PUBLIC_GROUP


def matmul_flops(op: str, figures: OpFigures) -> int:
    return 2 * figures.macs if op in ("aten.mm", "aten.addmm") else 0


def toy(name: str = "matmul-flops", of_op: Any = matmul_flops) -> Metric:
    return define_metric(name, label="matmul FLOPs", unit="FLOPs", convention="2 per MAC of mm", of_op=of_op)


@dataclass
class Dist:
    metadata: dict[str, str]
    version: str


@dataclass
class Entry:
    """An `importlib.metadata.EntryPoint` as the loader reads it."""

    name: str
    target: Any
    dist: Dist | None = None
    value: str = "toy_metric:METRIC"

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


@pytest.fixture
def restore() -> Iterator[None]:
    before = list(METRICS)
    yield
    for metric in list(METRICS):
        if metric not in before:
            METRICS.remove(metric)


DIST = Dist({"Name": "flopbudget-toy"}, "0.1")


def test_the_public_module_names_the_group() -> None:
    assert PUBLIC_GROUP == ENTRY_POINT_GROUP == "pytest_flopbudget.metrics"


@pytest.mark.usefixtures("restore")
def test_a_metric_is_added_after_the_built_ins_and_read_off_the_ops() -> None:
    assert load_plugins([Entry("matmul-flops", toy(), DIST)]) == []
    metric = METRICS.get("matmul-flops")
    assert metric is not None and list(METRICS)[-1] == "matmul-flops"
    assert (metric.key, metric.argument, metric.plugin, metric.counted, metric.growth) == (
        "matmul-flops", "matmul_flops", True, False, True,
    )  # fmt: skip
    assert metric.origin == "entry point 'matmul-flops' (toy_metric:METRIC) of flopbudget-toy 0.1"
    layer = LayerCost(flops=260, macs=120)
    layer.add_op("aten.addmm", {FLOPS: 260, MACS: 120})
    layer.add_op("aten.relu", {FLOPS: 20})
    report = Report(layers={"fc": layer})
    assert report.metric(metric) == 240  # 2 * MACs of addmm = 2 * 120; relu is no matmul
    assert report.layer_metric(metric) == {"fc": 240}
    assert metric.format_value(240) == "240 FLOPs" and metric.format_value(1_200_000) == "1.20 MFLOPs"
    assert "matmul-flops" not in CONVENTIONS and "matmul-flops" not in report.to_dict()["totals"]


@pytest.mark.usefixtures("restore")
def test_it_is_budgeted_and_judged_against_the_baseline() -> None:
    load_plugins([Entry("matmul-flops", toy(), DIST)])

    def report(macs: int) -> Report:
        layer = LayerCost()
        layer.add_op("aten.mm", {FLOPS: 2 * macs, MACS: macs})
        return Report(layers={"": layer}, forward=PhaseTotals(flops=2 * macs, macs=macs))

    budget = parse_budget({"matmul-flops": "300 FLOPs"}, {})
    verdict = evaluate(Measurement("tiny", report(180), budget), report(150))
    assert reason(verdict) == "tiny: 360 FLOPs > budget 300 FLOPs (+20.0%); baseline 300 FLOPs"
    assert verdict.delta(METRICS.get("matmul-flops")) == 60  # type: ignore[arg-type]


@pytest.mark.usefixtures("restore")
def test_broken_and_clashing_entry_points_are_one_line_each_and_left_out() -> None:
    before = list(METRICS)
    problems = load_plugins(
        [
            Entry("broken", ModuleNotFoundError("No module named 'gone'"), DIST, "gone:METRIC"),
            Entry("flops", toy("flops"), DIST),
            Entry("max-skipped-ops", toy("max-skipped-ops"), DIST),
            Entry("target", toy("target"), DIST),
            Entry("not-a-metric", "flops", DIST),
            Entry("other-name", toy("some-metric"), None),
            Entry("twice", toy("twice"), DIST),
            Entry("twice", toy("twice"), Dist({"Name": "flopbudget-copy"}, "2.0"), "copy:METRIC"),
        ]
    )
    assert problems == [
        "metric plugin entry point 'broken' (gone:METRIC) of flopbudget-toy 0.1 cannot be loaded: "
        "ModuleNotFoundError: No module named 'gone'",
        "metric plugin entry point 'flops' (toy_metric:METRIC) of flopbudget-toy 0.1 cannot be added: its name "
        "'flops' is taken by a built-in metric",
        "metric plugin entry point 'max-skipped-ops' (toy_metric:METRIC) of flopbudget-toy 0.1 cannot be added: its "
        "name 'max-skipped-ops' is taken by a built-in metric",
        "metric plugin entry point 'not-a-metric' (toy_metric:METRIC) of flopbudget-toy 0.1 is a str, not a metric "
        "made by pytest_flopbudget.metrics.define_metric",
        "metric plugin entry point 'other-name' (toy_metric:METRIC) of an unknown distribution names the metric "
        "'some-metric': name the entry point after it",
        "metric plugin entry point 'target' (toy_metric:METRIC) of flopbudget-toy 0.1 cannot be added: its name "
        "'target' is a budget setting, not free for a metric",
        "metric plugin entry point 'twice' (toy_metric:METRIC) of flopbudget-toy 0.1 cannot be added: its name "
        "'twice' is taken by entry point 'twice' (copy:METRIC) of flopbudget-copy 2.0",
    ]  # in the order of the entry names, then their values
    assert all("\n" not in line for line in problems) and len(problems) == 7
    assert list(METRICS) == [*before, "twice"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "Matmul_FLOPs"}, "its name 'Matmul_FLOPs' is not lowercase words joined by hyphens"),
        ({"unit": "FLOP s"}, "its unit 'FLOP s' must be one word of letters"),
        ({"label": ""}, "its label must be printable, non-empty text, got ''"),
        ({"of_op": 3}, "its of_op must be a function of an op's name and figures, got int"),
    ],
)
def test_a_definition_is_checked_when_it_is_made(arguments: dict[str, Any], message: str) -> None:
    spec: dict[str, Any] = {"label": "x", "unit": "FLOPs", "convention": "c", "of_op": matmul_flops, **arguments}
    with pytest.raises(ValueError, match="^metric .*" + message.replace("(", r"\(").replace(")", r"\)")):
        define_metric(spec.pop("name", "toy"), **spec)


@pytest.mark.parametrize(
    ("of_op", "message"),
    [
        (lambda op, figures: 1.5, "metric 'toy' (pytest-flopbudget) gave 1.5 for op 'aten.mm'; of_op must return a "
         "whole number >= 0"),
        (lambda op, figures: -1, "gave -1 for op 'aten.mm'"),
        (lambda op, figures: figures.nothing, "metric 'toy' (pytest-flopbudget) failed on op 'aten.mm': "
         "AttributeError: 'OpCost' object has no attribute 'nothing'"),
    ],
)  # fmt: skip
def test_a_metric_that_misbehaves_is_one_error_line(of_op: Any, message: str) -> None:
    layer = LayerCost()
    layer.add_op("aten.mm", {})
    with pytest.raises(FlopBudgetError) as raised:
        toy("toy", of_op).of_report(Report(layers={"a": layer}))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_reserved_names_cover_every_setting_that_is_not_a_metric() -> None:
    settings = {key for key in MODEL_KEYS if key not in BUDGET_KEYS or key in ("max-increase", "warn-increase")}
    assert settings <= RESERVED_NAMES
    arguments = set(_marker_signature().parameters) - {metric.argument for metric in METRICS}
    assert {argument.replace("_", "-") for argument in arguments} <= RESERVED_NAMES


@pytest.mark.usefixtures("restore")
def test_count_shows_it_under_the_table_and_in_its_json() -> None:
    layer = LayerCost()
    layer.add_op("aten.mm", {FLOPS: 2_400_000, MACS: 1_200_000})
    report = Report(layers={"fc": layer}, forward=PhaseTotals(flops=2_400_000, macs=1_200_000))
    assert format_plugin_metrics(report) == [] and "plugin_metrics" not in count_data(report)
    load_plugins([Entry("matmul-flops", toy(), DIST)])
    assert format_plugin_metrics(report) == ["matmul-flops: 2,400,000 matmul FLOPs (2.40 MFLOPs)"]
    assert count_data(report)["plugin_metrics"] == {
        "matmul-flops": {
            "total": 2_400_000,
            "layers": {"fc": 2_400_000},
            "label": "matmul FLOPs",
            "unit": "FLOPs",
            "convention": "2 per MAC of mm",
            "entry_point": "entry point 'matmul-flops' (toy_metric:METRIC) of flopbudget-toy 0.1",
        }
    }


def test_an_unknown_metric_names_the_plugins_left_out() -> None:
    with pytest.raises(ValueError) as raised:
        by_name("matmul-flops")
    assert str(raised.value).endswith("param-bytes, buffer-bytes, peak-memory")
    problem = "metric plugin entry point 'matmul-flops' (m:M) of flopbudget-matmul 0.1 cannot be loaded: ImportError"
    PLUGIN_PROBLEMS.append(problem)
    try:
        with pytest.raises(ValueError) as raised:
            by_name("matmul-flops")
    finally:
        PLUGIN_PROBLEMS.remove(problem)
    assert str(raised.value).endswith(f"peak-memory; {problem}")
