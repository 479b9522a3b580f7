"""Verdicts on the optional memory metrics (`bytes`, `param-bytes`): judged and shown only where a budget sets them,
and "not measured" (never zero) in a report that lacks them: a baseline written before they existed, an ONNX count."""

from __future__ import annotations

import json

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, evaluate
from pytest_flopbudget._metrics import BYTES, FLOPS, PARAM_BYTES, PARAMS
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import json_report, markdown, terminal

GiB = 2**30


def torch_like(flops: int, moved: int, param_bytes: int) -> Report:
    """A report that measured both memory metrics, as the PyTorch engine's do."""
    layers = {"fc": LayerCost({FLOPS: flops, BYTES: moved, PARAMS: param_bytes // 2, PARAM_BYTES: param_bytes})}
    return Report(
        layers=layers,
        forward=PhaseTotals({FLOPS: flops, BYTES: moved}),
        model="M",
        optional_metrics=frozenset({BYTES, PARAM_BYTES}),
    )


def without_memory(flops: int) -> Report:
    """A report that measured neither (an ONNX count, a baseline from before the metrics)."""
    return Report(layers={"fc": LayerCost({FLOPS: flops, PARAMS: 8})}, forward=PhaseTotals({FLOPS: flops}), model="M")


def measure(report: Report, **budget: object) -> Measurement:
    sources = {key: Location("/p/pyproject.toml", 10 + i, f"models.m.{key}") for i, key in enumerate(budget)}
    origin = Location("/p/pyproject.toml", 9, "models.m")
    return Measurement("m", report, parse_budget(budget, sources, origin), origin)


def test_a_param_bytes_budget_below_the_count_fails_with_a_reason_naming_it() -> None:
    verdict = evaluate(measure(torch_like(100, 3 * GiB, 2 * GiB), **{"param-bytes": "512MiB", "flops": "1k"}))
    assert not verdict.passed and verdict.failed_metrics() == [PARAM_BYTES]
    assert reason(verdict) == "m: param bytes 2.00 GiB > budget 512 MiB (+300.0%)"


def test_bytes_budgets_take_binary_and_decimal_prefixes() -> None:
    assert evaluate(measure(torch_like(100, 22 * GiB, 8), bytes="22GiB")).passed
    assert not evaluate(measure(torch_like(100, 22 * GiB, 8), bytes="23.6GB")).passed  # 22 GiB is 23.62 GB


def test_without_a_memory_budget_nothing_about_memory_is_judged_or_shown() -> None:
    baseline, now = torch_like(100, GiB, 64), torch_like(100, 2 * GiB, 64)
    verdict = evaluate(measure(now, flops="1k", max_increase="1%"), baseline)
    assert verdict.passed and verdict.findings == []
    lines = terminal.summary_lines([verdict])
    assert lines[0].split() == ["model", "status", "FLOPs", "MACs", "params", "skipped", "budget", "use", "vs",
                                "baseline"]  # fmt: skip
    assert lines[1].rstrip().endswith(" =")  # the growth of the memory metrics is not listed


def test_a_budgeted_memory_metric_gets_its_column_and_its_growth() -> None:
    baseline, now = torch_like(100, GiB, 64), torch_like(100, 2 * GiB, 64)
    verdict = evaluate(measure(now, bytes="22GiB", max_increase="10%"), baseline)
    assert [f.kind for f in verdict.violations] == [FindingKind.INCREASE]
    assert verdict.violations[0].message == (
        "bytes moved 2.00 GiB is +100.0% over baseline 1.00 GiB, more than max-increase 10%"
    )
    lines = terminal.summary_lines([verdict])
    assert "bytes moved" in lines[0] and "param bytes" not in lines[0]
    assert "2.00Gi" in lines[1] and "+100.0% bytes" in lines[1]


def test_a_baseline_without_the_metric_is_not_measured_and_max_increase_says_so() -> None:
    data = json.loads(json.dumps(torch_like(100, GiB, 64).to_dict()))
    for where in (data["totals"], data["forward"], data["backward"], data["layers"]["fc"]["metrics"]):
        where.pop("bytes", None)
        where.pop("param-bytes", None)
    baseline = Report.from_dict(data)  # an older report/2 file: read, not refused
    assert not baseline.measures(BYTES) and not baseline.measures(PARAM_BYTES) and baseline.measures(FLOPS)
    verdict = evaluate(measure(torch_like(100, 2 * GiB, 64), bytes="22GiB", max_increase="1%"), baseline)
    assert verdict.passed
    assert [(f.kind, f.message) for f in verdict.warnings] == [
        (FindingKind.NOT_MEASURED, "no baseline figure for bytes moved (the baseline predates it): max-increase is "
                                   "not checked")
    ]  # fmt: skip
    assert verdict.baseline_value(BYTES) is None and verdict.delta(BYTES) is None and verdict.diff(BYTES) is None


def test_a_report_without_the_metric_is_never_judged_as_zero() -> None:
    verdict = evaluate(measure(without_memory(100), bytes="1KiB", **{"param-bytes": "1"}))
    assert not verdict.passed  # a budget that cannot be checked fails, it never passes as if met
    assert [f.message for f in verdict.violations] == [
        "bytes moved: not measured for this model (torch), so its bytes budget cannot be checked",
        "param bytes: not measured for this model (torch), so its param-bytes budget cannot be checked",
    ]
    assert verdict.usage(BYTES) is None
    lines = terminal.summary_lines([verdict])
    assert lines[1].split()[-4:-2] == ["-", "-"]  # no figure, not 0
    figures = json_report.model_entry(verdict, root="/p")["metrics"]["bytes"]
    assert figures["now"] is None and figures["limit"] == 1024 and figures["over"] is False
    assert "bytes" not in without_memory(100).to_dict()["totals"]
    summary = markdown.summary([verdict], front_end=CLI, workspace="/p")
    row = next(line for line in summary.splitlines() if "bytes moved" in line)
    assert row.endswith("| bytes moved | 1.00Ki | - | - | - | - |")  # budget 1 KiB, no baseline, no figure now


def test_the_reason_a_backend_gives_for_not_measuring_is_in_the_failure() -> None:
    report = without_memory(100)
    report.backend = "onnx"
    report.conventions["bytes"] = "not measured: the shape of 'nz' is unknown after shape inference"
    verdict = evaluate(measure(report, bytes="1KiB"))
    assert [f.message for f in verdict.violations] == [
        "bytes moved: not measured for this model (onnx): the shape of 'nz' is unknown after shape inference, so "
        "its bytes budget cannot be checked"
    ]
