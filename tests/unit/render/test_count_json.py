"""`flopbudget count --format json`: the Report's layout plus the intensities and the roofline estimate, which a
baseline never holds; the document still reads back as the same Report."""

from __future__ import annotations

import json

from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, PARAM_BYTES, PARAMS
from pytest_flopbudget._render.count_json import count_data, count_document
from pytest_flopbudget._render.roofline import profile
from pytest_flopbudget._render.roofline_report import roofline_for
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def _report(measured: bool = True) -> Report:
    """fc: a bias-free bf16 Linear (240 FLOPs, 148 bytes); act: 24 FLOPs over 96 bytes; wte: parameters only."""
    fc = LayerCost({PARAMS: 30, PARAM_BYTES: 60} if measured else {PARAMS: 30})
    fc.add_op("aten.mm", {FLOPS: 240, MACS: 120, BYTES: 148} if measured else {FLOPS: 240, MACS: 120})
    act = LayerCost()
    act.add_op("aten.relu", {FLOPS: 24, BYTES: 96} if measured else {FLOPS: 24})
    wte = LayerCost({PARAMS: 10, PARAM_BYTES: 20} if measured else {PARAMS: 10})
    totals = {FLOPS: 264, MACS: 120, BYTES: 244} if measured else {FLOPS: 264, MACS: 120}
    return Report(
        layers={"fc": fc, "act": act, "wte": wte},
        forward=PhaseTotals(totals),
        optional_metrics=frozenset({BYTES, PARAM_BYTES}) if measured else frozenset(),
    )


def test_intensity_of_the_model_and_of_each_layer_that_moves_bytes() -> None:
    data = count_data(_report())
    assert data["intensity"] == 264 / 244
    assert data["layers"]["fc"]["intensity"] == 240 / 148
    assert data["layers"]["act"]["intensity"] == 24 / 96
    assert "intensity" not in data["layers"]["wte"]  # moves nothing: absent, not 0 and not infinite
    assert "roofline_estimate" not in data


def test_no_intensity_where_bytes_are_not_measured() -> None:
    report = _report(measured=False)
    assert count_data(report) == report.to_dict()


def test_roofline_estimate_per_layer_and_for_the_model() -> None:
    report = _report()
    h100 = profile("h100-sxm")
    data = count_data(report, roofline_for(report, h100, None))
    # both ops are memory-bound on H100 bf16 (ridge 295 FLOPs/byte): 148 and 96 bytes at 3.35e12 B/s
    assert data["layers"]["fc"]["roofline_estimate"] == {
        "seconds": 148 / 3.35e12, "bound": "memory", "compute_bound_seconds": 0.0, "memory_bound_seconds": 148 / 3.35e12
    }  # fmt: skip
    assert data["layers"]["wte"]["roofline_estimate"]["bound"] == "idle"
    model = data["roofline_estimate"]
    assert model["seconds"] == float((148 + 96) / 3.35e12) and model["bound"] == "memory"
    assert (model["hardware"], model["dtype"], model["source"]) == ("h100-sxm", "bf16", h100.source)
    assert model["note"].startswith("roofline estimate: ")


def test_the_document_reads_back_as_the_same_report() -> None:
    report = _report()
    text = count_document(report, roofline_for(report, profile("l4"), "fp32"))
    assert text.endswith("\n") and text.isascii()
    assert Report.from_dict(json.loads(text)) == report
