"""Bencher Metric Format JSON, validated against the schema Bencher's documentation publishes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from export_formats import BENCHER_SCHEMA as SCHEMA
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._reporters.bencher import bencher_metrics, write_bencher

jsonschema = pytest.importorskip("jsonschema")

PYPROJECT = pyproject(RESNET)


def test_one_benchmark_per_model_one_measure_per_metric(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    resnet = project.verdict("resnet", make_report({"a": 1200}, {"aten.fft": 2}), make_report({"a": 800}))
    document = bencher_metrics([resnet])
    jsonschema.validate(document, SCHEMA)
    assert document == {
        "resnet": {
            "flops": {"value": 1200, "upper_value": 1000},  # the ceiling: Bencher draws it beside the figure
            "macs": {"value": 600},
            "params": {"value": 1},
            "skipped": {"value": 2},
        }
    }


def test_memory_measures_where_measured(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    report = dataclasses.replace(make_report({"a": 10}), optional_metrics=frozenset(METRICS.optional), peak_memory=4096)
    document = bencher_metrics([project.verdict("resnet", report)])
    jsonschema.validate(document, SCHEMA)
    assert list(document["resnet"]) == [
        "flops", "macs", "params", "skipped", "bytes", "param-bytes", "buffer-bytes", "peak-memory",
    ]  # fmt: skip
    assert document["resnet"]["peak-memory"] == {"value": 4096}


def test_hostile_names_are_distinct_inert_keys(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    base = project.verdict("resnet", make_report({"a": 1200}))
    hostile = ['q"uote\n::x', "\u202eevil\x1b[2J", "模型", "{}", "resnet"]
    verdicts = [
        dataclasses.replace(base, measurement=dataclasses.replace(base.measurement, name=name, nodeid=f"t::{i}"))
        for i, name in enumerate([*hostile, "resnet"])
    ]
    write_bencher(verdicts, tmp_path / "bmf.json")
    document = json.loads((tmp_path / "bmf.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    assert len(document) == len(hostile) + 1  # the second count of `resnet` is not merged into the first
    assert "resnet [t::5]" in document and "模型" in document and 'q"uote\\x0a::x' in document
    assert all(not any(c in key for c in "\n\x1b\u202e") for key in document)


def test_nothing_counted_is_an_empty_object(tmp_path: Path) -> None:
    write_bencher([], tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text()) == {}
