"""The one tally of both backends: costs by layer and phase, skipped and estimated ops, merging subgraph tallies."""

from __future__ import annotations

from pytest_flopbudget import Cost, Report
from pytest_flopbudget._counting.tally import NO_FORMULA, Tally, formula_failed
from pytest_flopbudget._metrics import BYTES, FLOPS, PARAMS


def test_costs_go_to_their_layer_and_phase() -> None:
    tally = Tally()
    tally.add("a", "mm", Cost(8, 4))
    tally.add("a", "mm", Cost(8, 4), backward=True)
    tally.add("b", "relu", Cost(6, 0), calls=3)
    assert (tally.forward.flops, tally.forward.macs) == (14, 4)
    assert (tally.backward.flops, tally.backward.macs) == (8, 4)
    assert (tally.flops, tally.macs) == (22, 8)
    mm = tally.layers["a"].ops["mm"]
    assert {"calls": mm.calls, **mm.values} == {"calls": 2, "flops": 16, "macs": 8}
    assert tally.layers["b"].ops["relu"].calls == 3


def test_a_skipped_op_keeps_its_first_reason_and_lists_each_layer_once_in_order() -> None:
    tally = Tally()
    tally.skip("b", "topk", NO_FORMULA)
    tally.skip("a", "topk", formula_failed("KeyError: 'k'"), calls=2)
    tally.skip("b", "topk", NO_FORMULA)
    entry = tally.skipped["topk"]
    assert (entry.calls, entry.layers, entry.reason) == (4, ["b", "a"], "no formula")
    assert tally.layers["a"].skipped == {"topk": 2}
    assert tally.layers["b"].skipped == {"topk": 2}
    assert (tally.flops, tally.macs) == (0, 0)


def test_estimated_ops_count_calls_and_layers() -> None:
    tally = Tally()
    tally.estimate("moe", "nonzero", "upper bound")
    tally.estimate("moe", "nonzero", "upper bound")
    tally.estimate("head", "nonzero", "other rule")
    entry = tally.estimated["nonzero"]
    assert (entry.calls, entry.layers, entry.rule) == (3, ["moe", "head"], "upper bound")


def test_merge_adds_a_subgraph_times_over() -> None:
    body = Tally()
    body.add("loop", "Add", Cost(5, 0))
    body.add("loop", "MatMul", Cost(20, 10), backward=True)
    body.skip("loop", "TopK", NO_FORMULA)
    body.estimate("loop", "NonZero", "rule")
    outer = Tally()
    outer.skip("head", "TopK", "first reason")
    outer.merge(body, times=3)
    assert outer.layers["loop"].ops["Add"].calls == 3
    assert (outer.forward.flops, outer.backward.flops, outer.backward.macs) == (15, 60, 30)
    assert (outer.skipped["TopK"].calls, outer.skipped["TopK"].layers) == (4, ["head", "loop"])
    assert outer.skipped["TopK"].reason == "first reason"
    assert outer.layers["loop"].skipped == {"TopK": 3}
    assert (outer.estimated["NonZero"].calls, outer.estimated["NonZero"].layers) == (3, ["loop"])


def test_merge_skipped_adds_only_what_was_skipped() -> None:
    cheaper = Tally()
    cheaper.add("else", "Mul", Cost(4, 0))
    cheaper.skip("else", "TopK", NO_FORMULA)
    outer = Tally()
    outer.merge_skipped(cheaper)
    assert (outer.flops, outer.skipped["TopK"].calls) == (0, 1)
    assert outer.layers["else"].ops == {}
    assert outer.layers["else"].skipped == {"TopK": 1}


def test_report_fields_fill_a_report() -> None:
    tally = Tally()
    tally.add("a", "mm", Cost(8, 4))
    tally.add("a", "mm", Cost(2, 1), backward=True)
    tally.skip("a", "topk", NO_FORMULA)
    tally.layers["a"].add(PARAMS, 7)  # a backend charges each module's own parameters to its layer
    report = Report(**tally.report_fields(), training=True)
    assert (report.flops, report.macs, report.params) == (10, 5, 7)
    assert (report.forward.flops, report.backward.flops) == (8, 2)
    assert report.skipped == {"topk": 1}
    assert report.estimated == {}
    assert report.layers["a"].ops["mm"].calls == 2


def test_forgetting_a_metric_drops_its_figures_and_the_ops_tallied_for_it_alone() -> None:
    tally = Tally()
    tally.add_values("a", "mm", {FLOPS: 8, BYTES: 20})
    tally.add_values("a", "cat", {BYTES: 12})  # free of FLOPs: listed for its bytes alone
    tally.add_values("b", "cat", {BYTES: 4}, backward=True)
    tally.add_values("b", "dropout", {BYTES: 4})  # a zero-cost formula: its call stays listed
    tally.forget(BYTES, {"cat"})
    assert (tally.forward.values, tally.backward.values) == ({FLOPS: 8}, {})
    assert tally.layers["a"].values == {FLOPS: 8} and set(tally.layers["a"].ops) == {"mm"}
    assert tally.layers["a"].ops["mm"].values == {FLOPS: 8}
    assert set(tally.layers["b"].ops) == {"dropout"} and tally.layers["b"].ops["dropout"].calls == 1
    tally.forget(BYTES, {"dropout"})
    assert set(tally.layers) == {"a"}  # a layer left with nothing goes
