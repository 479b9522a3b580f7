"""Verdicts: both sides of every limit, max-increase, warnings, the one-line reason and the core's import hygiene."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Measurement, evaluate, judge
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report, SkippedOp


def make_report(layers: dict[str, tuple[int, int, int]], skipped: dict[str, int] | None = None) -> Report:
    """A Report from path -> (flops, macs, params), with skipped op calls charged to the root."""
    costs = {path: LayerCost(flops=f, macs=m, params=p) for path, (f, m, p) in layers.items()}
    skipped_ops = {}
    for op, calls in (skipped or {}).items():
        costs.setdefault("", LayerCost()).skipped[op] = calls
        skipped_ops[op] = SkippedOp(calls, [""])
    return Report(
        layers=costs,
        forward=PhaseTotals(flops=sum(f for f, _, _ in layers.values()), macs=sum(m for _, m, _ in layers.values())),
        skipped_ops=skipped_ops,
    )


def measure(report: Report, name: str = "m", **budget: object) -> Measurement:
    sources = {slot: Location("/p/pyproject.toml", 10 + i, f"models.{name}.{slot}") for i, slot in enumerate(budget)}
    origin = Location("/p/pyproject.toml", 9, f"models.{name}")
    return Measurement(name, report, parse_budget(budget, sources, origin), origin)


REPORT = make_report({"a": (1000, 400, 50), "b": (200, 100, 10)}, skipped={"aten.foo": 2})


@pytest.mark.parametrize(
    ("slot", "value", "passes"),
    [
        ("flops", 1200, True),
        ("flops", 1199, False),
        ("flops", "1.2k", True),
        ("flops", "500 MACs", True),
        ("flops", "499 MACs", False),
        ("macs", 500, True),
        ("macs", 499, False),
        ("params", 60, True),
        ("params", 59, False),
        ("skipped", 2, True),
        ("skipped", 1, False),
    ],
)
def test_every_ceiling_is_inclusive(slot: str, value: object, passes: bool) -> None:
    verdict = evaluate(measure(REPORT, **{slot: value}))
    assert verdict.passed is passes
    if not passes:
        (violation,) = verdict.violations
        assert violation.kind == "ceiling"
        assert violation.source is not None and violation.source.line == 10  # the line that declares the limit


def test_zero_budget() -> None:
    assert evaluate(measure(make_report({"a": (0, 0, 0)}), flops=0)).passed
    verdict = evaluate(measure(make_report({"a": (3, 0, 0)}), flops=0))
    assert reason(verdict) == "m: 3 FLOPs > budget 0 FLOPs"


def test_max_increase_both_sides() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    at_limit = make_report({"a": (1020, 510, 102)})
    over = make_report({"a": (1021, 510, 102)})
    assert evaluate(measure(at_limit, max_increase="2%"), baseline).passed
    verdict = evaluate(measure(over, max_increase="2%"), baseline)
    (violation,) = verdict.violations
    assert (violation.kind, violation.metric, violation.limit, violation.baseline) == ("increase", "flops", 1020, 1000)
    assert violation.message == "1.02 kFLOPs is +2.1% over baseline 1.00 kFLOPs, more than max-increase 2%"


def test_max_increase_applies_to_params_and_macs_too() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    verdict = evaluate(measure(make_report({"a": (1000, 500, 103)}), max_increase="2%"), baseline)
    assert [v.metric for v in verdict.violations] == ["params"]


def test_max_increase_without_baseline_is_not_checked() -> None:
    assert evaluate(measure(REPORT, max_increase="0%")).passed


def test_growth_within_budget_is_a_warning() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    verdict = evaluate(measure(make_report({"a": (1010, 500, 100)}), flops="2k"), baseline)
    assert verdict.passed
    (warning,) = verdict.warnings
    assert (warning.kind, warning.metric, warning.baseline, warning.actual) == ("growth", "flops", 1000, 1010)
    assert warning.source is not None and warning.source.line == 10


def test_warn_increase_warns_between_it_and_max_increase_without_failing() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    grown = make_report({"a": (1050, 500, 100)})  # +5%
    verdict = evaluate(measure(grown, warn_increase="1%", max_increase="10%"), baseline)
    assert verdict.passed
    (warning,) = verdict.warnings
    assert (warning.severity, warning.kind, warning.metric) == ("warning", "growth", "flops")
    assert warning.message == "1.05 kFLOPs is +5.0% over baseline 1.00 kFLOPs, more than warn-increase 1%"
    assert warning.source is not None and warning.source.line == 10  # the line that declares warn-increase


def test_growth_within_warn_increase_is_quiet_and_over_max_increase_fails() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    assert evaluate(measure(make_report({"a": (1010, 500, 100)}), warn_increase="1%"), baseline).findings == []
    warned = evaluate(measure(make_report({"a": (1200, 500, 100)}), warn_increase="1%"), baseline)
    assert warned.passed and [w.kind for w in warned.warnings] == ["growth"]  # no max-increase: a warning only
    verdict = evaluate(measure(make_report({"a": (1200, 500, 100)}), warn_increase="1%", max_increase="10%"), baseline)
    assert [(v.kind, v.metric) for v in verdict.violations] == [("increase", "flops")]
    assert verdict.warnings == []  # the failure already says it grew


def test_warn_increase_applies_to_params_and_macs_too() -> None:
    baseline = make_report({"a": (1000, 500, 100)})
    verdict = evaluate(measure(make_report({"a": (1000, 520, 103)}), warn_increase="2%"), baseline)
    assert verdict.passed
    assert [w.metric for w in verdict.warnings] == ["macs", "params"]


def test_skipped_ops_within_budget_are_a_warning() -> None:
    verdict = evaluate(measure(REPORT, flops="2k"))
    (warning,) = verdict.warnings
    assert warning.kind == "skipped"
    assert "aten.foo x2" in warning.message


def test_unreadable_baseline_is_a_violation() -> None:
    verdict = evaluate(measure(REPORT, flops="2k"), baseline_error=".flopbudget/m.json: not valid JSON")
    assert not verdict.passed
    assert verdict.violations[0].kind == "baseline"
    assert reason(verdict) == "m: .flopbudget/m.json: not valid JSON"


def test_usage_and_delta() -> None:
    baseline = make_report({"a": (1000, 400, 50)})
    verdict = evaluate(measure(REPORT, flops="2.4k", params=100), baseline)
    assert verdict.usage("flops") == pytest.approx(0.5)
    assert verdict.usage("macs") is None
    assert verdict.highest_usage() == ("params", 0.6)
    assert verdict.delta("flops") == 200
    assert verdict.diff("flops") is not None
    assert evaluate(measure(REPORT, flops=1)).delta("flops") is None


def test_failed_metrics_in_budget_order() -> None:
    verdict = evaluate(measure(REPORT, params=1, flops=1))
    assert verdict.failed_metrics() == ["flops", "params"]


def test_measurement_round_trips() -> None:
    measurement = measure(REPORT, flops="1G", max_increase="1%", warn_increase="0.5%")
    measurement.nodeid = "tests/test_a.py::test_b"
    again = Measurement.from_dict(measurement.to_dict())
    assert again.to_dict() == measurement.to_dict()
    assert again.budget == measurement.budget


def test_core_modules_import_neither_pytest_nor_torch() -> None:
    code = (
        "import sys\n"
        "import pytest_flopbudget._config.budget, pytest_flopbudget._config.pyproject\n"
        "import pytest_flopbudget._judge.baseline\n"
        "import pytest_flopbudget._judge.verdict, pytest_flopbudget._judge.diff\n"
        "import pytest_flopbudget._backends, pytest_flopbudget._run\n"
        "import pytest_flopbudget._reporters.terminal\n"
        "bad = [m for m in ('torch', 'pytest', '_pytest') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import pytest_flopbudget._plugin\n"
        "assert 'torch' not in sys.modules, 'the plugin must not slow down every pytest start'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_judge_reads_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = BaselineStore(tmp_path / ".flopbudget")
    measurement = measure(REPORT, flops="2k")
    fresh = judge(measurement, store)
    assert fresh.passed and fresh.baseline is None and fresh.baseline_file == ".flopbudget/m.json"
    store.save("m", make_report({"a": (1000, 400, 50)}))
    assert judge(measurement, store).delta("flops") == 200
    store.path_for("m").write_text("{")
    broken = judge(measurement, store)
    assert [f.kind for f in broken.violations] == ["baseline"]
    assert broken.violations[0].message.startswith(".flopbudget/m.json:1: the baseline is not valid JSON")
