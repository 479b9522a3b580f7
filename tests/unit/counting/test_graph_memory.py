"""graph_memory: the bytes rule and the peak of live bytes the JAX and TensorFlow engines share, on programs written
by hand (no framework): liveness over the op order, views, inlined calls, regions on top, branches, what is
resident, what leaves the figure not measured, and how a report is marked."""

from __future__ import annotations

from pytest_flopbudget._counting.graph_memory import PEAK_CONVENTION, Peak, Recorder, Value, measure_memory, traffic
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, FLOPS, PARAM_BYTES, PEAK_MEMORY
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def v(key: str, nbytes: int | None) -> Value:
    return Value(key, nbytes)


def op(rec: Recorder, name: str, reads: list[str | None], writes: list[Value], layer: str = "", **kw: object) -> None:
    with rec.equation(name, layer, reads, writes, **kw):  # type: ignore[arg-type]
        pass


# --- traffic ----------------------------------------------------------------------------------------------------


def test_traffic_reads_each_distinct_value_once_and_writes_each_output_once() -> None:
    # x * x: x (64 B) read once, out (64 B) written: 128
    assert traffic([v("x", 64), v("x", 64)], [v("out", 64)]) == 128
    # x + y: 64 + 32 read, 64 written
    assert traffic([v("x", 64), v("y", 32)], [v("out", 64)]) == 160


def test_traffic_of_a_value_without_a_size_is_none_never_low() -> None:
    assert traffic([v("x", None)], [v("out", 64)]) is None
    assert traffic([v("x", 64)], [v("out", None)]) is None


# --- liveness ---------------------------------------------------------------------------------------------------


def mlp(rec: Recorder) -> None:
    """x[2,4] -> dot with w1 -> add b1 -> relu -> dot with w2 -> out: the inputs hold 100 B (x 32, w1 32, b1 4, w2
    32), each intermediate is 64 B but the last (16 B)."""
    with rec.program([v("x", 32), v("w1", 32), v("b1", 4), v("w2", 32)], ["out"]):
        op(rec, "dot", ["x", "w1"], [v("h", 64)], "fc1")
        op(rec, "add", ["h", "b1"], [v("a", 64)], "fc1")
        op(rec, "relu", ["a"], [v("r", 64)], "act")
        op(rec, "dot", ["r", "w2"], [v("out", 16)], "fc2")


def test_peak_is_inputs_plus_the_live_intermediates_after_each_op() -> None:
    rec = Recorder()
    mlp(rec)
    # inputs 100; dot: +64 = 164; add: +64 = 228 (h still alive: the peak is taken before inputs are released), h
    # freed: 164; relu: +64 = 228 (a alive), a freed: 164; dot: +16 = 180. Peak 228, first reached in fc1.
    assert rec.peak() == Peak(228, "fc1")


def test_an_output_no_op_reads_is_released_at_once_and_an_output_of_the_program_never() -> None:
    rec = Recorder()
    with rec.program([v("x", 10)], ["kept"]):
        op(rec, "a", ["x"], [v("dead", 100), v("kept", 1)], "a")  # 10 + 101 = 111, then the dead 100 go
        op(rec, "b", ["x"], [v("c", 50)], "b")  # 11 + 50 = 61
    assert rec.peak() == Peak(111, "a")


def test_a_view_shares_its_operands_storage() -> None:
    rec = Recorder()
    with rec.program([v("x", 10)], ["out"]):
        op(rec, "exp", ["x"], [v("e", 100)], "a")  # 110
        op(rec, "reshape", ["e"], [v("r", 100)], "a", views=[0])  # a view: still 110, e's storage is r's
        op(rec, "neg", ["r"], [v("out", 100)], "b")  # 210: e's storage is alive through r until here
        op(rec, "tanh", ["x"], [v("t", 100)], "c")  # e freed after neg: 110 + 100 = 210, not above
    assert rec.peak() == Peak(210, "b")


def test_a_view_of_a_constant_holds_no_storage() -> None:
    rec = Recorder()
    with rec.program([v("x", 8)], ["out"]):
        op(rec, "broadcast", [None], [v("zeros", 400)], views=[0])  # a literal broadcast: nothing allocated
        op(rec, "max", ["x", "zeros"], [v("out", 8)], "relu")  # 8 + 8
    assert rec.peak() == Peak(16, "relu")


def test_resident_values_count_once_throughout() -> None:
    rec = Recorder()
    rec.resident(v("w", 1000))
    rec.resident(v("w", 1000))  # the same variable read twice
    with rec.program([v("x", 8)], ["out"]):
        op(rec, "mul", ["x", "w"], [v("out", 8)], "lin")
    assert rec.peak() == Peak(1016, "lin")  # 1000 + 8 + 8


def test_let_go_releases_an_output_after_its_last_reader() -> None:
    # a training step's model output: summed into the loss, then let go before the backward
    rec = Recorder()
    with rec.program([v("x", 8)], ["y", "loss", "grad"]):
        op(rec, "f", ["x"], [v("y", 100)], "model")  # 108
        op(rec, "sum", ["y"], [v("loss", 4)], "")  # 112
        op(rec, "g", ["x"], [v("grad", 50)], "model")  # kept y: 162; let go: 62
    assert rec.peak().bytes == 162
    rec.let_go(["y"])
    assert rec.peak() == Peak(112, "")


def test_a_view_that_only_names_a_let_go_output_does_not_keep_it() -> None:
    # TensorFlow returns each output through an Identity written after every other op
    rec = Recorder()
    with rec.program([v("x", 8)], ["out", "loss", "grad"]):
        op(rec, "f", ["x"], [v("y", 100)], "model")  # 108
        op(rec, "sum", ["y"], [v("loss", 4)], "")  # 112
        op(rec, "g", ["x"], [v("grad", 50)], "model")  # 162 while the Identity below keeps y
        op(rec, "Identity", ["y"], [v("out", 100)], "", views=[0])
    assert rec.peak().bytes == 162
    rec.let_go(["out"])
    assert rec.peak() == Peak(112, "")  # y freed after the sum: 8 + 4 + 50 = 62 in g


# --- calls, regions, branches -----------------------------------------------------------------------------------


def test_an_inlined_call_is_its_body_spelled_out_in_place() -> None:
    rec = Recorder()
    with rec.program([v("x", 10)], ["out"]), rec.equation("call", "", ["x"], [v("out", 20)], inline=True):
        body(rec, [v("p", 10)], ["q"], [("exp", ["p"], [v("e", 20)]), ("neg", ["e"], [v("q", 20)])])
    # p is x and q becomes out: x 10; exp +20 = 30; neg +20 = 50 (e freed after). Had the call been a region, its
    # output (20) would sit beside the body's own peak (40): 70
    assert rec.peak() == Peak(50, "inner")


def body(rec: Recorder, inputs: list[Value], outputs: list[str], ops: list[tuple[str, list[str], list[Value]]]) -> None:
    """A body program of `ops`, all in layer `inner`."""
    with rec.program(inputs, outputs):
        for name, reads, writes in ops:
            op(rec, name, list(reads), writes, "inner")


def test_a_region_body_peaks_on_top_of_what_is_live_around_it() -> None:
    # a scan: its result (the final carry, 8 B) is allocated when it starts; the body's inputs live outside it
    rec = Recorder()
    with rec.program([v("c0", 8), v("ws", 300)], ["c"]), rec.equation("scan", "", ["c0", "ws"], [v("c", 8)]):
        body(
            rec,
            [v("carry", 8), v("w", 100)],
            ["new"],
            [("dot", ["carry", "w"], [v("h", 16)]), ("tanh", ["h"], [v("new", 8)])],
        )
    # 308 inputs + 8 result + the body's own peak (h 16 and new 8 at once: 24) = 340, reached in the body's layer
    assert rec.peak() == Peak(340, "inner")


def test_the_costliest_branch_is_taken() -> None:
    rec = Recorder()
    with rec.program([v("x", 8)], ["out"]), rec.equation("cond", "", ["x"], [v("out", 8)]):
        with rec.program([v("a", 8)], ["b"]):
            op(rec, "small", ["a"], [v("b", 8)], "then")  # 8
        with rec.program([v("a", 8)], ["d"]):
            op(rec, "big", ["a"], [v("c", 100)], "else")  # 100
            op(rec, "small", ["c"], [v("d", 8)], "else")  # 108
    assert rec.peak() == Peak(8 + 8 + 108, "else")


def test_a_body_the_walk_did_not_enter_leaves_the_peak_not_measured() -> None:
    rec = Recorder()
    with rec.program([v("x", 8)], ["out"]):
        op(rec, "shard_map", ["x"], [v("out", 8)], "par", has_body=True)
    assert rec.peak().unsized == "the body of shard_map in layer 'par' could not be walked"


def test_a_written_value_without_a_size_leaves_the_peak_not_measured() -> None:
    rec = Recorder()
    with rec.program([v("x", 8)], ["out"]):
        op(rec, "TensorListReserve", ["x"], [v("out", None)], "lstm")
    assert rec.peak().unsized == "the size of an output of TensorListReserve in layer 'lstm' is not known"
    unknown = Recorder()
    with unknown.program([v("x", None)], []):
        pass
    assert unknown.peak().unsized == "an input's size is not known"


# --- the report -------------------------------------------------------------------------------------------------


def report_with_bytes() -> Report:
    layer = LayerCost({"param-bytes": 16})
    layer.add_op("dot", {FLOPS: 10, BYTES: 40})
    return Report(layers={"fc": layer}, forward=PhaseTotals({"flops": 10, "bytes": 40}), backend="jax")


def test_measured_metrics_get_figures_and_their_conventions() -> None:
    report = report_with_bytes()
    measure_memory(report, None, Peak(96, "fc"), bytes_convention="per equation")
    assert report.optional_metrics == {BYTES, PARAM_BYTES, BUFFER_BYTES, PEAK_MEMORY}
    assert (report.bytes, report.param_bytes, report.peak_memory, report.peak_layer) == (40, 16, 96, "fc")
    assert report.conventions[BYTES] == "per equation"
    assert report.conventions[PEAK_MEMORY] == PEAK_CONVENTION
    assert Report.from_dict(report.to_dict()) == report


def test_a_metric_not_measured_has_no_figure_and_says_why() -> None:
    report = report_with_bytes()
    measure_memory(report, "a size is not fixed", Peak(0, unsized="a body could not be walked"), bytes_convention="")
    assert report.optional_metrics == {PARAM_BYTES, BUFFER_BYTES}
    assert not report.measures(BYTES) and not report.measures(PEAK_MEMORY)
    assert report.conventions[BYTES] == "not measured: a size is not fixed"
    assert report.conventions[PEAK_MEMORY] == "not measured: a body could not be walked"
    assert BYTES not in report.layers["fc"].values and BYTES not in report.forward.values
    data = report.to_dict()
    assert "bytes" not in data["totals"] and "peak_memory" not in data
    assert not Report.from_dict(data).measures(PEAK_MEMORY)
