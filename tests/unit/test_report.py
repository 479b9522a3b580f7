"""The Report's JSON codec: the current layout (`report/2`, keyed by metric) and the first one (`report/1`), which
committed baselines are still written in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_flopbudget._judge.baseline import BaselineStore, dumps, read_baseline
from pytest_flopbudget._metrics import FLOPS, MACS, PARAMS
from pytest_flopbudget._report import (
    REPORT_FORMAT,
    REPORT_FORMAT_1,
    EstimatedOp,
    LayerCost,
    OpCost,
    PhaseTotals,
    Report,
    SkippedOp,
)

#: A `report/1` baseline written by the release before metrics were keyed (a training step, skipped and estimated
#: ops, a layer with parameters only).
FORMAT_1 = Path(__file__).parent / "data" / "report_1.json"
#: The bundled examples' baselines as the tool wrote them in format 1 (before 1.0.0 moved the repository's own to
#: format 2): every one must still read, as a user's committed baselines will.
REPO_BASELINES = sorted((Path(__file__).parent / "data" / "format_1_baselines").glob("*.json"))


def expected_format_1() -> Report:
    """What the `report/1` fixture held, built by hand."""
    layers = {
        "": LayerCost(flops=4, ops={"aten.add": OpCost(2, flops=4)}, skipped={"aten.x": 1}),
        "fc1": LayerCost(
            flops=310,
            macs=150,
            params=40,
            ops={"aten.mm": OpCost(1, flops=300, macs=150), "aten.mm_backward": OpCost(1, flops=10)},
        ),
        "fc1.act": LayerCost(flops=8, ops={"aten.relu": OpCost(1, flops=8)}),
        "fc2": LayerCost(flops=50, macs=25, params=6, ops={"aten.addmm": OpCost(1, flops=50, macs=25)}),
        "head.norm": LayerCost(params=2),
    }
    return Report(
        layers=layers,
        forward=PhaseTotals(flops=362, macs=175),
        backward=PhaseTotals(flops=10),
        skipped_ops={"aten.x": SkippedOp(1, [""], "no formula")},
        estimated_ops={"aten.nonzero": EstimatedOp(1, ["fc1"], "upper bound")},
        training=True,
        model="TinyNet",
        inputs=[{"shape": [2, 8], "dtype": "float32"}],
        versions={"torch": "2.13.0", "pytest-flopbudget": "0.1.0"},
    )


def test_a_format_1_baseline_reads_as_it_always_did() -> None:
    data = json.loads(FORMAT_1.read_text())
    assert data["format"] == REPORT_FORMAT_1
    report = read_baseline(FORMAT_1)
    assert report == expected_format_1()
    assert (report.flops, report.macs, report.params, report.skipped_calls) == (372, 175, 48, 1)
    assert (report.forward.flops, report.backward.flops, report.forward.macs) == (362, 10, 175)
    for path, layer in data["layers"].items():  # every figure of the old layout, where it was
        cost = report.layers[path]
        assert (cost.flops, cost.macs, cost.params, cost.skipped) == (
            layer["flops"],
            layer["macs"],
            layer["params"],
            layer.get("skipped", {}),
        )
        assert {op: (c.calls, c.flops, c.macs) for op, c in cost.ops.items()} == {
            op: (c["calls"], c["flops"], c["macs"]) for op, c in layer["ops"].items()
        }


def test_format_2_round_trip_is_lossless() -> None:
    report = expected_format_1()
    text = dumps(report)
    data = json.loads(text)
    assert data["format"] == REPORT_FORMAT
    assert data["totals"] == {"flops": 372, "macs": 175, "params": 48}
    assert data["backward"] == {"flops": 10, "macs": 0}
    assert data["layers"]["fc2"] == {
        "metrics": {"flops": 50, "macs": 25, "params": 6},
        "ops": {"aten.addmm": {"calls": 1, "metrics": {"flops": 50, "macs": 25}}},
        "skipped": {},
    }
    again = Report.from_dict(data)
    assert again == report
    assert dumps(again) == text


def test_format_1_and_2_of_the_same_count_are_equal() -> None:
    old = read_baseline(FORMAT_1)
    new = Report.from_dict(json.loads(dumps(expected_format_1())))
    assert old == new
    assert old.to_dict() == new.to_dict()


@pytest.mark.parametrize("path", REPO_BASELINES, ids=[p.name for p in REPO_BASELINES])
def test_the_repositorys_own_format_1_baselines_read(path: Path) -> None:
    data = json.loads(path.read_text())
    report = read_baseline(path)
    assert {m: report.metric(m) for m in (FLOPS, MACS, PARAMS)} == data["totals"]
    assert Report.from_dict(json.loads(dumps(report))) == report


def test_an_update_leaves_an_unchanged_format_1_baseline_as_it_is(tmp_path: Path) -> None:
    """Upgrading rewrites no baseline whose count did not change; one that changed is written in the new layout."""
    store = BaselineStore(tmp_path)
    text = FORMAT_1.read_text()
    store.path_for("tiny").write_text(text)
    assert store.save("tiny", read_baseline(FORMAT_1)) is False
    assert store.path_for("tiny").read_text() == text
    grown = expected_format_1()
    grown.layers["fc2"].add(PARAMS, 1)
    assert store.save("tiny", grown) is True
    assert json.loads(store.path_for("tiny").read_text())["format"] == REPORT_FORMAT


def test_costs_are_keyed_by_metric_and_zeros_do_not_count() -> None:
    assert LayerCost(flops=0, macs=3) == LayerCost({MACS: 3})
    assert LayerCost(flops=2).values == {FLOPS: 2}
    with pytest.raises(ValueError, match="unknown metric 'flopz'"):
        LayerCost(flopz=1)


def test_peak_memory_round_trips_and_a_report_without_it_does_not_measure_it() -> None:
    from pytest_flopbudget._metrics import PEAK_MEMORY

    report = Report(peak_memory=2_692_096, peak_layer="1", optional_metrics=frozenset({PEAK_MEMORY}))
    data = report.to_dict()
    assert data["peak_memory"] == {"bytes": 2_692_096, "layer": "1"}
    back = Report.from_dict(data)
    assert back == report and back.measures(PEAK_MEMORY) and back.metric(PEAK_MEMORY) == 2_692_096
    assert PEAK_MEMORY.where(back) == "1"
    del data["peak_memory"]  # an older file, or an ONNX count: not measured, never 0
    assert not Report.from_dict(data).measures(PEAK_MEMORY)
    data["peak_memory"] = {"bytes": -1, "layer": "1"}
    with pytest.raises(ValueError, match=r"peak_memory\.bytes"):
        Report.from_dict(data)


def test_memory_timeline_names_the_layer_of_each_sample() -> None:
    from pytest_flopbudget._report import MemoryTimeline

    timeline = MemoryTimeline([10, 20, 30, 40, 50], [(1, "a"), (3, "\U0010ffffz")])
    # sample 0 is before the first op: the model itself; a run lasts until the next one begins
    assert [timeline.layer_at(index) for index in range(5)] == ["", "a", "a", "\U0010ffffz", "\U0010ffffz"]
    assert MemoryTimeline([10], []).layer_at(0) == ""


def test_integer_ops_are_written_only_where_there_are_some_and_read_as_zero_where_absent() -> None:
    from pytest_flopbudget._metrics import INT_OPS

    plain = expected_format_1()
    assert "int-ops" not in dumps(plain)  # a report without integer work is written as it always was
    assert Report.from_dict(json.loads(dumps(plain))).int_ops == 0  # and reads as zero, not as not measured

    quantized = expected_format_1()
    quantized.layers["fc2"].add_op("aten._int_mm", {INT_OPS: 1_024})
    quantized.forward.add(INT_OPS, 1_024)
    data = json.loads(dumps(quantized))
    assert data["totals"]["int-ops"] == data["forward"]["int-ops"] == 1_024 and data["backward"]["int-ops"] == 0
    assert data["layers"]["fc2"]["metrics"]["int-ops"] == 1_024 and data["layers"]["fc1"]["metrics"]["int-ops"] == 0
    assert data["layers"]["fc2"]["ops"]["aten._int_mm"] == {
        "calls": 1,
        "metrics": {"flops": 0, "macs": 0, "int-ops": 1_024},
    }
    assert "int-ops" in data["conventions"]
    again = Report.from_dict(data)
    assert again == quantized and again.int_ops == 1_024 and dumps(again) == dumps(quantized)
    data["layers"]["fc2"]["metrics"]["int-ops"] = 1_000  # a hand edit that no longer adds up is refused
    with pytest.raises(ValueError, match="total int-ops 1024 is not the sum of its layers"):
        Report.from_dict(data)


def test_every_metric_reads_as_an_attribute_named_by_its_marker_argument() -> None:
    """`report.bytes`, `report.param_bytes`, ... as `report.flops`: every metric of METRICS, so a new metric
    without its attribute fails here (docs/onnx.md cited `report.bytes` while only `report.metric("bytes")` worked)."""
    from pytest_flopbudget import count
    from pytest_flopbudget._metrics import METRICS, SKIPPED

    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    report = count(model.eval(), torch.zeros(2, 8))
    for metric in METRICS:
        name = "skipped_calls" if metric == SKIPPED else metric.argument
        assert getattr(report, name) == report.metric(metric), metric
    # by hand: 8*4 + 4 weights and biases of the Linear, 2*4 of the BatchNorm, float32: 44*4 = 176 param bytes;
    # its running mean and variance, 2*4 floats, and the int64 count of batches: 32 + 8 = 40 buffer bytes
    assert (report.param_bytes, report.buffer_bytes) == (176, 40)
    assert report.bytes > 0 and report.peak_memory > 0
