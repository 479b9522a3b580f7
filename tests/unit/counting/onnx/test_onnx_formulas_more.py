"""The rest of the ONNX formula table, each with its hand-derived integer: every elementwise and reduction op,
the remaining pools and resamplers, and the com.microsoft contrib ops (whose output shapes we fill in ourselves,
since onnx has no schema for them: a Relu after each proves the shape was known downstream)."""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.onnx.ops import ELEMENTWISE_OPS, REDUCE_OPS  # noqa: E402

F, U8, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
MS = "com.microsoft"
X = [2, 3, 4]  # 24 elements

#: Element type and arity of each elementwise op, where it is not "one float input".
ELEMENT_INPUTS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "PRelu"),
        (F, 2),
    ),
    **dict.fromkeys(("And", "Or", "Xor"), (BOOL, 2)),
    "Not": (BOOL, 1),
    **dict.fromkeys(("BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"), (U8, 2)),
    "BitwiseNot": (U8, 1),
    "Mod": (I64, 2),
}
ELEMENT_ATTRS: dict[str, dict[str, Any]] = {"BitShift": {"direction": "LEFT"}}


def exact(report: Any) -> tuple[int, int]:
    assert report.skipped == {}, report.skipped_ops
    return report.flops, report.macs


def scalar(name: str, elem: int = F, value: float = 1.0) -> Any:
    return helper.make_tensor(name, elem, [], [value])


@pytest.mark.parametrize("op", ELEMENTWISE_OPS)
def test_every_elementwise_op_costs_one_flop_per_output_element(onnx_model, op):
    elem, arity = ELEMENT_INPUTS.get(op, (F, 1))
    names = ["a", "b"][:arity]
    node = helper.make_node(op, names, ["y"], **ELEMENT_ATTRS.get(op, {}))
    model = onnx_model([node], inputs={n: (elem, X) for n in names}, opset=20 if op == "Gelu" else 18)
    if op == "Swish":
        model.opset_import[0].version = 24
    assert exact(count(model)) == (24, 0)  # 2*3*4 outputs


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_every_reduction_costs_one_flop_per_input_element(onnx_model, op):
    inputs = ["x", "axis"] if op == "CumSum" else ["x"]
    inits = {"axis": helper.make_tensor("axis", I64, [], [1])} if op == "CumSum" else {}
    model = onnx_model([helper.make_node(op, inputs, ["y"])], inputs={"x": X}, inits=inits, opset=18)
    assert exact(count(model)) == (24, 0)


def test_remaining_pools(onnx_model):
    for op in ("GlobalMaxPool", "GlobalLpPool"):
        m = onnx_model([helper.make_node(op, ["x"], ["y"])], inputs={"x": [1, 4, 8, 8]})
        assert exact(count(m)) == (256, 0)  # every one of 1*4*8*8 input elements
    lp = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    assert exact(count(onnx_model([lp], inputs={"x": [1, 4, 8, 8]}))) == (64 * 4, 0)  # 64 outputs, window 4
    hardmax = helper.make_node("Hardmax", ["x"], ["y"])
    assert exact(count(onnx_model([hardmax], inputs={"x": [2, 8, 10]}))) == (160, 0)  # an argmax over 160


def test_grid_sample_and_upsample(onnx_model):
    grid = helper.make_node("GridSample", ["x", "grid"], ["y"])  # opset 16 default mode: bilinear
    m = onnx_model([grid], inputs={"x": [1, 2, 4, 4], "grid": [1, 5, 5, 2]}, opset=16)
    assert exact(count(m)) == (50 * 7, 0)  # out [1,2,5,5] = 50, bilinear 7 per output
    up = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="linear")
    scales = helper.make_tensor("scales", F, [4], [1.0, 1.0, 2.0, 2.0])
    m = onnx_model([up], inputs={"x": [1, 2, 4, 4]}, inits={"scales": scales}, opset=9)
    assert exact(count(m)) == (128 * 7, 0)  # out [1,2,8,8] = 128


def test_scatter_nd_with_reduction(onnx_model):
    idx = helper.make_tensor("i", I64, [2, 1], [0, 2])
    s = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")
    m = onnx_model([s], inputs={"x": [4, 3], "u": [2, 3]}, inits={"i": idx}, opset=16)
    assert exact(count(m)) == (6, 0)  # 2 rows of 3 updates added


def test_dropout_before_opset_7_trains_unless_is_test(onnx_model):
    m = onnx_model([helper.make_node("Dropout", ["x"], ["y"])], inputs={"x": X}, opset=6)
    assert exact(count(m)) == (24, 0)
    m = onnx_model([helper.make_node("Dropout", ["x"], ["y"], is_test=1)], inputs={"x": X}, opset=6)
    assert exact(count(m)) == (0, 0)


# --- contrib ops: each followed by a Relu whose cost needs the contrib op's output shape -------------------------


def with_relu(node: Any, quantized: bool = False) -> list[Any]:
    """The node, then a Relu on its output (behind a free Cast to float when the output is uint8)."""
    if not quantized:
        return [node, helper.make_node("Relu", [node.output[0]], ["relu"])]
    cast = helper.make_node("Cast", [node.output[0]], ["as_float"], to=F)
    return [node, cast, helper.make_node("Relu", ["as_float"], ["relu"])]


def test_simplified_layer_norm_in_both_domains(onnx_model):
    for domain, opsets in (("", {}), (MS, {MS: 1})):
        n = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], domain=domain)
        m = onnx_model(with_relu(n), inputs={"x": [2, 8, 32]}, inits={"g": [32]}, domains=opsets)
        assert exact(count(m)) == (512 * 4 + 512, 0)  # RMS norm with weight 4 per element, then the relu


@pytest.mark.parametrize(
    ("op", "inputs", "inits", "expected"),
    [
        # input + bias + skip: 2 adds per element
        ("BiasAdd", {"x": [2, 8, 32], "skip": [2, 8, 32]}, {"b": [32]}, 512 * 2),
        ("BiasFastGelu", {"x": [2, 8, 32]}, {"b": [32]}, 512 * 2),  # bias add and the activation
    ],
)
def test_microsoft_bias_ops(onnx_model, op, inputs, inits, expected):
    names = ["x", "b", "skip"] if op == "BiasAdd" else ["x", "b"]
    n = helper.make_node(op, names, ["y"], domain=MS)
    m = onnx_model(with_relu(n), inputs=inputs, inits=inits, domains={MS: 1})
    assert exact(count(m)) == (expected + 512, 0)


def test_microsoft_embed_layer_norm(onnx_model):
    n = helper.make_node(
        "EmbedLayerNormalization", ["ids", "seg", "word", "pos", "segw", "g", "b"], ["y", "mask"], domain=MS
    )
    inputs = {"ids": (I32, [2, 8]), "seg": (I32, [2, 8])}
    inits = {"word": [100, 32], "pos": [16, 32], "segw": [2, 32], "g": [32], "b": [32]}
    m = onnx_model(with_relu(n), inputs=inputs, inits=inits, domains={MS: 1})
    # out [2,8,32] = 512: word + position + segment sums (2 adds) + layer norm 8, then the relu
    assert exact(count(m)) == (512 * 10 + 512, 0)


def test_microsoft_quantized_matmul_to_float(onnx_model):
    n = helper.make_node("MatMulIntegerToFloat", ["a", "b", "sa", "sb"], ["y"], domain=MS)
    m = onnx_model(
        with_relu(n), inputs={"a": (U8, [4, 6]), "b": (U8, [6, 5])}, inits={"sa": [1], "sb": [1]}, domains={MS: 1}
    )
    # 4*5*6 = 120 integer MACs: 240 integer ops; FLOPs: scaling each of 20 outputs to float, relu 20
    assert exact(count(m)) == (20 + 20, 0)
    assert count(m).int_ops == 240


def q_inits(*names: str) -> dict[str, Any]:
    return {n: scalar(n, U8, 0) if n.startswith("z") else scalar(n) for n in names}


Q_IO = q_inits("sx", "zx", "sy", "zy")


def test_microsoft_quantized_pools(onnx_model):
    n = helper.make_node(
        "QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS, kernel_shape=[2, 2], strides=[2, 2]
    )
    m = onnx_model(with_relu(n, quantized=True), inputs={"x": (U8, [1, 4, 8, 8])}, inits=Q_IO, domains={MS: 1})
    # out [1,4,4,4] = 64: window 4 each, requantise 2 each; relu 64
    assert exact(count(m)) == (64 * 4 + 64 * 2 + 64, 0)
    n = helper.make_node("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS)
    m = onnx_model(with_relu(n, quantized=True), inputs={"x": (U8, [1, 4, 8, 8])}, inits=Q_IO, domains={MS: 1})
    assert exact(count(m)) == (256 + 4 * 2 + 4, 0)  # read all 256, requantise the 4 outputs; relu 4


@pytest.mark.parametrize(("op", "per_element"), [("QLinearSigmoid", 3), ("QLinearLeakyRelu", 3), ("QLinearSoftmax", 7)])
def test_microsoft_quantized_unary(onnx_model, op, per_element):
    n = helper.make_node(op, ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS)
    m = onnx_model(with_relu(n, quantized=True), inputs={"x": (U8, X)}, inits=Q_IO, domains={MS: 1})
    assert exact(count(m)) == (24 * per_element + 24, 0)  # the op (1, softmax 5) + requantise 2; relu


def test_microsoft_qlinear_mul_and_dequantize(onnx_model):
    n = helper.make_node("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], domain=MS)
    m = onnx_model(
        with_relu(n, quantized=True),
        inputs={"a": (U8, X), "b": (U8, [4])},
        inits=q_inits("sa", "za", "sb", "zb", "sy", "zy"),
        domains={MS: 1},
    )
    assert exact(count(m)) == (24 * 3 + 24, 0)
    n = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], domain=MS)
    m = onnx_model(with_relu(n), inputs={"x": (U8, X)}, inits=q_inits("s", "z"), domains={MS: 1})
    assert exact(count(m)) == (48 + 24, 0)  # 2 per element, then the relu on the float output


# --- comparisons: TopK and Unique, by aten.topk's and aten._unique2's rules (README "comparisons") ------------------

COMPARISONS = [
    # [4, 10], k = 3 along the last axis: 40 compares + 4 rows * 3 * ceil(log2 3) = 24 sorting the picks -> 64
    pytest.param("TopK", {}, 3, 64, id="topk-sorted"),
    pytest.param("TopK", {"sorted": 0}, 3, 40, id="topk-unsorted"),
    pytest.param("TopK", {}, 1, 40, id="topk-1-as-argmax"),
    # axis 0: 10 rows of 4, k = 2: 40 + 10 * 2 * 1 = 60
    pytest.param("TopK", {"axis": 0}, 2, 60, id="topk-axis0"),
    # all 40 sorted (40 * ceil(log2 40) = 240) + 40 neighbour compares = 280
    pytest.param("Unique", {}, None, 280, id="unique"),
    # 4 slices along axis 0: 40 * ceil(log2 4) + 40 = 120
    pytest.param("Unique", {"axis": 0}, None, 120, id="unique-axis0"),
]


@pytest.mark.parametrize(("op", "attrs", "k", "flops"), COMPARISONS)
def test_comparison_ops_count_their_comparisons(onnx_model, op, attrs, k, flops):
    inputs = ["x", "k"] if k is not None else ["x"]
    outputs = ["v", "i"] if op == "TopK" else ["y"]
    inits = {"k": helper.make_tensor("k", I64, [1], [k])} if k is not None else {}
    node = helper.make_node(op, inputs, outputs, **attrs)
    model = onnx_model([node], inputs={"x": [4, 10]}, inits=inits, outputs=outputs[:1])
    assert exact(count(model)) == (flops, 0)
