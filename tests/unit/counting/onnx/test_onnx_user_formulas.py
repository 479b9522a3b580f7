"""`register_formula(..., backend="onnx")` end to end: a custom-domain node built with `onnx.helper`, its output
shape given by value_info, first skipped, then priced by the user's formula; overriding a built-in; shapes the
formula needs but inference left open."""

from __future__ import annotations

from typing import Any, Callable

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import Cost, Report, count, register_formula  # noqa: E402
from pytest_flopbudget._counting.onnx.node import NodeContext  # noqa: E402
from pytest_flopbudget.formulas import registered_formulas  # noqa: E402

DOMAIN = "com.mycompany"
OP = f"{DOMAIN}.FusedGelu"
#: MatMul [2, 3, 4] @ [4, 5]: 2 * 3 * 5 * 4 = 120 MACs, 240 FLOPs
MATMUL = (240, 120)


def model(value_info: bool = True, approximate: str = "tanh") -> Any:
    """x [2, 3, 4] -> FusedGelu (com.mycompany) -> h -> MatMul(w [4, 5]) -> y; h's shape only from value_info."""
    nodes = [
        helper.make_node("FusedGelu", ["x"], ["h"], name="/act/FusedGelu", domain=DOMAIN, approximate=approximate),
        helper.make_node("MatMul", ["h", "w"], ["y"], name="/proj/MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [4, 5], b"\0" * 80, raw=True)],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 3, 4])] if value_info else [],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def fused_gelu(node: NodeContext) -> Cost:
    """8 FLOPs per element for the tanh form, 4 for the exact one: reads an attribute and both shapes."""
    assert node.input_shape(0) == node.output_shape(0)
    per_element = 8 if node.attr("approximate", "none") == "tanh" else 4
    return Cost(flops=per_element * node.output_numel(0), macs=0)


def test_custom_node_is_skipped_then_counted_after_registration() -> None:
    before = count(model())
    assert before.skipped == {OP: 1}
    assert before.skipped_ops[OP].reason == f"no formula (unknown domain '{DOMAIN}')"
    assert before.skipped_ops[OP].layers == ["act"]
    assert (before.flops, before.macs) == MATMUL  # the MatMul after it counts: value_info gave h's shape

    with register_formula((DOMAIN, "FusedGelu"), fused_gelu, backend="onnx"):
        after = count(model())
        exact = count(model(approximate="none"))
    assert after.skipped == {}
    assert (after.flops, after.macs) == (MATMUL[0] + 8 * 24, MATMUL[1])
    assert after.layers["act"].ops[OP].calls == 1
    assert exact.layers["act"].flops == 4 * 24

    assert count(model()).skipped == {OP: 1}  # removed with the block


def test_formula_receives_the_node_context() -> None:
    seen: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]] = []

    def spy(node: NodeContext) -> tuple[int, int]:
        seen.append((node.op_type, node.version, node.input_shape(0), node.output_shape(0)))
        return (5, 1)  # a plain (flops, macs) pair

    with register_formula(OP, spy, backend="onnx"):  # the report's label works as the key too
        report = count(model())
    assert seen == [("FusedGelu", 1, (2, 3, 4), (2, 3, 4))]
    assert report.layers["act"].ops[OP].flops == 5
    assert report.macs == MATMUL[1] + 1


def test_a_shape_inference_left_open_skips_the_op_with_the_reason() -> None:
    with register_formula((DOMAIN, "FusedGelu"), fused_gelu, backend="onnx"):
        report = count(model(value_info=False))
    assert report.skipped_ops[OP].reason == "unknown shape after shape inference"
    assert report.skipped_ops["MatMul"].reason == "unknown shape after shape inference"


def test_overriding_a_builtin_needs_override_and_is_undone_on_removal() -> None:
    relu = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_empty_tensor_value_info("y")],
    )
    proto = helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)])
    assert count(proto).flops == 6
    with pytest.raises(
        ValueError,
        match=r"^register_formula: ONNX op 'Relu' has a built-in formula in the onnx "
        r"backend; pass override=True to replace it$",
    ):
        register_formula(("", "Relu"), fused_gelu, backend="onnx")
    with register_formula(("ai.onnx", "Relu"), lambda node: (100, 0), backend="onnx", override=True):
        assert count(proto).flops == 100
    assert count(proto).flops == 6


def test_a_free_op_is_a_builtin_too() -> None:
    with pytest.raises(ValueError, match=r"ONNX op 'Reshape' is counted as free in the onnx backend"):
        register_formula("Reshape", fused_gelu, backend="onnx")


def test_a_failing_formula_skips_the_op_with_the_error() -> None:
    with register_formula(OP, lambda node: node.attr("approximate") * 2, backend="onnx"):
        report: Report = count(model())
    assert report.skipped == {OP: 1}
    assert report.skipped_ops[OP].reason == (
        "formula failed (TypeError: the formula returned 'tanhtanh', not a Cost or (flops, macs))"
    )


def test_the_documented_example_runs(documented_example: Callable[[str, str], str]) -> None:
    """docs/formulas.md, "ONNX ops": a custom-domain node, skipped, then counted (its asserts)."""
    code = documented_example("formulas.md", "ONNX ops")
    assert 'register_formula(("com.mycompany", "FusedGelu")' in code
    try:
        exec(compile(code, "docs/formulas.md", "exec"), {"__name__": "formulas_md"})
    finally:
        for handle in registered_formulas():
            handle.remove()
