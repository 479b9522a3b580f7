"""Integer products in the ONNX backend, on graphs built with onnx.helper: their work is `int-ops`, worked out by
hand; requantising and scaling to float stay FLOPs; a float product is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.onnx.ops import integer_arithmetic  # noqa: E402

F, U8, I8, I32, I64 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32, TensorProto.INT64


def figures(report: Any) -> tuple[int, int, int]:
    """(flops, macs, int-ops), after checking nothing was skipped."""
    assert report.skipped == {}, report.skipped_ops
    return report.flops, report.macs, report.int_ops


def zero_point(name: str, elem: int = U8) -> Any:
    return helper.make_tensor(name, elem, [], [0])


def scale(name: str) -> Any:
    return helper.make_tensor(name, F, [], [0.5])


def test_matmul_integer(onnx_model: Any) -> None:
    n = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    m = onnx_model(
        [n],
        inputs={"a": (I8, [2, 16, 32]), "b": (I8, [32, 8])},
        inits={"za": zero_point("za", I8), "zb": zero_point("zb", I8)},
    )
    # [2, 16, 32] @ [32, 8] -> int32 [2, 16, 8]: 2*16*8*32 = 8,192 integer MACs, 16,384 int-ops, no FLOPs
    assert figures(count(m)) == (0, 0, 16_384)


def test_qlinear_matmul_splits_the_product_from_the_requantisation(onnx_model: Any) -> None:
    n = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    inits = {k: scale(k) for k in ("sa", "sb", "sy")} | {k: zero_point(k) for k in ("za", "zb", "zy")}
    m = onnx_model([n], inputs={"a": (U8, [8, 16]), "b": (U8, [16, 4])}, inits=inits)
    # product 8*4*16 = 512 integer MACs -> 1,024 int-ops; requantising the 32 outputs at 2 FLOPs each -> 64 FLOPs
    assert figures(count(m)) == (64, 0, 1_024)


def test_a_matmul_on_int64_tensors_is_integer_work(onnx_model: Any) -> None:
    n = helper.make_node("MatMul", ["a", "b"], ["y"])
    m = onnx_model([n], inputs={"a": (I64, [4, 6]), "b": (I64, [6, 5])})
    assert figures(count(m)) == (0, 0, 2 * 4 * 5 * 6)


def test_an_int32_gemm_counts_its_bias_add_as_an_integer_op(onnx_model: Any) -> None:
    n = helper.make_node("Gemm", ["a", "b", "c"], ["y"])
    c = helper.make_tensor("c", I32, [5], [0] * 5)
    b = helper.make_tensor("b", I32, [6, 5], [0] * 30)
    m = onnx_model([n], inputs={"a": (I32, [4, 6])}, inits={"b": b, "c": c})
    assert figures(count(m)) == (0, 0, 240 + 20)  # 2*4*5*6 for the product, 1 per output for the add


def test_a_float_matmul_is_unchanged(onnx_model: Any) -> None:
    m = onnx_model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs={"a": [4, 6], "b": [6, 5]})
    report = count(m)
    assert figures(report) == (240, 120, 0)
    assert "int-ops" not in report.to_dict()["totals"] and "int-ops" not in report.to_dict()["conventions"]


def test_the_rule_moves_products_only_and_only_on_integer_types() -> None:
    product, elementwise = Cost(240, 120), Cost(20, 0)
    assert integer_arithmetic(product, I32) == Cost(0, 0, 240)
    assert integer_arithmetic(product, F) == product and integer_arithmetic(product, 0) == product  # unknown: FLOPs
    assert integer_arithmetic(product, TensorProto.BOOL) == product
    assert integer_arithmetic(elementwise, I64) == elementwise  # elementwise integer arithmetic stays FLOPs
