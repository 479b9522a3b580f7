"""Hostile ONNX models: counts beyond float range, names that are not valid UTF-8, huge exporter metadata.

Each must give a report whose JSON round-trips, or one clear line; never a traceback, never minutes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from growth import assert_linear

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget._counting.onnx.backend import count_onnx  # noqa: E402
from pytest_flopbudget._counting.onnx.consts import _BINARY  # noqa: E402
from pytest_flopbudget._counting.onnx.names import ModulePaths, text  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402
from pytest_flopbudget._metrics import FLOPS  # noqa: E402
from pytest_flopbudget._render.table import format_layer_table  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


def _expanded(rank: int, op: str = "Relu", dim: int = 2**62) -> Any:
    """A scalar expanded to `rank` dims of `dim` (each a valid int64), then `op` on the result."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    shape = helper.make_tensor("s", TensorProto.INT64, [rank], [dim] * rank)
    nodes = [
        helper.make_node("Expand", ["x", "s"], ["y"], name="big/Expand"),
        helper.make_node(op, ["y"], ["z"], name="big/Op"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _round_trips(report: Report) -> None:
    dumped = json.dumps(report.to_dict(), ensure_ascii=True)
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")  # no lone surrogates either
    assert Report.from_dict(json.loads(dumped)) == report


# --- counts beyond float range ----------------------------------------------------------------------------------


def test_a_count_beyond_float_range_is_one_clear_counting_error() -> None:
    with pytest.raises(CountingError) as info:
        count_onnx(_expanded(20, "Sigmoid"))  # 2**1240 elements: 374 digits, far beyond 1.8e308
    message = str(info.value)
    assert "\n" not in message
    assert "374 digits" in message and "beyond what a report can hold" in message


@pytest.mark.parametrize("op", ["Softmax", "ReduceMean", "Sigmoid"])
def test_a_huge_count_within_bounds_is_exact_and_formats(op: str) -> None:
    report = count_onnx(_expanded(2, op, 2**40 + 1))  # ~1.2e24 elements: beyond int64, inside the 10^30 bound
    elements = (2**40 + 1) ** 2
    assert report.flops >= elements and report.flops % elements == 0  # exact integer arithmetic throughout
    _round_trips(report)
    table = format_layer_table(report, depth=None)
    assert "100.0%" in table


def test_the_table_share_is_exact_for_counts_beyond_float_range() -> None:
    report = count_onnx(_expanded(2, dim=2**40))
    big = report.layers["big"]
    big.add(FLOPS, big.flops * (10**290 - 1))  # ~1e314: 100.0 * flops overflowed
    report.forward.add(FLOPS, sum(cost.flops for cost in report.layers.values()) - report.forward.flops)
    assert "100.0%" in format_layer_table(report)


def test_constant_folding_divides_exact_integers() -> None:
    div = _BINARY["Div"]
    assert div(10**400 + 1, 10**200) == 10**200
    assert div(-7, 2) == -3 and div(7, -2) == -3 and div(-7, -2) == 3 and div(7, 0) == 0
    assert div(2**62 + 1, 1) == 2**62 + 1  # float division would round this


# --- names that are not valid UTF-8 -----------------------------------------------------------------------------


def _invalid_utf8_model(declare_domain: bool) -> Any:
    """Op type, domain, node name, graph name, input name, producer and metadata that are not valid UTF-8.

    `onnx.helper` only writes valid strings, so the bytes are patched in place (same lengths) and re-parsed.
    """
    x = helper.make_tensor_value_info("inpX", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    odd = helper.make_node("ReluX", ["inpX"], ["r"], name="blk/ReluX", domain="weird")
    relu = helper.make_node("Relu", ["r"], ["y"], name="nodeQ")
    helper.set_metadata_props(relu, {"pkg.torch.onnx.name_scopes": "['', 'modQ', 'relu']"})
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("weird", 1)] if declare_domain else [])
    model = helper.make_model(helper.make_graph([odd, relu], "graphG", [x], [y]), opset_imports=opsets)
    model.producer_name = "prodP"
    data = model.SerializeToString()
    for valid, invalid in [
        (b"ReluX", b"R\xffluX"),
        (b"weird", b"we\xc3(d"),
        (b"blk/", b"\xed\xa0\x80/"),  # an encoded lone surrogate
        (b"inpX", b"in\xfeX"),
        (b"graphG", b"grap\xffG"),
        (b"prodP", b"pro\xffP"),
        (b"modQ", b"mo\xffQ"),
    ]:
        assert data.count(valid) >= 1
        data = data.replace(valid, invalid)
    patched = onnx.ModelProto()
    patched.ParseFromString(data)
    assert isinstance(patched.graph.node[0].op_type, bytes)  # what onnx hands back for invalid UTF-8
    return patched


@pytest.mark.parametrize("declare_domain", [True, False])
def test_names_that_are_not_utf8_reach_the_report_as_valid_text(declare_domain: bool) -> None:
    report = count_onnx(_invalid_utf8_model(declare_domain))
    assert "we\\xc3(d.R\\xffluX" in report.skipped
    assert "\\xed\\xa0\\x80" in report.layers
    assert report.model == "grap\\xffG"
    assert report.inputs[0]["name"] == "in\\xfeX"
    assert report.versions["producer"] == "pro\\xffP"
    _round_trips(report)


def test_a_lone_surrogate_in_metadata_becomes_an_escape() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    relu = helper.make_node("Relu", ["x"], ["y"], name="n")
    helper.set_metadata_props(relu, {"pkg.torch.onnx.name_scopes": "['', 'a\\udc80b', 'relu']"})
    model = helper.make_model(helper.make_graph([relu], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    report = count_onnx(model)
    assert list(report.layers) == ["a\\udc80b"]
    _round_trips(report)


def test_text_decodes_bytes_and_escapes_surrogates() -> None:
    assert text(b"ok") == "ok"
    assert text(b"a\xffb") == "a\\xffb"
    assert text("a\udc80b") == "a\\udc80b"
    assert text("caf\u00e9") == "caf\u00e9"


# --- huge exporter metadata ---------------------------------------------------------------------------------------


def _with_metadata(value: str) -> Any:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    relu = helper.make_node("Relu", ["x"], ["y"], name="n")
    helper.set_metadata_props(relu, {"pkg.torch.onnx.name_scopes": value})
    return helper.make_model(helper.make_graph([relu], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


def _long_list(count: int) -> tuple[str, str]:
    return repr(["", *(f"m{i}" for i in range(count)), "relu"]), f"m{count - 1}"


def _f_string(count: int) -> tuple[str, str]:  # not a repr: ast.literal_eval was quadratic on it
    return "[f'" + "{1}" * count + "', 'relu']", "n"


def _escapes(count: int) -> tuple[str, str]:
    return repr(["", "\\x41" * count, "relu"]), "\\x41" * count


@pytest.mark.parametrize(
    ("metadata", "count"),
    [(_long_list, 500_000), (_f_string, 1_400_000), (_escapes, 1_000_000)],  # 4.4 MB of scopes, 4.2 MB, 4.0 MB
    ids=["long-list", "f-string", "escapes"],
)
def test_4mb_name_scopes_metadata_counts_in_linear_time(metadata: Callable[[int], tuple[str, str]], count: int) -> None:
    def counted(size: int) -> Callable[[], Report]:
        model = _with_metadata(metadata(size)[0])
        return lambda: count_onnx(model)

    # to 0.5 MB: quadratic parsing fails here in seconds (ast.literal_eval of the 4 MB f-string took 48 s per
    # count); benchmarks/bench_hostile.py times the 4 MB values
    assert_linear(counted, count // 64)
    value, layer = metadata(count)
    assert len(value) >= 4_000_000
    assert list(count_onnx(_with_metadata(value)).layers) == [layer]


def test_module_paths_read_name_scopes_as_repr_writes_them() -> None:
    paths = ModulePaths()
    for value, expected in [
        ("['', 'layer1', 'layer1.0', 'add']", "layer1.0"),
        ("['', \"it's\", 'add']", "it's"),
        ("['', 'a\\\\b', 'add',]", "a\\b"),
        ("['add']", ""),
        ("[]", ""),
    ]:
        assert paths.path(_with_metadata(value).graph.node[0]) == expected
    for broken in ["['', 1, 'add']", "['', 'a'", "['', 'a', 'add'] tail", "layer1"]:
        assert paths.path(_with_metadata(broken).graph.node[0]) == "n"  # falls back to the node name


# --- 700 KB node names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        (lambda levels: "a." * levels + "relu", lambda levels: "a." * levels + "relu"),  # a dotted module path
        (lambda levels: "/a" * levels + "/Relu", lambda levels: "a" + ".a" * (levels - 1)),  # a TorchScript scope
    ],
    ids=["dotted", "torchscript"],
)
def test_a_700kb_node_name_counts_and_renders_in_linear_time_and_bounded_memory(
    name: Callable[[int], str], layer: Callable[[int], str]
) -> None:
    """Every ancestor of the layer path was built as its own string (122 GB for 350,000 levels): now the tree stops
    at `MAX_TREE_DEPTH` levels, and TorchScript scopes deeper than `MAX_STITCHED` are not stitched."""
    import tracemalloc

    from pytest_flopbudget._render.flame import render_svg

    def shown(report: Report) -> tuple[str, str]:
        return format_layer_table(report, depth=None), render_svg(report)

    def counted_and_shown(levels: int) -> Callable[[], object]:
        model = _with_name(name(levels))
        return lambda: shown(count_onnx(model))

    assert_linear(counted_and_shown, 2_000)  # to 16,000 levels
    model = _with_name(name(350_000))  # 700 KB
    tracemalloc.start()
    try:
        report = count_onnx(model)
        table, svg = shown(report)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20
    assert list(report.layers) == [layer(350_000)]
    assert report.flops == 6  # Relu on [2, 3]: one comparison per element
    assert len(table) < 50_000 and svg.startswith("<svg")


def _with_name(name: str) -> Any:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    relu = helper.make_node("Relu", ["x"], ["y"], name=name)
    return helper.make_model(helper.make_graph([relu], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
