"""`Report.phases`: a generation's prefill and decode steps in the `report/2` JSON, as an addition older files and
non-generating counts never carry."""

from __future__ import annotations

import json

import pytest

from pytest_flopbudget._metrics import BYTES, FLOPS, MACS
from pytest_flopbudget._report import PREFILL, LayerCost, Phase, PhaseTotals, Report, decode_step_name


def generation_report() -> Report:
    layer = LayerCost()
    layer.add_op("aten.mm", {FLOPS: 14, MACS: 7}, calls=3)
    phases = [
        Phase(PREFILL, {FLOPS: 8, MACS: 4}, peak_memory=100),
        Phase(decode_step_name(1), {FLOPS: 2, MACS: 1}, peak_memory=60),
        Phase(decode_step_name(2), {FLOPS: 4, MACS: 2}),
    ]
    return Report(layers={"lin": layer}, forward=PhaseTotals({FLOPS: 14, MACS: 7}), model="M.generate", phases=phases)


def test_phases_round_trip_and_name_each_step() -> None:
    report = generation_report()
    data = report.to_dict()
    assert [entry["name"] for entry in data["phases"]] == ["prefill", "decode 1", "decode 2"]
    assert data["phases"][0] == {"name": "prefill", "metrics": {"flops": 8, "macs": 4}, "peak_memory": 100}
    assert "peak_memory" not in data["phases"][2]  # not measured: absent, never 0
    back = Report.from_dict(json.loads(json.dumps(data)))
    assert back.phases == report.phases and back.generated == 3
    assert back.phase_list() == report.phases


def test_a_count_that_does_not_generate_has_no_phases_key() -> None:
    report = generation_report()
    report.phases = []
    assert "phases" not in report.to_dict()
    assert Report.from_dict(report.to_dict()).phases == []


def test_phases_that_do_not_add_up_to_the_totals_are_refused() -> None:
    data = generation_report().to_dict()
    data["phases"][1]["metrics"]["macs"] = 2
    with pytest.raises(ValueError, match="sum of the phases"):
        Report.from_dict(data)
    data["phases"][1]["metrics"]["macs"] = -1
    with pytest.raises(ValueError, match=r"phases\[1\].metrics.macs"):
        Report.from_dict(data)


def test_a_training_count_lists_forward_and_backward_as_its_phases() -> None:
    report = Report(training=True, forward=PhaseTotals({FLOPS: 6, BYTES: 3}), backward=PhaseTotals({FLOPS: 12}))
    assert [(phase.name, phase.flops) for phase in report.phase_list()] == [("forward", 6), ("backward", 12)]
    assert "phases" not in report.to_dict()  # the file keeps its forward and backward as it always did
    assert Report().phase_list() == []
