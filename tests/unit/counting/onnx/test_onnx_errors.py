"""Bad models and bad `inputs=`: one CountingError naming what to fix, or a skipped-op entry; never a traceback."""

from __future__ import annotations

import re

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


def matmul_model(onnx_model, dims=("batch", "seq", 8)):
    return onnx_model(
        [helper.make_node("MatMul", ["tokens", "w"], ["y"], name="/proj/MatMul")],
        inputs={"tokens": list(dims)},
        inits={"w": [8, 4]},
    )


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- files ---------------------------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(CountingError, match="no such ONNX file") as exc:
        count(str(tmp_path / "absent.onnx"))
    assert "absent.onnx" in one_line(exc)


def test_directory(tmp_path):
    (tmp_path / "model.onnx").mkdir()
    with pytest.raises(CountingError, match="is a directory"):
        count(tmp_path / "model.onnx")


def test_truncated_file(tmp_path, onnx_model):
    data = matmul_model(onnx_model, (2, 3, 8)).SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in (len(data) // 2, len(data) - 3, 7):
        path.write_bytes(data[:cut])
        with pytest.raises(CountingError) as exc:
            count(path)
        assert str(path) in one_line(exc)
        assert re.search("truncated|not an ONNX model|not a readable", str(exc.value))


@pytest.mark.parametrize("content", [b"this is a text file, not a model\n", bytes(range(256)) * 8, b""])
def test_not_an_onnx_file(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(CountingError) as exc:
        count(path)
    assert str(path) in one_line(exc)


def test_not_a_model_object():
    from pytest_flopbudget._counting.onnx.backend import count_onnx

    with pytest.raises(CountingError, match=r"path to an \.onnx file or an onnx\.ModelProto"):
        count_onnx(42)


# --- graph structure -----------------------------------------------------------------------------------------------


def test_unknown_domain_is_skipped_and_so_is_what_depends_on_it(onnx_model):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/pre/Relu"),
        helper.make_node("Frobnicate", ["a"], ["b"], name="/custom/Frobnicate", domain="com.example"),
        helper.make_node("MatMul", ["b", "w"], ["y"], name="/post/MatMul"),
    ]
    report = count(onnx_model(nodes, inputs={"x": [2, 8]}, inits={"w": [8, 4]}, domains={"com.example": 1}))
    assert report.flops == 16  # the Relu before it still counts
    assert report.skipped == {"MatMul": 1, "com.example.Frobnicate": 1}
    assert report.skipped_ops["com.example.Frobnicate"].reason == "no formula (unknown domain 'com.example')"
    assert report.skipped_ops["MatMul"].reason == "unknown shape after shape inference"


def test_undeclared_domain_is_skipped_with_the_reason(onnx_model):
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], domain="org.nowhere")]
    report = count(onnx_model(nodes, inputs={"x": [2, 8]}))
    assert "not declared in the model's opset_import" in report.skipped_ops["org.nowhere.Frobnicate"].reason


def test_cycle(onnx_model):
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
    ]
    with pytest.raises(CountingError, match="cycle") as exc:
        count(onnx_model(nodes, inputs={"x": [2]}))
    assert "'first'" in one_line(exc) and "'second'" in str(exc.value)


def test_self_loop_is_a_cycle(onnx_model):
    with pytest.raises(CountingError, match="cycle"):
        count(onnx_model([helper.make_node("Add", ["x", "y"], ["y"], name="me")], inputs={"x": [2]}))


def test_nodes_out_of_order_are_reordered(onnx_model):
    nodes = [
        helper.make_node("Relu", ["a"], ["y"], name="/second/Relu"),
        helper.make_node("MatMul", ["x", "w"], ["a"], name="/first/MatMul"),
    ]
    report = count(onnx_model(nodes, inputs={"x": [2, 8]}, inits={"w": [8, 4]}, outputs=["y"]))
    assert (report.flops, report.macs) == (2 * 64 + 8, 64)  # 2*4*8 = 64 MACs, relu 8


def test_negative_dim_declared_by_the_graph(onnx_model):
    with pytest.raises(CountingError, match="declares dimension -3") as exc:
        count(matmul_model(onnx_model, (2, -3, 8)))
    assert "'tokens'" in one_line(exc)


def test_negative_dim_in_an_initializer(onnx_model):
    model = matmul_model(onnx_model, (2, 3, 8))
    model.graph.initializer[0].dims[0] = -8
    with pytest.raises(CountingError, match="initializer 'w' has a negative dimension"):
        count(model)


def test_shape_inference_failure_names_the_node(onnx_model):
    with pytest.raises(CountingError, match=r"shape inference failed.*MatMul") as exc:
        count(matmul_model(onnx_model, (2, 3, 5)))  # [2,3,5] @ [8,4]
    one_line(exc)


def test_data_dependent_shape_is_skipped_not_zero(onnx_model):
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["f"], ["t"]),
        helper.make_node("MatMul", ["t", "w"], ["y"], name="/head/MatMul"),
    ]
    report = count(onnx_model(nodes, inputs={"x": [5]}, inits={"w": [1, 3]}))
    assert report.skipped == {"MatMul": 1}
    assert report.skipped_ops["MatMul"].layers == ["head"]


def test_malformed_node_is_skipped_with_the_reason(onnx_model):
    node = helper.make_node("Attention", ["x", "w"], ["y"], domain="com.microsoft")  # no num_heads
    report = count(onnx_model([node], inputs={"x": [2, 8, 32]}, inits={"w": [32, 96]}, domains={"com.microsoft": 1}))
    assert "malformed node" in report.skipped_ops["com.microsoft.Attention"].reason


# --- inputs= --------------------------------------------------------------------------------------------------------


def test_missing_sizes_list_every_input_and_show_the_inputs_to_write(onnx_model):
    nodes = [helper.make_node("Add", ["ids", "mask"], ["y"])]
    model = onnx_model(nodes, inputs={"ids": ["batch", "seq"], "mask": ["batch", "seq"], "scale": [1]})
    with pytest.raises(CountingError) as exc:
        count(model)
    message = one_line(exc)
    assert "'ids' [batch, seq]" in message and "'mask' [batch, seq]" in message and "'scale' [1]" in message
    assert "inputs={'ids': [<batch>, <seq>], 'mask': [<batch>, <seq>]}" in message


def test_symbols_bound_through_one_input_bind_the_others(onnx_model):
    nodes = [helper.make_node("Add", ["ids", "mask"], ["y"])]
    model = onnx_model(nodes, inputs={"ids": ["batch", "seq"], "mask": ["batch", "seq"]})
    assert count(model, inputs={"ids": [2, 16]}).flops == 32
    with pytest.raises(CountingError) as exc:
        model = onnx_model(nodes, inputs={"ids": ["batch", "seq"], "mask": ["batch", "seq", "?"]})
        count(model, inputs={"ids": [2, 3]})
    assert "inputs={'mask': [2, 3, <?>]}" in one_line(exc)


def test_unknown_dims_and_unknown_rank_need_binding(onnx_model):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(CountingError, match=r"'x' \[\?, 4\]"):
        count(onnx_model(nodes, inputs={"x": [None, 4]}))
    with pytest.raises(CountingError, match=r"'x' \[unknown rank\]"):
        count(onnx_model(nodes, inputs={"x": None}))
    assert count(onnx_model(nodes, inputs={"x": None}), inputs={"x": [3, 5]}).flops == 15


@pytest.mark.parametrize(
    ("inputs", "match"),
    [
        ({"tokenz": [1, 2, 8]}, "not a graph input; the graph inputs are 'tokens'"),
        ({"tokens": [1, 8]}, "has 2 dims"),
        ({"tokens": [1, 2, 9]}, "the model fixes the size to 8"),
        ({"tokens": [1, -2, 8]}, "sizes must be between 0 and"),
        ({"tokens": [1, 2**63, 8]}, "sizes must be between 0 and"),
        ({"tokens": [2**31, 2**31, 8]}, "more than an int64 can index"),
        ({"tokens": [1, 2.5, 8]}, "whole sizes"),
        ({"tokens": [1, True, 8]}, "whole sizes"),
        ({"tokens": "1,2,8"}, "must be a list of sizes"),
        ([1, 2, 8], "inputs= must map graph input names to shapes"),
    ],
)
def test_bad_inputs(onnx_model, inputs, match):
    with pytest.raises(CountingError, match=match) as exc:
        count(matmul_model(onnx_model), inputs=inputs)
    one_line(exc)


def test_conflicting_symbol_sizes(onnx_model):
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = onnx_model(nodes, inputs={"a": ["n"], "b": ["n"]})
    with pytest.raises(CountingError, match="'n' is bound to both 2 and 3"):
        count(model, inputs={"a": [2], "b": [3]})


def test_positional_inputs_are_rejected_for_onnx(onnx_model, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(matmul_model(onnx_model, (1, 2, 8)), path)
    with pytest.raises(CountingError, match="inputs="):
        count(str(path), [1, 2, 8])


def test_declared_sizes_that_overflow_int64(onnx_model):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(CountingError, match="more than an int64 can index") as exc:
        count(onnx_model(nodes, inputs={"x": [2**40, 2**40]}))
    one_line(exc)


def test_report_metadata_and_json_round_trip(onnx_model, tmp_path):
    from pytest_flopbudget import Report

    model = matmul_model(onnx_model)
    model.producer_name, model.producer_version = "unit-test", "1.0"
    path = tmp_path / "proj.onnx"
    onnx.save(model, path)
    report = count(path, inputs={"tokens": [2, 3, 8]})
    assert report.backend == "onnx" and report.model == "proj.onnx" and not report.training
    assert report.inputs == [{"name": "tokens", "shape": [2, 3, 8], "dtype": "float32"}]
    assert report.versions["opsets"] == "ai.onnx:17" and report.versions["producer"] == "unit-test 1.0"
    assert Report.from_dict(report.to_dict()).to_dict() == report.to_dict()
    assert (report.flops, report.macs, report.params) == (2 * 192, 192, 32)  # 6 rows * 4 * 8


def test_stale_value_info_left_by_an_exporter_is_dropped(onnx_model):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
        helper.make_node("Relu", ["h"], ["y"], name="/act/Relu"),
    ]
    model = onnx_model(nodes, inputs={"x": ["batch", 8]}, inits={"w": [8, 4]})
    model.graph.value_info.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 5]))  # wrong width
    report = count(model, inputs={"x": [3, 8]})
    assert (report.flops, report.macs, report.skipped) == (2 * 96 + 12, 96, {})  # 3*4*8 MACs, relu 12
