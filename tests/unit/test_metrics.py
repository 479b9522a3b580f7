"""The metric definitions and their registry, and the seam they make: a metric defined here (a toy `activations`
metric in bytes, with binary prefixes) is parsed, judged and shown by the unchanged config, judge and reporters."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import parse_budget, parse_quantity
from pytest_flopbudget._config.location import LocatedError, Location
from pytest_flopbudget._config.pyproject import BUDGET_KEYS
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Measurement, evaluate
from pytest_flopbudget._metrics import (
    BUFFER_BYTES,
    BYTES,
    FLOPS,
    INT_OPS,
    MACS,
    METRICS,
    PARAM_BYTES,
    PARAMS,
    PEAK_MEMORY,
    PER_OP,
    SKIPPED,
    Metric,
    by_name,
    define,
)
from pytest_flopbudget._render.formatting import format_value, metric_title
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._reporters import json_report, markdown, terminal
from pytest_flopbudget._units import BINARY, SI


def test_the_metrics_in_their_order_with_their_names() -> None:
    names = ["flops", "macs", "int-ops", "params", "skipped", "bytes", "param-bytes", "buffer-bytes", "peak-memory"]
    assert list(METRICS) == names
    assert [m.key for m in METRICS] == [*names[:4], "max-skipped-ops", *names[5:]]
    assert [m.argument for m in METRICS] == [n.replace("-", "_") for n in [*names[:4], "max-skipped-ops", *names[5:]]]
    labels = [
        "FLOPs",
        "MACs",
        "integer ops",
        "params",
        "skipped op calls",
        "bytes moved",
        "param bytes",
        "buffer bytes",
        "peak memory",
    ]
    assert [m.label for m in METRICS] == labels
    assert METRICS.growth == (FLOPS, MACS, INT_OPS, PARAMS, BYTES, PARAM_BYTES, BUFFER_BYTES, PEAK_MEMORY)
    assert METRICS.counted == (FLOPS, MACS, INT_OPS, PARAMS, BYTES, PARAM_BYTES, BUFFER_BYTES)
    assert METRICS.per_op == (FLOPS, MACS, INT_OPS, BYTES)
    assert METRICS.optional == (BYTES, PARAM_BYTES, BUFFER_BYTES, PEAK_MEMORY) and METRICS.omit_zero == (INT_OPS,)
    assert all(m.prefixes == SI for m in METRICS if not m.optional)
    assert BYTES.prefixes == PARAM_BYTES.prefixes == BUFFER_BYTES.prefixes == PEAK_MEMORY.prefixes == BINARY | SI


def test_lookups() -> None:
    assert METRICS.get("macs") is MACS and METRICS.get("activations") is None
    assert METRICS.by_key("max-skipped-ops") is SKIPPED and METRICS.by_key("skipped") is None
    assert METRICS.by_argument("max_skipped_ops") is SKIPPED
    assert METRICS.by_unit("GFLOPs"[1:]) is FLOPS and METRICS.by_unit("parameters") is PARAMS
    assert by_name("params") is PARAMS
    match = (
        "unknown metric 'gflops'; expected one of flops, macs, int-ops, params, skipped, bytes, param-bytes, "
        "buffer-bytes, "
        "peak-memory"
    )
    with pytest.raises(ValueError, match=match):
        by_name("gflops")


def test_a_metric_is_its_name_in_json_pickle_and_dicts() -> None:
    assert FLOPS == "flops" and hash(FLOPS) == hash("flops") and {"flops": 1}[FLOPS] == 1
    assert str(SKIPPED) == "skipped" and f"{SKIPPED}" == "skipped" and repr(SKIPPED) == "'skipped'"
    assert json.dumps({FLOPS: 1, "m": [MACS]}) == '{"flops": 1, "m": ["macs"]}'
    assert pickle.loads(pickle.dumps(MACS)) is MACS and copy.deepcopy(PARAMS) is PARAMS
    assert isinstance(Metric, type) and isinstance(FLOPS, str)


def test_config_maps_come_from_the_definitions() -> None:
    assert BUDGET_KEYS == {
        "flops": "flops",
        "macs": "macs",
        "int-ops": "int-ops",
        "params": "params",
        "max-skipped-ops": "skipped",
        "bytes": "bytes",
        "param-bytes": "param-bytes",
        "buffer-bytes": "buffer-bytes",
        "peak-memory": "peak-memory",
        "max-increase": "max_increase",
        "warn-increase": "warn_increase",
    }


def test_values_print_as_before() -> None:
    assert format_value(8_520_000_000, FLOPS) == "8.52 GFLOPs"
    assert format_value(2_050_000_000, "macs") == "2.05 GMACs"  # type: ignore[arg-type]
    assert format_value(25_557_032, PARAMS) == "25.6M params"
    assert format_value(1, SKIPPED) == "1 skipped op call" and format_value(3, SKIPPED) == "3 skipped op calls"
    assert metric_title(SKIPPED) == "skipped op calls" and metric_title(None) == ""


# -- the seam: a metric defined in a test ---------------------------------------------------------------------------


@pytest.fixture
def activations() -> Iterator[Metric]:
    """A toy per-op metric counted in bytes with binary (and decimal) prefixes, registered for one test."""
    metric = define(
        "activations",
        label="activation bytes",
        column="act",
        units=("b", "byte", "bytes"),
        prefixes=BINARY | SI,
        symbol="B",
        scope=PER_OP,
    )
    METRICS.add(metric)
    try:
        yield metric
    finally:
        METRICS.remove(metric)
    assert METRICS.get("activations") is None


def _report(activations: Metric, flops: int, used: int) -> Report:
    layers = {"enc": LayerCost({FLOPS: flops, activations: used - 1024}), "head": LayerCost({activations: 1024})}
    return Report(layers=layers, forward=PhaseTotals({FLOPS: flops, activations: used}), model="Toy")


def test_a_new_metric_parses_its_binary_budget(activations: Metric) -> None:
    limit = parse_quantity("512MiB", "activations")
    assert (limit.metric, limit.value, limit.text) == ("activations", 512 * 2**20, "512MiB")
    assert limit.value == 536_870_912
    assert parse_quantity("0.5 GB", "activations").value == 500_000_000  # decimal prefixes too
    assert parse_quantity("1Ki", "activations").value == 1024
    with pytest.raises(LocatedError, match="an activations budget takes activation bytes, not 'FLOPs'"):
        parse_quantity("1G FLOPs", "activations")
    # the existing metrics still refuse binary prefixes, with the message they always gave
    with pytest.raises(LocatedError, match="binary prefixes such as 'Gi' are not accepted; prefixes are decimal"):
        parse_quantity("4Gi", "flops")


def test_a_new_metric_is_judged_and_shown_by_every_output(activations: Metric, tmp_path: Path) -> None:
    budget = parse_budget({"flops": "1G", "activations": "512MiB"}, {}, Location(str(tmp_path / "t.py"), 3, "t"))
    baseline = _report(activations, 100, 400 * 2**20)
    now = _report(activations, 100, 600 * 2**20)
    verdict = evaluate(Measurement("toy", now, budget, Location(str(tmp_path / "t.py"), 3, "t")), baseline)

    assert not verdict.passed
    assert verdict.failed_metrics() == ["activations"]
    assert reason(verdict) == "toy: 600 MiB > budget 512 MiB (+17.2%); baseline 400 MiB"
    assert verdict.value(activations) == 600 * 2**20 and verdict.delta(activations) == 200 * 2**20

    lines = terminal.summary_lines([verdict])
    assert lines[0].split() == ["model", "status", "FLOPs", "MACs", "params", "skipped", "act", "budget", "use", "vs",
                                "baseline"]  # fmt: skip
    assert "600Mi" in lines[1] and "+50.0% activations" in lines[1]
    details = terminal.details(verdict, front_end=CLI, start=str(tmp_path))
    assert "activation bytes per layer, against the baseline file:" in details
    assert "400Mi" in details and "+200Mi (+50.0%)" in details  # the layer diff, in the metric's own prefixes
    assert 'set activations = "600Mi" at t.py:3' in details  # the suggested ceiling, in the metric's own prefixes

    data = json_report.results([verdict], root=tmp_path)["models"][0]
    assert data["metrics"]["activations"]["now"] == 600 * 2**20
    assert data["metrics"]["activations"]["over"] is True
    assert data["report"]["totals"]["activations"] == 600 * 2**20
    assert data["report"]["layers"]["head"]["metrics"] == {"flops": 0, "macs": 0, "params": 0, "activations": 1024}
    assert Report.from_dict(data["report"]) == now  # the JSON layout carries it without loss

    summary = markdown.summary([verdict], front_end=CLI, workspace=tmp_path)
    row = next(line for line in summary.splitlines() if "activation bytes" in line)
    assert "512Mi" in row and "600Mi" in row and "400Mi" in row and "+200Mi (+50.0%)" in row
