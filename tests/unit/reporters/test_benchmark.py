"""github-action-benchmark's `customSmallerIsBetter` JSON, validated against the shape its README documents."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from export_formats import validate_benchmark as validate
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._reporters.benchmark import benchmarks, write_benchmarks

jsonschema = pytest.importorskip("jsonschema")

PYPROJECT = pyproject(RESNET)


def named(project, make_report, *names: str):
    base = project.verdict("resnet", make_report({"a": 1200}), make_report({"a": 800}))
    return [
        dataclasses.replace(base, measurement=dataclasses.replace(base.measurement, name=name, nodeid=None))
        for name in names
    ]


def test_one_entry_per_model_and_metric(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    resnet = project.verdict("resnet", make_report({"a": 1200}), make_report({"a": 800}))
    entries = benchmarks([resnet])
    validate(entries)
    assert entries == [
        {"name": "resnet - FLOPs", "unit": "FLOPs", "value": 1200,
         "extra": "budget 1.00 kFLOPs (over budget)\nbaseline 800 FLOPs (+50.0%)"},
        {"name": "resnet - MACs", "unit": "MACs", "value": 600, "extra": "baseline 400 MACs (+50.0%)"},
        {"name": "resnet - params", "unit": "params", "value": 1, "extra": "baseline 1 params (+0.0%)"},
        {"name": "resnet - skipped op calls", "unit": "skipped op calls", "value": 0,
         "extra": "baseline 0 skipped op calls (+0.0%)"},
    ]  # fmt: skip
    first = benchmarks([project.verdict("resnet", make_report({"a": 900}))])
    assert first[0] == {"name": "resnet - FLOPs", "unit": "FLOPs", "value": 900, "extra": "budget 1.00 kFLOPs"}
    assert "extra" not in first[1]  # no budget, no baseline: nothing to say


def test_memory_metrics_in_bytes(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    report = dataclasses.replace(make_report({"a": 10}), optional_metrics=frozenset(METRICS.optional), peak_memory=4096)
    entries = benchmarks([project.verdict("resnet", report)])
    validate(entries)
    assert entries[-1] == {"name": "resnet - peak memory", "unit": "bytes", "value": 4096}
    assert len(entries) == len(METRICS) - len(METRICS.omit_zero)  # integer ops only where there are some


def test_hostile_names_stay_inert_and_distinct(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    hostile = ['q"uote\n::stop-commands::x', "\u202eevil\x1b[2J", "模型", "a - FLOPs", "#"]
    path = tmp_path / "out" / "bench.json"
    write_benchmarks(named(project, make_report, *hostile), path)
    text = path.read_text(encoding="utf-8")
    entries = json.loads(text)
    validate(entries)
    assert len(entries) == len(hostile) * 4
    assert all("\n" not in e["name"] and "\x1b" not in e["name"] and "\u202e" not in e["name"] for e in entries)
    assert '\\"uote\\\\x0a::stop-commands::x - FLOPs' in text and "模型 - FLOPs" in text


def test_nothing_counted_is_an_empty_array(tmp_path: Path) -> None:
    write_benchmarks([], tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text()) == []
