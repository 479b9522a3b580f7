"""Ops without a formula whose ONNX schema defines them by a function body count through that body (issue 9).

The body (static, or generated for the node's attributes and input types) is inlined, re-inferred with the node's
real input shapes and priced with the ordinary formulas; the total is charged to the op itself. Each case below
derives the count from the body onnx 1.23 generates (printed with `onnx.printer` while writing these tests):
shape arithmetic inside a body (a `Sub` on a 1-element shape vector) is counted like any elementwise op.
"""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
PREVIEW = "ai.onnx.preview"


def node(op: str, inputs: list[str], outputs: list[str] | None = None, domain: str = "", **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs or ["y"], name=f"/block/{op}", domain=domain, **attrs)


def exact(report: Any) -> tuple[int, int]:
    assert report.skipped == {}, report.skipped_ops
    return report.flops, report.macs


def needs_schema(op: str, opset: int, domain: str = "") -> None:
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
    except Exception:
        pytest.skip(f"onnx {onnx.__version__} has no {op} at opset {opset}")
    if not (schema.has_function or schema.has_context_dependent_function):
        pytest.skip(f"{op} has no function body in onnx {onnx.__version__}")


def test_swiglu(onnx_model):
    needs_schema("SwiGLU", 28)
    m = onnx_model([node("SwiGLU", ["a", "b"])], inputs={"a": [2, 3, 4], "b": [2, 3, 4]}, opset=28)
    report = count(m)
    # body: Swish(A) then Mul(., B): 2*3*4 = 24 elements * (1 + 1) = 48
    assert exact(report) == (48, 0)
    assert report.ops["SwiGLU"].flops == 48  # charged to the op, not to the body's Swish and Mul
    assert report.layers["block"].flops == 48


def test_rotary_embedding(onnx_model):
    needs_schema("RotaryEmbedding", 23)
    rope = node("RotaryEmbedding", ["x", "cos", "sin"])
    m = onnx_model([rope], inputs={"x": [1, 2, 3, 8], "cos": [1, 3, 4], "sin": [1, 3, 4]}, opset=23)
    # x [B=1, H=2, S=3, D=8] is split into halves x1, x2 of 1*3*2*4 = 24 elements each;
    # real = cos*x1 - sin*x2, imag = sin*x1 + cos*x2: 4 Mul + Sub + Add = 6 ops * 24 = 144 (3 per element of x);
    # shape arithmetic: head_size - rotary_dim (Sub) and rotary_dim / 2 (Div) on 1-element vectors: 2
    assert exact(count(m)) == (146, 0)


def test_causal_conv_with_state(onnx_model):
    needs_schema("CausalConvWithState", 27)
    conv = node("CausalConvWithState", ["x", "w", "b"], ["y", "state"], activation="silu")
    m = onnx_model([conv], inputs={"x": [1, 4, 6]}, inits={"w": [4, 1, 3], "b": [4]}, opset=27, outputs=["y"])
    # depthwise causal conv (left zero pad k-1 = 2): out [1,4,6] = 24 outputs * (1 channel * 3 taps) = 72 MACs,
    # 144 FLOPs, bias 24; SiLU as Sigmoid + Mul 2*24 = 48; shape arithmetic k - 1 and the state start index: 2
    assert exact(count(m)) == (144 + 24 + 48 + 2, 72)


def test_linear_attention_runs_its_scan_body(onnx_model):
    needs_schema("LinearAttention", 27)
    la = node("LinearAttention", ["q", "k", "v"], ["y", "state"], update_rule="linear", q_num_heads=2, kv_num_heads=2)
    m = onnx_model([la], inputs={"q": [1, 2, 8], "k": [1, 2, 8], "v": [1, 2, 8]}, opset=27, outputs=["y"])
    # B=1, T=2, 2 heads of d_k = d_v = 4; a Scan over the 2 steps, each:
    #   S += k ⊗ v: a [4,1]@[1,4] MatMul per head = 2*4*4*1 = 32 MACs, the Add 2*4*4 = 32
    #   o = scale * (q^T S): [1,4]@[4,4] per head = 2*1*4*4 = 32 MACs, the scale Mul 2*4 = 8
    # per step 64 MACs and 128 + 32 + 8 = 168 FLOPs; 2 steps: 128 MACs, 336 FLOPs
    # shape arithmetic d_k = 8/2 and d_v = 8/2 (2 Div), then 1/sqrt(d_k) on a scalar (Sqrt, Reciprocal): 4
    assert exact(count(m)) == (336 + 4, 128)


def test_flex_attention_in_the_preview_domain(onnx_model):
    needs_schema("FlexAttention", 1, PREVIEW)
    fa = node("FlexAttention", ["q", "k", "v"], domain=PREVIEW)
    m = onnx_model(
        [fa], inputs={"q": [1, 2, 3, 4], "k": [1, 2, 5, 4], "v": [1, 2, 5, 4]}, opset=23, domains={PREVIEW: 1}
    )
    report = count(m)
    # 2 heads, 3 queries, 5 keys, head 4: QK^T 2*3*5*4 = 120 MACs, AV 2*3*4*5 = 120 MACs -> 240 MACs, 480 FLOPs;
    # softmax over 2*3*5 = 30 scores * 5 = 150; q and k each scaled by sqrt(scale): 24 + 40 = 64;
    # scale = 1/sqrt(4) and its sqrt on scalars, heads ratio Hq/Hkv: Sqrt, Div, Sqrt, Div = 4
    assert exact(report) == (480 + 150 + 64 + 4, 240)
    assert list(report.ops) == ["ai.onnx.preview.FlexAttention"]


def test_unknown_preview_op_is_not_an_unknown_domain(onnx_model):
    m = onnx_model([node("Frobnicate", ["x"], domain=PREVIEW)], inputs={"x": [2, 3]}, domains={PREVIEW: 1})
    report = count(m)
    assert report.skipped == {"ai.onnx.preview.Frobnicate": 1}
    assert report.skipped_ops["ai.onnx.preview.Frobnicate"].reason == "no formula"


def test_body_op_that_cannot_be_counted_is_reported_skipped(onnx_model):
    # HannWindow's body builds its samples with a float Range, whose length ONNX shape inference does not
    # propagate: the elementwise ops on the window have no shape and must be reported, not counted as zero
    m = onnx_model([node("HannWindow", ["size"])], inputs={"size": (I64, [])}, opset=17)
    report = count(m)
    assert report.skipped["Cos"] == 2
    reason = report.skipped_ops["Cos"].reason
    assert reason == "unknown shape after shape inference (in the function body of HannWindow)"
    assert report.skipped_ops["Cos"].layers == ["block"]
    # what could be counted is the scalar arithmetic on the size: Sub, Sub, Mul, Mul, Add, Div = 6
    assert report.ops["HannWindow"].flops == 6


def test_function_op_with_unknown_input_shape_is_skipped(onnx_model):
    needs_schema("SwiGLU", 28)
    nodes = [node("NonZero", ["x"], ["nz"]), node("Cast", ["nz"], ["f"], to=F), node("SwiGLU", ["f", "f"])]
    report = count(onnx_model(nodes, inputs={"x": [5]}, opset=28))
    assert report.skipped == {"SwiGLU": 1}
    assert report.skipped_ops["SwiGLU"].reason == "unknown shape after shape inference"


def test_op_without_formula_or_body_is_still_no_formula(onnx_model):
    report = count(onnx_model([node("Det", ["x"], ["d"])], inputs={"x": [2, 3, 3]}))
    assert report.skipped_ops["Det"].reason == "no formula"


def test_function_op_inside_an_if_branch(onnx_model):
    needs_schema("SwiGLU", 28)
    branch = helper.make_graph(
        [node("SwiGLU", ["a", "a"], ["out"])], "then", [], [helper.make_tensor_value_info("out", F, [2, 3, 4])]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["out2"])],
        "else",
        [],
        [helper.make_tensor_value_info("out2", F, [2, 3, 4])],
    )
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    m = onnx_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
        inputs={"a": [2, 3, 4]},
        inits={"c": cond},
        opset=28,
    )
    assert exact(count(m)) == (48, 0)  # the taken branch: SwiGLU on 24 elements, 2 each


def test_body_expansion_with_an_explicit_ai_onnx_domain_and_a_repeated_input(onnx_model):
    needs_schema("SwiGLU", 28)
    m = onnx_model([node("SwiGLU", ["a", "a"], domain="ai.onnx")], inputs={"a": [2, 3, 4]}, opset=28)
    m.opset_import[0].domain = "ai.onnx"
    assert exact(count(m)) == (48, 0)  # Swish 24 + Mul 24, as with the default-domain spelling
