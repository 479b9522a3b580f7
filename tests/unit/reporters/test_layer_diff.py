"""`flopbudget diff` as an output (pytest_flopbudget/_reporters/layer_diff.py): figures only, never findings."""

from __future__ import annotations

import io
from pathlib import Path

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.verdict import Measurement
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters.ci import LAYER_DIFF, emit
from pytest_flopbudget._reporters.layer_diff import has_errors
from pytest_flopbudget._run import Run, RunResult, Unchecked


def report(layers: dict[str, int]) -> Report:
    return Report(
        layers={path: LayerCost(flops=f, macs=f // 2) for path, f in layers.items()},
        forward=PhaseTotals(flops=sum(layers.values()), macs=sum(f // 2 for f in layers.values())),
    )


def diff_of(tmp_path: Path, now: Report, baseline: Report | None) -> tuple[RunResult, str]:
    store = BaselineStore(tmp_path)
    if baseline is not None:
        store.save("net", baseline)
    run = Run(store)
    run.record(Measurement("net", now, parse_budget({"flops": "1"}, {}, Location(key="net")), Location(key="net")))
    result = run.finish()
    out = io.StringIO()
    emit(result, [LAYER_DIFF], env={}, stream=out)
    return result, out.getvalue()


def test_a_change_is_shown_per_layer_whatever_the_budget(tmp_path: Path) -> None:
    result, text = diff_of(tmp_path, report({"a": 300, "b": 100}), report({"a": 200, "b": 100}))
    assert text.startswith("net: 300 FLOPs -> 400 FLOPs (+33.3%), 150 MACs -> 200 MACs (+33.3%), 0 params (unchanged)")
    assert "FLOPs per layer, against " in text and "over budget" not in text
    assert not has_errors(result)


def test_no_change_says_so(tmp_path: Path) -> None:
    _, text = diff_of(tmp_path, report({"a": 300}), report({"a": 300}))
    assert text.startswith("net: no change since ") and text.endswith("(300 FLOPs, 150 MACs, 0 params)\n")


def test_a_model_without_a_baseline_is_an_error(tmp_path: Path) -> None:
    result, text = diff_of(tmp_path, report({"a": 300}), None)
    assert text.startswith("error: net: no baseline yet (") and "`flopbudget check --update net`" in text
    assert has_errors(result)


def test_an_unchecked_model_is_an_error() -> None:
    out = io.StringIO()
    result = RunResult(unchecked=[Unchecked("gone", "cannot import 'x'")])
    emit(result, [LAYER_DIFF], env={}, stream=out)
    assert out.getvalue() == "error: cannot import 'x'\n" and has_errors(result)
