"""The figures every history export records: each metric the count measured, under a unique, inert name."""

from __future__ import annotations

import dataclasses

from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, METRICS, PARAMS, PEAK_MEMORY, SKIPPED
from pytest_flopbudget._reporters.trend import Figure, figures, named, unit

PYPROJECT = pyproject(RESNET)


def test_every_measured_metric_with_its_ceiling_and_baseline(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    verdict = project.verdict("resnet", make_report({"a": 1200}, {"aten.fft": 2}), make_report({"a": 800}))
    found = figures(verdict)
    # the memory metrics were not measured (an ONNX count, an old baseline): no point, never a zero
    assert [f.metric for f in found] == [FLOPS, MACS, PARAMS, SKIPPED]
    assert found[0] == Figure(FLOPS, 1200, 1000, 800) and found[0].over
    assert found[1] == Figure(MACS, 600, None, 400) and not found[1].over
    assert found[3] == Figure(SKIPPED, 2, None, 0)


def test_optional_metrics_where_measured(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    report = dataclasses.replace(make_report({"a": 10}), optional_metrics=frozenset(METRICS.optional), peak_memory=4096)
    found = figures(project.verdict("resnet", report, make_report({"a": 10})))
    assert [f.metric for f in found] == [metric for metric in METRICS if not metric.omit_zero]  # no integer ops
    peak = next(f for f in found if f.metric == PEAK_MEMORY)
    assert peak == Figure(PEAK_MEMORY, 4096, None, None)  # the baseline did not measure it: no baseline figure


def test_integer_ops_where_the_model_has_some_or_its_baseline_had(make_project, make_report) -> None:
    from pytest_flopbudget._metrics import INT_OPS

    project = make_project(PYPROJECT)
    quantized = make_report({"a": 10})
    quantized.layers["a"].add_op("aten._int_mm", {INT_OPS: 131_072})
    quantized.forward.add(INT_OPS, 131_072)
    found = figures(project.verdict("resnet", quantized, make_report({"a": 10})))
    assert Figure(INT_OPS, 131_072, None, 0) in found  # the old baseline had none: a series from 0, not a gap
    # integer work gone since the baseline: the series goes on at 0 rather than stopping
    gone = figures(project.verdict("resnet", make_report({"a": 10}), quantized))
    assert Figure(INT_OPS, 0, None, 131_072) in gone


def test_names_are_inert_ordered_and_unique(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    report = make_report({"a": 1})

    def verdict(name: str, nodeid: str | None):
        base = project.verdict("resnet", report)
        return dataclasses.replace(base, measurement=dataclasses.replace(base.measurement, name=name, nodeid=nodeid))

    verdicts = [
        verdict("b", "tests/t.py::test_b"),
        verdict("b", "pyproject.toml::b"),
        verdict("a\x1b[2J\n::x", None),
        verdict("a\\x1b[2J\\x0a::x", None),  # reads like the one above once that is made inert
    ]
    assert [name for name, _ in named(verdicts)] == [
        "a\\x1b[2J\\x0a::x",
        "a\\x1b[2J\\x0a::x (2)",
        "b",  # the pyproject model keeps its plain name, as the CLI (one count per name) writes it
        "b [tests/t.py::test_b]",
    ]
    assert named(verdicts)[2][1].measurement.nodeid == "pyproject.toml::b"


def test_unit_words() -> None:
    assert [unit(metric) for metric in METRICS] == [
        "FLOPs", "MACs", "int ops", "params", "skipped op calls", "bytes", "bytes", "bytes", "bytes",
    ]  # fmt: skip
    assert unit(BYTES) == "bytes"
