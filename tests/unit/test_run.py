"""One run for every front end (pytest_flopbudget/_run.py): what goes in, what `finish()` gives out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.verdict import FindingKind, Measurement
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import json_report
from pytest_flopbudget._run import EXIT_ERROR, EXIT_OK, EXIT_OVER_BUDGET, Run, RunResult, Unchecked, entry_nodeid


def report(macs: int) -> Report:
    return Report(layers={"fc": LayerCost(flops=2 * macs, macs=macs)}, forward=PhaseTotals(flops=2 * macs, macs=macs))


def measurement(name: str, macs: int, limit: str | None = None, nodeid: str | None = None) -> Measurement:
    budget = parse_budget({"macs": limit} if limit else {}, {}, Location(key=name))
    return Measurement(name, report(macs), budget, Location(key=name), nodeid)


def test_finish_judges_every_measurement_sorted(tmp_path: Path) -> None:
    run = Run(BaselineStore(tmp_path))
    run.record(measurement("b", 5, "10"))
    run.record(measurement("a", 50, "10"))
    result = run.finish()
    assert [v.name for v in result.verdicts] == ["a", "b"]
    assert [v.name for v in result.failed] == ["a"]
    assert result.exit_code == EXIT_OVER_BUDGET and not result.passed


def test_each_measurement_is_judged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict a test asked for is the one `finish` reports: judged once, not again at the end."""
    run = Run(BaselineStore(tmp_path))
    over = measurement("a", 50, "10")
    early = run.judge(over)
    run.record(over)
    run.record(measurement("b", 5, "10"))
    calls: list[str] = []
    judge = Run._judge
    monkeypatch.setattr(Run, "_judge", lambda self, m: calls.append(m.name) or judge(self, m))
    result = run.finish()
    assert result.verdicts[0] is early and run.judge(over) is early
    assert calls == ["b"]


def test_an_unchecked_model_is_kept_and_wins_the_exit_code(tmp_path: Path) -> None:
    run = Run(BaselineStore(tmp_path))
    run.record(measurement("a", 50, "10"))
    run.record_unchecked(Unchecked("broken", "cannot import 'x'"))
    result = run.finish()
    assert [e.name for e in result.unchecked] == ["broken"]
    assert result.exit_code == EXIT_ERROR


def test_count_records_an_entry_that_cannot_be_counted(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.gone]\ntarget = "no_such_module_here:model"\ninputs = [[1, 8]]\nmacs = "1k"\n'
    )
    settings = load_settings(tmp_path / "pyproject.toml", tmp_path)
    run = Run(BaselineStore(tmp_path / ".flopbudget"))
    entry = settings.models["gone"]
    with pytest.raises(FlopBudgetError, match="cannot import 'no_such_module_here'"):
        run.count(entry, tmp_path, entry_nodeid(entry, tmp_path))
    (error,) = run.finish().unchecked
    assert (error.name, error.nodeid) == ("gone", "pyproject.toml::gone")
    assert error.origin is not None and error.origin.line == 1  # the model's table, for the annotation


def test_workers_export_and_the_controller_merges(tmp_path: Path) -> None:
    worker = Run(BaselineStore(tmp_path))
    worker.record(measurement("a", 5, "10", nodeid="t.py::test_a"))
    worker.record_unchecked(Unchecked("b", "it raised", Location("/p/pyproject.toml", 3, "b"), "pyproject.toml::b"))
    controller = Run(BaselineStore(tmp_path))
    controller.merge(json.loads(json.dumps(worker.export())))  # what travels through workeroutput
    result = controller.finish()
    assert [(v.name, v.measurement.nodeid) for v in result.verdicts] == [("a", "t.py::test_a")]
    assert result.unchecked == worker.unchecked


def test_update_writes_baselines_and_does_not_fail_on_budgets(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    run = Run(store, update=True)
    run.record(measurement("a", 50, "10"))
    result = run.finish()
    assert result.written == ["a"] and result.updated == ["a"]
    assert result.exit_code == EXIT_OK
    assert store.load("a") is not None and store.load("a").macs == 50  # type: ignore[union-attr]
    again = Run(store, update=True)
    again.record(measurement("a", 50, "10"))
    assert again.finish().unchanged == ["a"]


def test_two_tests_counting_one_name_differently_is_an_update_error(tmp_path: Path) -> None:
    run = Run(BaselineStore(tmp_path), update=True)
    run.record(measurement("a", 5, nodeid="t.py::one"))
    run.record(measurement("a", 6, nodeid="t.py::two"))
    result = run.finish()
    assert result.update_errors == [
        "t.py::one and t.py::two both count 'a' with different results; the baseline keeps t.py::two's"
    ]
    assert result.exit_code == EXIT_ERROR


def test_an_empty_result_passes() -> None:
    assert RunResult().passed and RunResult().exit_code == EXIT_OK


# -- `--cache=verify`: a cached count that differs from the fresh one fails the run, in every output ----------------


def miscached(update: bool, tmp_path: Path) -> tuple[Run, RunResult]:
    """`a` within its budget (5 MACs <= 10), but its cached count said 4 MACs; `b` agreed with its record."""
    run = Run(BaselineStore(tmp_path), update=update)
    stale = measurement("a", 5, "10", nodeid="pyproject.toml::a")
    stale.cache_mismatch = "macs 4 cached, 5 counted"
    run.record(stale)
    run.record(measurement("b", 5, "10"))
    return run, run.finish()


def test_a_cache_mismatch_is_a_violation_on_its_model_and_fails_the_run(tmp_path: Path) -> None:
    _, result = miscached(False, tmp_path)
    assert [v.name for v in result.failed] == ["a"] and [v.name for v in result.miscached] == ["a"]
    (finding,) = result.failed[0].violations
    assert finding.kind == FindingKind.CACHE_MISMATCH
    assert finding.message == "its cached count differs from a fresh count: macs 4 cached, 5 counted"
    assert finding.source == Location(key="a")  # the line declaring the model, for annotations
    assert not result.passed and result.exit_code == EXIT_OVER_BUDGET  # 1, like an overrun: not unknown (2)
    document = json_report.results(result.verdicts, result.changes, result.unchecked, root=tmp_path)
    assert document["passed"] is False and document["counts"]["failed"] == 1
    entry = next(model for model in document["models"] if model["name"] == "a")
    assert entry["passed"] is False and entry["reason"] == f"a: {finding.message}"


def test_a_cache_mismatch_fails_an_update_too_which_still_writes_the_fresh_baseline(tmp_path: Path) -> None:
    run, result = miscached(True, tmp_path)
    assert result.written == ["a", "b"] and BaselineStore(tmp_path).load("a").macs == 5  # type: ignore[union-attr]
    assert result.exit_code == EXIT_OVER_BUDGET
    assert [run.fails(v) for v in result.verdicts] == [True, False]


def test_a_cache_mismatch_travels_from_worker_to_controller(tmp_path: Path) -> None:
    worker, _ = miscached(False, tmp_path)
    controller = Run(BaselineStore(tmp_path))
    controller.merge(json.loads(json.dumps(worker.export())))
    assert [v.name for v in controller.finish().miscached] == ["a"]
