"""If, Loop and Scan: costlier branch, static trip counts, dynamic loops reported as skipped, nested subgraphs.

Every body below multiplies a [2, 4] activation by a [4, 4] weight from the outer scope: 2*4*4 = 32 MACs per
MatMul, which keeps the expected numbers easy to derive.
"""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
MM = 32  # MACs of one [2,4] @ [4,4]


def matmuls(prefix: str, count_: int, source: str = "x") -> list[Any]:
    nodes, current = [], source
    for i in range(count_):
        out = f"{prefix}_{i}"
        nodes.append(helper.make_node("MatMul", [current, "w"], [out], name=f"/{prefix}/mm{i}/MatMul"))
        current = out
    return nodes


def branch(prefix: str, n: int) -> Any:
    nodes = matmuls(prefix, n)
    return helper.make_graph(nodes, prefix, [], [helper.make_empty_tensor_value_info(nodes[-1].output[0])])


def loop_body(prefix: str, n: int, carried: str = "v") -> Any:
    """Body inputs (iteration, cond, carried); outputs (cond, carried): n MatMuls on the carried value."""
    nodes = matmuls(prefix, n, source=f"{carried}_in")
    nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    nodes.append(helper.make_node("Identity", [nodes[-2].output[0]], [f"{carried}_out"]))
    return helper.make_graph(
        nodes,
        prefix,
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_empty_tensor_value_info(f"{carried}_in"),
        ],
        [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_empty_tensor_value_info(f"{carried}_out")],
    )


def test_if_counts_its_costlier_branch(onnx_model):
    node = helper.make_node(
        "If", ["c"], ["y"], name="/gate/If", then_branch=branch("then", 3), else_branch=branch("else", 1)
    )
    report = count(onnx_model([node], inputs={"x": [2, 4], "c": (BOOL, [])}, inits={"w": [4, 4]}))
    assert (report.flops, report.macs) == (2 * 3 * MM, 3 * MM)  # then: 3 MatMuls
    assert report.skipped == {}
    assert set(report.layers) == {"then.mm0", "then.mm1", "then.mm2"}


def test_if_with_a_constant_condition_counts_the_taken_branch(onnx_model):
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", 3), else_branch=branch("else", 1))
    cond = helper.make_tensor("c", BOOL, [], [False])
    report = count(onnx_model([node], inputs={"x": [2, 4]}, inits={"w": [4, 4], "c": cond}))
    assert report.macs == MM  # else: 1 MatMul


def test_loop_with_a_static_trip_count(onnx_model):
    trip = helper.make_tensor("M", I64, [], [5])
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], name="/rnn/Loop", body=loop_body("step", 2))
    report = count(onnx_model([loop], inputs={"x": [2, 4]}, inits={"w": [4, 4], "M": trip}))
    # 5 iterations of 2 MatMuls
    assert (report.flops, report.macs) == (2 * 10 * MM, 10 * MM)
    assert report.layers["step.mm0"].ops["MatMul"].calls == 5
    assert report.skipped == {}


def test_loop_trip_count_folded_from_a_shape(onnx_model):
    """TorchScript writes `for t in range(x.size(0))` as Shape -> Gather -> Loop: static once shapes are bound."""
    index = helper.make_tensor("zero", I64, [], [0])
    nodes = [
        helper.make_node("Shape", ["seq"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["M"], axis=0),
        helper.make_node("Loop", ["M", "", "x"], ["y"], body=loop_body("step", 1)),
    ]
    model = onnx_model(nodes, inputs={"x": [2, 4], "seq": ["time", 3]}, inits={"w": [4, 4], "zero": index})
    assert count(model, inputs={"seq": [7, 3]}).macs == 7 * MM


def test_loop_with_a_dynamic_trip_count_is_skipped(onnx_model):
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], name="/decode/Loop", body=loop_body("step", 2))
    report = count(onnx_model([loop], inputs={"x": [2, 4], "M": (I64, [])}, inits={"w": [4, 4]}))
    assert report.macs == 0
    assert report.skipped == {"Loop": 1}
    assert report.skipped_ops["Loop"].reason == "dynamic trip count"
    assert report.skipped_ops["Loop"].layers == ["decode"]


def test_while_loop_is_dynamic(onnx_model):
    """No trip count (or INT64_MAX) with a condition is a while loop: its count is unknowable from shapes."""
    body = loop_body("step", 1)
    forever = {"M": helper.make_tensor("M", I64, [], [2**63 - 1])}
    for trip_inputs, inits in ((["", "c", "x"], {}), (["M", "c", "x"], forever)):
        loop = helper.make_node("Loop", trip_inputs, ["y"], body=body)
        cond = {"c": helper.make_tensor("c", BOOL, [], [True])}
        report = count(onnx_model([loop], inputs={"x": [2, 4]}, inits={"w": [4, 4], **cond, **inits}))
        assert report.skipped == {"Loop": 1}


def test_loop_whose_carried_shape_grows_is_skipped(onnx_model):
    body = helper.make_graph(
        [
            helper.make_node("Concat", ["v_in", "v_in"], ["v_out"], axis=0),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "grow",
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_empty_tensor_value_info("v_in"),
        ],
        [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_empty_tensor_value_info("v_out")],
    )
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)
    trip = helper.make_tensor("M", I64, [], [3])
    report = count(onnx_model([loop], inputs={"x": [2, 4]}, inits={"M": trip}))
    assert report.skipped_ops["Loop"].reason == "loop-carried shape changes between iterations"


def test_scan_multiplies_by_the_scan_length(onnx_model):
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["xs", "w"], ["p"], name="/cell/MatMul"),
            helper.make_node("Add", ["s_in", "p"], ["s_out"], name="/cell/Add"),
            helper.make_node("Identity", ["p"], ["ys"]),
        ],
        "cell",
        [helper.make_empty_tensor_value_info("s_in"), helper.make_empty_tensor_value_info("xs")],
        [helper.make_empty_tensor_value_info("s_out"), helper.make_empty_tensor_value_info("ys")],
    )
    scan = helper.make_node("Scan", ["s0", "seq"], ["s_final", "ys_all"], body=body, num_scan_inputs=1)
    model = onnx_model(
        [scan], inputs={"s0": [2, 4], "seq": [6, 2, 4]}, inits={"w": [4, 4]}, outputs=["s_final", "ys_all"]
    )
    report = count(model)
    # 6 steps of MatMul (32 MACs) + Add (8 elements)
    assert (report.flops, report.macs) == (6 * (2 * MM + 8), 6 * MM)
    assert report.layers["cell"].ops["MatMul"].calls == 6


def test_nested_if_inside_a_loop_reads_outer_scope_weights(onnx_model):
    inner_if = helper.make_node(
        "If", ["flag"], ["h"], then_branch=branch_on("v_in", "deep", 2), else_branch=branch_on("v_in", "shallow", 1)
    )
    body = helper.make_graph(
        [
            inner_if,
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["h"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_empty_tensor_value_info("v_in"),
        ],
        [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_empty_tensor_value_info("v_out")],
    )
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)
    trip = helper.make_tensor("M", I64, [], [4])
    report = count(onnx_model([loop], inputs={"x": [2, 4], "flag": (BOOL, [])}, inits={"w": [4, 4], "M": trip}))
    assert report.macs == 4 * 2 * MM  # 4 iterations of the costlier (2 MatMul) branch
    assert report.skipped == {}


def branch_on(source: str, prefix: str, n: int) -> Any:
    nodes = matmuls(prefix, n, source=source)
    return helper.make_graph(nodes, prefix, [], [helper.make_empty_tensor_value_info(nodes[-1].output[0])])


def test_skipped_ops_inside_a_loop_are_reported_once_per_iteration(onnx_model):
    axis = helper.make_tensor("axis", I64, [], [0])  # CumProd: shape-preserving, no formula
    body = helper.make_graph(
        [
            helper.make_node("CumProd", ["v_in", "axis"], ["v_out"], name="/sel/CumProd"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_empty_tensor_value_info("v_in"),
        ],
        [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_empty_tensor_value_info("v_out")],
    )
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)
    trip = helper.make_tensor("M", I64, [], [3])
    report = count(onnx_model([loop], inputs={"x": [2, 4]}, inits={"M": trip, "axis": axis}, opset=26))
    assert report.skipped == {"CumProd": 3}
    assert report.skipped_ops["CumProd"].layers == ["sel"]


def test_loop_carrying_an_int64_counter_and_untyped_body_inputs(onnx_model):
    one = helper.make_tensor("one", I64, [1], [1])
    body = helper.make_graph(
        [
            helper.make_node("Add", ["n_in", "one"], ["n_out"], name="/count/Add"),
            helper.make_node("MatMul", ["v_in", "w"], ["v_out"], name="/step/MatMul"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("it", I64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_empty_tensor_value_info("n_in"),
            helper.make_empty_tensor_value_info("v_in"),
        ],
        [
            helper.make_tensor_value_info("cond_out", BOOL, []),
            helper.make_empty_tensor_value_info("n_out"),
            helper.make_empty_tensor_value_info("v_out"),
        ],
    )
    loop = helper.make_node("Loop", ["M", "", "n0", "x"], ["n", "y"], body=body)
    inits = {"w": [4, 4], "M": helper.make_tensor("M", I64, [], [3]), "one": one}
    report = count(onnx_model([loop], inputs={"x": [2, 4], "n0": (I64, [1])}, inits=inits, outputs=["n", "y"]))
    # 3 iterations of a 32-MAC MatMul and a 1-element add
    assert (report.flops, report.macs, report.skipped) == (3 * (2 * MM + 1), 3 * MM, {})
