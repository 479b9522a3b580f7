"""The per-layer table of `flopbudget count`: row order, and time linear in the number of layers."""

from __future__ import annotations

from collections.abc import Callable

from growth import assert_linear

from pytest_flopbudget._render.table import format_layer_table, tree_order
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report, ancestors


def _report(layers: dict[str, LayerCost]) -> Report:
    flops = sum(cost.flops for cost in layers.values())
    macs = sum(cost.macs for cost in layers.values())
    return Report(layers=layers, forward=PhaseTotals(flops=flops, macs=macs))


def test_tree_order_keeps_first_appearance_and_subtrees_together() -> None:
    order = tree_order(["b.x", "a", "b.y", "a.z", "b.x.q", "c", "a"])
    assert sorted(order, key=order.__getitem__) == ["", "b", "b.x", "b.x.q", "b.y", "a", "a.z", "c"]


def test_ancestors_of_odd_paths() -> None:
    assert list(ancestors("")) == [""]
    assert list(ancestors("a.b.c")) == ["", "a", "a.b", "a.b.c"]
    assert list(ancestors("a..b")) == ["", "a", "a.", "a..b"]
    assert list(ancestors(".a")) == ["", ".a"]  # the root once: its inclusive cost counts `.a` once


def test_a_leading_dot_does_not_count_the_root_twice() -> None:
    from pytest_flopbudget._report import LayerCost, Report

    report = Report(layers={".a": LayerCost(flops=5)})
    assert report.inclusive()[""].flops == 5


def _siblings(count: int) -> Report:
    layers = {f"blocks.{i}": LayerCost(flops=2 * i, macs=i, params=1) for i in range(count)}
    layers["head"] = LayerCost(flops=2, macs=1)
    return _report(layers)


def test_sibling_layers_format_in_linear_time() -> None:
    # 20,000 siblings under one parent: the sibling list used to be scanned once per layer (34 s for 40,000).
    # benchmarks/bench_render.py times 100,000.
    def table(count: int) -> Callable[[], str]:
        report = _siblings(count)
        return lambda: format_layer_table(report, depth=None)

    assert_linear(table, 2_500)
    rows = [line.split()[0] for line in table(5_000)().splitlines()[2:5_005]]
    assert rows[:3] == ["(model)", "blocks", "blocks.0"] and rows[-2:] == ["blocks.4999", "head"]


def test_inclusive_rolls_up_every_ancestor() -> None:
    report = _report({"a.b": LayerCost(flops=4, macs=2), "a": LayerCost(flops=2, macs=1), "": LayerCost(flops=1)})
    inclusive = report.inclusive()
    assert {path: cost.flops for path, cost in inclusive.items()} == {"": 7, "a": 6, "a.b": 4}
    assert report.layers["a.b"].flops == 4  # the layers themselves are untouched


def test_the_layer_tree_is_cut_at_its_depth_and_name_limits() -> None:
    from pytest_flopbudget._report import MAX_TREE_DEPTH, MAX_TREE_NAME

    deep = ".".join(["m"] * 1000)  # 1000 levels: the first MAX_TREE_DEPTH ancestors, then the path itself
    chain = list(ancestors(deep))
    assert chain[1 : MAX_TREE_DEPTH + 1] == [".".join(["m"] * n) for n in range(1, MAX_TREE_DEPTH + 1)]
    assert chain == ["", *chain[1 : MAX_TREE_DEPTH + 1], deep]
    wide = "w" * (MAX_TREE_NAME + 1) + ".x.y"  # the first ancestor is already longer than MAX_TREE_NAME
    assert list(ancestors(wide)) == ["", wide]
    # the ancestors of an ancestor are the same chain cut short: still a tree
    assert list(ancestors(chain[10])) == chain[:11]


def test_a_700kb_dotted_layer_name_formats_in_linear_time_and_memory() -> None:
    import tracemalloc

    def dotted(levels: int) -> Report:
        return _report({"a." * levels + "relu": LayerCost(flops=8, macs=0), "head": LayerCost(flops=2, macs=1)})

    def table(levels: int) -> Callable[[], object]:
        report = dotted(levels)
        return lambda: (report.inclusive(), format_layer_table(report, depth=None))

    assert_linear(table, 2_000)  # 2,000 to 16,000 levels: every prefix of 350,000 would be 122 GB of strings
    name = "a." * 350_000 + "relu"  # 700 KB
    report = dotted(350_000)
    tracemalloc.start()
    try:
        inclusive = report.inclusive()
        table_text = format_layer_table(report, depth=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20
    assert inclusive[""].flops == 10 and inclusive[name].flops == 8 and inclusive["a"].flops == 8
    assert len(table_text) < 50_000  # the name is shown cut (start…end), not padded into every row
    assert "a.a.a" in table_text and "…" in table_text


# -- memory columns -------------------------------------------------------------------------------------------------


def _memory_report() -> Report:
    """A bias-free bf16 Linear `fc` (x[4, 5] @ W[6, 5]^T: 240 FLOPs, (20 + 30 + 24) * 2 = 148 bytes, 30 parameters
    of 2 bytes) and an embedding `wte` that holds parameters but runs no counted op."""
    from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, PARAM_BYTES, PARAMS, PEAK_MEMORY

    fc = LayerCost({PARAMS: 30, PARAM_BYTES: 60})
    fc.add_op("aten.mm", {FLOPS: 240, MACS: 120, BYTES: 148})
    wte = LayerCost({PARAMS: 10, PARAM_BYTES: 20})
    report = Report(
        layers={"fc": fc, "wte": wte},
        forward=PhaseTotals({FLOPS: 240, MACS: 120, BYTES: 148}),
        optional_metrics=frozenset({BYTES, PARAM_BYTES, PEAK_MEMORY}),
        peak_memory=2_692_096,
        peak_layer="fc",
    )
    return report


def test_bytes_moved_and_intensity_columns_where_bytes_are_measured() -> None:
    lines = format_layer_table(_memory_report()).splitlines()
    assert lines[0].split() == ["layer", "FLOPs", "MACs", "params", "share", "bytes", "moved", "FLOPs/B"]
    # 240 FLOPs over 148 bytes = 1.62 FLOPs/byte; wte moves nothing: no intensity, shown as `-` (not 0, not inf)
    assert lines[2].split() == ["(model)", "240", "120", "40", "100.0%", "148", "1.62"]
    assert lines[3].split() == ["fc", "240", "120", "30", "100.0%", "148", "1.62"]
    assert lines[4].split() == ["wte", "0", "0", "10", "0.0%", "0", "-"]
    assert lines[6:9] == [
        "total: 240 FLOPs, 120 MACs, 40 params (240 FLOPs, 120 MACs)",
        "memory: 148 bytes moved (148 B), 1.62 FLOPs/byte; 80 param bytes (80 B)",
        "peak memory 2.57 MiB at fc",
    ]


def test_a_report_without_memory_figures_keeps_its_table() -> None:
    report = _report({"fc": LayerCost(flops=240, macs=120, params=30)})
    lines = format_layer_table(report).splitlines()
    assert lines[0].split() == ["layer", "FLOPs", "MACs", "params", "share"]
    assert lines[2].split() == ["(model)", "240", "120", "30", "100.0%"]
    assert not any(line.startswith(("memory:", "peak memory")) for line in lines)


def test_peak_at_the_model_itself_is_named_as_in_the_table() -> None:
    report = _memory_report()
    report.peak_layer = ""
    assert "peak memory 2.57 MiB at (model)" in format_layer_table(report).splitlines()


def test_roofline_columns_and_notes() -> None:
    from pytest_flopbudget._render.roofline import profile
    from pytest_flopbudget._render.roofline_report import roofline_for

    report = _memory_report()
    roofline = roofline_for(report, profile("h100-sxm"), None)  # 2-byte parameters: bf16
    lines = format_layer_table(report, roofline=roofline).splitlines()
    assert lines[0].split()[-5:] == ["moved", "FLOPs/B", "est.", "time", "bound"]
    # fc on H100 bf16: 1.62 FLOPs/byte is below the ridge point (295): 148 B / 3.35e12 B/s = 0.0442 ns
    assert lines[3].split() == ["fc", "240", "120", "30", "100.0%", "148", "1.62", "~0.0442", "ns", "memory"]
    assert lines[4].split()[-2:] == ["-", "-"]  # wte runs nothing: idle
    notes = [line for line in lines if "roofline estimate" in line or line.startswith("  est. time")]
    assert notes == roofline.notes()
    assert lines[-1].startswith("skipped ops: none")


def test_integer_ops_get_a_column_and_a_total_only_in_a_model_that_has_some() -> None:
    from pytest_flopbudget._metrics import INT_OPS

    plain = _report({"fc": LayerCost(flops=240, macs=120, params=30)})
    text = format_layer_table(plain)
    assert "int ops" not in text
    assert text.splitlines()[0].split() == ["layer", "FLOPs", "MACs", "params", "share"]
    layers = {"fc": LayerCost(flops=240, macs=120, params=30), "q": LayerCost({INT_OPS: 131_072})}
    quantized = Report(layers=layers, forward=PhaseTotals({"flops": 240, "macs": 120, INT_OPS: 131_072}))
    lines = format_layer_table(quantized).splitlines()
    assert lines[0].split() == ["layer", "FLOPs", "MACs", "int", "ops", "params", "share"]
    assert lines[4].split() == ["q", "0", "0", "131k", "0", "0.0%"]
    assert "total: 240 FLOPs, 120 MACs, 131,072 int ops, 30 params (240 FLOPs, 120 MACs, 131k int ops)" in lines


def test_a_report_read_back_from_json_has_its_siblings_in_natural_order() -> None:
    # `Report.to_dict` sorts the layers (0, 1, 10, 11, 2, ...): the forward order is lost, numbers read as numbers
    layers = {f"h.{i}.{part}": LayerCost(flops=10) for i in range(12) for part in ("ln", "attn")}
    layers["h.2²"] = LayerCost(flops=1)  # a digit that int() does not read is a name
    fresh = _report(layers)
    read_back = Report.from_dict(fresh.to_dict())
    assert list(read_back.layers)[:4] == ["h.0.attn", "h.0.ln", "h.1.attn", "h.1.ln"]
    assert list(read_back.layers)[4] == "h.10.attn"  # lexicographic, as written
    order = tree_order(read_back.layers)
    blocks = [path for path in sorted(order, key=order.__getitem__) if path.count(".") == 1]
    assert blocks == [f"h.{i}" for i in range(12)] + ["h.2²"]
    rows = [line.split()[0] for line in format_layer_table(read_back, depth=2).splitlines()[2:6]]
    assert rows == ["(model)", "h", "h.0", "h.1"]
    # a fresh count keeps the order the forward reached its layers (ln before attn)
    order = tree_order(fresh.layers)
    assert order["h.0.ln"] < order["h.0.attn"] < order["h.1"] < order["h.2"] < order["h.10"]
