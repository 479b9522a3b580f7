"""Every ONNX formula against a hand-derived exact integer, on graphs built with onnx.helper.

Each case writes its derivation next to the expected numbers. Conventions (shared with the PyTorch backend):
1 MAC = 2 FLOPs; elementwise ops cost 1 FLOP per output element; a bias add 1 per output element; softmax 5 per
element; norms 4 (statistics) + 2 (apply) + 1 per affine term; RMS norm 2 + 1 (+ 1 weight); reductions 1 per
input element; (de)quantisation 2 per element.
"""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import Cost, count  # noqa: E402
from pytest_flopbudget._counting.onnx.ops import ONNX_OPS, einsum_cost  # noqa: E402
from pytest_flopbudget._counting.registry import FREE  # noqa: E402

F, U8, I8, I32, I64 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32, TensorProto.INT64
MS = "com.microsoft"


def node(op: str, inputs: list[str], outputs: list[str] | None = None, domain: str = "", **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs or ["y"], name=f"/block/{op}", domain=domain, **attrs)


def exact(report: Any) -> tuple[int, int]:
    """(flops, macs), after checking nothing was skipped: a skipped op would make the expectation meaningless."""
    assert report.skipped == {}, report.skipped_ops
    assert report.backend == "onnx"
    return report.flops, report.macs


def scalar(name: str, elem: int = F, value: float = 1.0) -> Any:
    return helper.make_tensor(name, elem, [], [value])


# --- matrix products -------------------------------------------------------------------------------------------


def test_matmul_2d(onnx_model):
    m = onnx_model([node("MatMul", ["a", "b"])], inputs={"a": [4, 6], "b": [6, 5]})
    # M*N*K = 4*5*6 = 120 MACs; 2*120 = 240 FLOPs
    assert exact(count(m)) == (240, 120)


def test_matmul_broadcast_batch(onnx_model):
    m = onnx_model([node("MatMul", ["a", "b"])], inputs={"a": [2, 1, 4, 6], "b": [3, 6, 5]})
    # batch broadcast (2,1) x (3,) -> (2,3) = 6 products of 4*5*6 = 120 -> 720 MACs
    assert exact(count(m)) == (1440, 720)


def test_matmul_vector(onnx_model):
    m = onnx_model([node("MatMul", ["a", "b"])], inputs={"a": [6], "b": [6, 5]})
    # a 1-D left operand is a row: 1*5*6 = 30 MACs
    assert exact(count(m)) == (60, 30)


def test_gemm_dense_layer_matches_tensorflow_reference(onnx_model):
    m = onnx_model([node("Gemm", ["x", "w", "b"])], inputs={"x": [25, 16], "w": [16, 9], "b": [9]})
    # REFERENCE.md (TensorFlow profiler): 2*25*16*9 + 25*9 = 7200 + 225 = 7425 FLOPs, 3600 MACs
    assert exact(count(m)) == (7425, 3600)


def test_gemm_transposes_and_scales(onnx_model):
    g = node("Gemm", ["x", "w", "b"], transA=1, transB=1, alpha=2.0, beta=0.5)
    m = onnx_model([g], inputs={"x": [16, 25], "w": [9, 16], "b": [25, 9]})
    # A^T is [25,16], B^T is [16,9]: 7200 FLOPs; then per output add + beta multiply + alpha multiply = 3*225
    assert exact(count(m)) == (7200 + 675, 3600)


def test_gemm_without_bias(onnx_model):
    m = onnx_model([node("Gemm", ["x", "w"])], inputs={"x": [25, 16], "w": [16, 9]})
    assert exact(count(m)) == (7200, 3600)  # 2*25*16*9


@pytest.mark.parametrize(
    ("equation", "shapes", "expected"),
    [
        ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]], (240, 120)),  # b*i*j*k = 2*3*4*5 = 120 MACs
        ("i,j->ij", [[3], [4]], (12, 0)),  # outer product: 3*4 = 12 multiplies, no accumulation
        ("ij->i", [[3, 4]], (12, 0)),  # a sum over j: 12 input elements
        ("ij->ji", [[3, 4]], (0, 0)),  # a transpose is free
        ("...ij,...jk->...ik", [[2, 3, 4], [2, 4, 5]], (240, 120)),  # ellipsis batch 2: 2*3*4*5 = 120
        ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]], (128, 64)),  # (ij,jk->ik) 2*3*4=24, (ik,kl->il) 2*4*5=40
        ("ij,jk", [[2, 3], [3, 4]], (48, 24)),  # implicit output "ik": 2*3*4 = 24
        ("ik,kj->ij", [[3, 1], [1, 4]], (12, 0)),  # contracts only a size-1 index: a multiply, as torch lowers it
    ],
)
def test_einsum(onnx_model, equation, shapes, expected):
    names = [f"x{i}" for i in range(len(shapes))]
    m = onnx_model([node("Einsum", names, equation=equation)], inputs=dict(zip(names, shapes)), opset=12)
    assert exact(count(m)) == expected
    assert einsum_cost(equation, shapes) == Cost(*expected)


def test_matmul_integer_and_qlinear_matmul(onnx_model):
    m = onnx_model([node("MatMulInteger", ["a", "b"])], inputs={"a": (U8, [4, 6]), "b": (U8, [6, 5])})
    # 4*5*6 = 120 integer MACs: 240 integer ops, no FLOPs; zero points are part of the integer accumulation
    assert exact(count(m)) == (0, 0)
    assert count(m).int_ops == 240
    q = node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"])
    inits = {
        "sa": scalar("sa"),
        "za": scalar("za", U8, 0),
        "sb": scalar("sb"),
        "zb": scalar("zb", U8, 0),
        "sy": scalar("sy"),
        "zy": scalar("zy", U8, 0),
    }
    m = onnx_model([q], inputs={"a": (U8, [4, 6]), "b": (U8, [6, 5])}, inits=inits)
    # 2*120 = 240 integer ops for the product; requantising 4*5 outputs at 2 FLOPs = 40 FLOPs
    assert exact(count(m)) == (40, 0)
    assert count(m).int_ops == 240


# --- convolution -----------------------------------------------------------------------------------------------


def test_conv_with_bias(onnx_model):
    c = node("Conv", ["x", "w", "b"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    m = onnx_model([c], inputs={"x": [1, 3, 8, 8]}, inits={"w": [4, 3, 3, 3], "b": [4]})
    # out [1,4,8,8] = 256 elements, each (3 in-channels * 3*3 taps) = 27 MACs -> 6912; bias 256
    assert exact(count(m)) == (2 * 6912 + 256, 6912)


def test_depthwise_conv_divides_channels_by_groups(onnx_model):
    c = node("Conv", ["x", "w"], pads=[1, 1, 1, 1], group=4)
    m = onnx_model([c], inputs={"x": [1, 4, 8, 8]}, inits={"w": [4, 1, 3, 3]})
    # 256 outputs * (4/4 channels * 9 taps) = 2304 MACs
    assert exact(count(m)) == (4608, 2304)


def test_strided_conv(onnx_model):
    c = node("Conv", ["x", "w"], strides=[2, 2])
    m = onnx_model([c], inputs={"x": [1, 3, 9, 9]}, inits={"w": [2, 3, 3, 3]})
    # out [1,2,4,4] = 32 elements * 27 = 864 MACs
    assert exact(count(m)) == (1728, 864)


def test_conv_transpose_follows_input_size(onnx_model):
    c = node("ConvTranspose", ["x", "w", "b"], strides=[2, 2])
    m = onnx_model([c], inputs={"x": [1, 4, 5, 5]}, inits={"w": [4, 2, 3, 3], "b": [2]})
    # every input element (4*5*5 = 100) scatters through 2 out-channels * 9 taps: 1800 MACs;
    # output [1,2,11,11] = 242 elements get the bias
    assert exact(count(m)) == (3600 + 242, 1800)


def test_conv_integer_and_qlinear_conv(onnx_model):
    c = node("ConvInteger", ["x", "w"], pads=[1, 1, 1, 1])
    w = helper.make_tensor("w", U8, [4, 3, 3, 3], b"\0" * 108, raw=True)
    m = onnx_model([c], inputs={"x": (U8, [1, 3, 8, 8])}, inits={"w": w})
    assert exact(count(m)) == (0, 0)
    assert count(m).int_ops == 13824  # as the float conv above, no bias, in integer ops
    q = node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], pads=[1, 1, 1, 1])
    inits = {
        "w": w,
        "sx": scalar("sx"),
        "zx": scalar("zx", U8, 0),
        "sw": scalar("sw"),
        "zw": scalar("zw", U8, 0),
        "sy": scalar("sy"),
        "zy": scalar("zy", U8, 0),
        "b": helper.make_tensor("b", I32, [4], [0, 0, 0, 0]),
    }
    m = onnx_model([q], inputs={"x": (U8, [1, 3, 8, 8])}, inits=inits)
    # integer ops: 2*6912 + int32 bias add 256 = 14080; FLOPs: requantisation 2*256 = 512
    assert exact(count(m)) == (512, 0)
    assert count(m).int_ops == 14080


# --- attention -------------------------------------------------------------------------------------------------


def test_onnx_attention_4d(onnx_model):
    a = node("Attention", ["q", "k", "v"])
    m = onnx_model([a], inputs={"q": [2, 4, 8, 16], "k": [2, 4, 10, 16], "v": [2, 4, 10, 32]}, opset=23)
    # B*H = 8; QK^T 8*8*10*16 = 10240 MACs; AV 8*8*32*10 = 20480 MACs -> 30720
    # scores 8*8*10 = 640, each scaled (1) and softmaxed (5): 3840 FLOPs
    assert exact(count(m)) == (2 * 30720 + 3840, 30720)


def test_onnx_attention_3d_grouped_query_with_mask_and_past(onnx_model):
    a = node(
        "Attention", ["q", "k", "v", "mask", "pk", "pv"], ["y", "present_k", "present_v"], q_num_heads=4, kv_num_heads=2
    )
    inputs = {
        "q": [2, 8, 64],
        "k": [2, 10, 32],
        "v": [2, 10, 32],
        "mask": [8, 16],
        "pk": [2, 2, 6, 16],
        "pv": [2, 2, 6, 16],
    }
    m = onnx_model([a], inputs=inputs, opset=23)
    # 4 query heads of 16 (64/4) per batch: B*Hq = 8; keys 6 past + 10 new = 16; v head 32/2 = 16
    # QK^T 8*8*16*16 = 16384, AV 8*8*16*16 = 16384 -> 32768 MACs; scores 8*8*16 = 1024 * (scale + softmax + mask)
    assert exact(count(m)) == (2 * 32768 + 1024 * 7, 32768)


def test_microsoft_attention_includes_input_projection_and_fills_output_shape(onnx_model):
    a = node("Attention", ["x", "w", "b"], ["h"], domain=MS, num_heads=4)
    after = node("MatMul", ["h", "w2"], ["y"])
    m = onnx_model(
        [a, after], inputs={"x": [2, 8, 32]}, inits={"w": [32, 96], "b": [96], "w2": [32, 16]}, domains={MS: 1}
    )
    # projection: 16 rows x 32 -> 96 with bias: 16*96*32 = 49152 MACs, bias 16*96 = 1536
    # attention: B*H = 8, S = 8, head 8: QK^T 8*8*8*8 = 4096 + AV 4096 = 8192 MACs; scores 512 * 6 = 3072
    # the MatMul after it needs the Attention output shape [2, 8, 32] that onnx cannot infer: 2*8*16*32 = 8192
    macs = 49152 + 8192 + 8192
    assert exact(count(m)) == (2 * macs + 1536 + 3072, macs)


def test_microsoft_multi_head_attention(onnx_model):
    a = node("MultiHeadAttention", ["q", "k", "v"], domain=MS, num_heads=4)
    m = onnx_model([a], inputs={"q": [2, 8, 32], "k": [2, 10, 32], "v": [2, 10, 32]}, domains={MS: 1})
    # B*H = 8, S = 8, L = 10, head 8: 8*8*10*8 = 5120 per product, 2 products = 10240 MACs; scores 640 * 6
    assert exact(count(m)) == (20480 + 3840, 10240)


def test_microsoft_group_query_attention_uses_present_length(onnx_model):
    a = node(
        "GroupQueryAttention",
        ["q", "k", "v", "pk", "pv", "seqlens", "total"],
        ["y", "pk2", "pv2"],
        domain=MS,
        num_heads=4,
        kv_num_heads=2,
    )
    inputs = {
        "q": [1, 4, 64],
        "k": [1, 4, 32],
        "v": [1, 4, 32],
        "pk": [1, 2, 12, 16],
        "pv": [1, 2, 12, 16],
        "seqlens": (I32, [1]),
        "total": (I32, []),
    }
    m = onnx_model([a], inputs=inputs, domains={MS: 1}, outputs=["y", "pk2", "pv2"])
    m.graph.value_info.append(helper.make_tensor_value_info("pk2", F, [1, 2, 16, 16]))
    # B*H = 4, S = 4, total keys 16 (present_key), head 16: QK^T 4*4*16*16 = 4096, AV 4096 -> 8192 MACs;
    # scores 4*4*16 = 256, * 6
    assert exact(count(m)) == (16384 + 1536, 8192)


# --- recurrent -------------------------------------------------------------------------------------------------


def test_lstm(onnx_model):
    lstm = node("LSTM", ["x", "w", "r", "b"], hidden_size=4)
    m = onnx_model([lstm], inputs={"x": [5, 2, 3]}, inits={"w": [1, 16, 3], "r": [1, 16, 4], "b": [1, 32]})
    # per step: input matmul 2*16*3 = 96 + recurrent 2*16*4 = 128 -> 224 MACs;
    # gate arithmetic per hidden unit: 4 gates * (2 biases + add + activation) + 4 cell update = 20, * 2*4 units
    # = 160 FLOPs; step = 2*224 + 160 = 608; 5 steps
    assert exact(count(m)) == (5 * 608, 5 * 224)


def test_bidirectional_gru_without_bias(onnx_model):
    gru = node("GRU", ["x", "w", "r"], hidden_size=4, direction="bidirectional")
    m = onnx_model([gru], inputs={"x": [5, 2, 3]}, inits={"w": [2, 12, 3], "r": [2, 12, 4]})
    # per step and direction: 2*12*3 = 72 + 2*12*4 = 96 -> 168 MACs; gates 3 * (0 + 1 + 1) + 5 blend = 11 per unit
    # * 8 units = 88 FLOPs; 2*168 + 88 = 424; 5 steps * 2 directions
    assert exact(count(m)) == (10 * 424, 10 * 168)


def test_rnn_batch_first_layout(onnx_model):
    rnn = node("RNN", ["x", "w", "r", "b"], hidden_size=4, layout=1)
    m = onnx_model([rnn], inputs={"x": [2, 5, 3]}, inits={"w": [1, 4, 3], "r": [1, 4, 4], "b": [1, 8]}, opset=14)
    # batch 2, 5 steps: 2*4*3 = 24 + 2*4*4 = 32 -> 56 MACs; per unit 2 biases + add + tanh = 4, * 8 = 32
    assert exact(count(m)) == (5 * (112 + 32), 5 * 56)


# --- normalisation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "extra", "attrs", "opset", "expected"),
    [
        # 512 elements: stats 4 + apply 2 + scale 1 + bias 1 = 8 per element
        ("LayerNormalization", ["s", "b"], {}, 17, 512 * 8),
        ("LayerNormalization", ["s"], {}, 17, 512 * 7),
        ("RMSNormalization", ["s"], {}, 23, 512 * 4),  # square+add 2, multiply 1, weight 1
        # stats and apply, no affine; onnx 1.23's strict inference needs `axes` spelled out for this function op
        ("MeanVarianceNormalization", [], {"axes": [0, 1, 2]}, 17, 512 * 6),
        ("LpNormalization", [], {}, 17, 512 * 3),  # |x|^2 and sum (2), divide (1)
    ],
)
def test_sequence_norms(onnx_model, op, extra, attrs, opset, expected):
    n = node(op, ["x", *extra], **attrs)
    m = onnx_model([n], inputs={"x": [2, 8, 32]}, inits={name: [32] for name in extra}, opset=opset)
    assert exact(count(m)) == (expected, 0)


@pytest.mark.parametrize(
    ("op", "attrs", "outputs", "opset", "per_element"),
    [
        ("BatchNormalization", {}, 1, 15, 4),  # inference: apply 2 + scale 1 + shift 1
        ("BatchNormalization", {"training_mode": 1}, 3, 15, 8),  # batch statistics: + 4
        ("BatchNormalization", {}, 5, 9, 8),  # opsets 7-13: asking for the running stats means training
        ("BatchNormalization", {"is_test": 1}, 1, 6, 4),
        ("InstanceNormalization", {}, 1, 17, 8),
        ("GroupNormalization", {"num_groups": 2}, 1, 18, 8),
    ],
)
def test_image_norms(onnx_model, op, attrs, outputs, opset, per_element):
    params = ["s", "b"] if op != "BatchNormalization" else ["s", "b", "mean", "var"]
    outs = ["y", "m1", "v1", "m2", "v2"][:outputs]
    m = onnx_model(
        [node(op, ["x", *params], outs, **attrs)],
        inputs={"x": [1, 4, 8, 8]},
        inits={p: [4] for p in params},
        opset=opset,
        outputs=["y"],
    )
    assert exact(count(m)) == (256 * per_element, 0)  # 1*4*8*8 = 256 elements


def test_skip_layer_norms(onnx_model):
    skip = node("SkipLayerNormalization", ["x", "skip", "g", "beta", "bias"], domain=MS)
    m = onnx_model(
        [skip],
        inputs={"x": [2, 8, 32], "skip": [2, 8, 32]},
        inits={"g": [32], "beta": [32], "bias": [32]},
        domains={MS: 1},
    )
    # 512 elements: skip add 1 + bias add 1 + layer norm 8
    assert exact(count(m)) == (512 * 10, 0)
    rms = node("SkipSimplifiedLayerNormalization", ["x", "skip", "g"], domain=MS)
    m = onnx_model([rms], inputs={"x": [2, 8, 32], "skip": [2, 8, 32]}, inits={"g": [32]}, domains={MS: 1})
    assert exact(count(m)) == (512 * 5, 0)  # skip add 1 + RMS norm 4


# --- softmax, pooling, resampling ------------------------------------------------------------------------------


def test_softmax_and_log_softmax(onnx_model):
    for op in ("Softmax", "LogSoftmax"):
        m = onnx_model([node(op, ["x"])], inputs={"x": [2, 8, 10]})
        assert exact(count(m)) == (160 * 5, 0)  # 160 elements * 5


def test_pools(onnx_model):
    m = onnx_model([node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2])], inputs={"x": [1, 4, 8, 8]})
    assert exact(count(m)) == (64 * 4, 0)  # out [1,4,4,4] = 64, window 4
    avg = node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    m = onnx_model([avg], inputs={"x": [1, 4, 8, 8]})
    assert exact(count(m)) == (256 * 9, 0)  # out [1,4,8,8] = 256, window 9
    m = onnx_model([node("GlobalAveragePool", ["x"])], inputs={"x": [1, 4, 8, 8]})
    assert exact(count(m)) == (256, 0)  # every input element once


@pytest.mark.parametrize(("mode", "per_output"), [("nearest", 0), ("linear", 7), ("cubic", 31)])
def test_resize(onnx_model, mode, per_output):
    r = node("Resize", ["x", "", "scales"], mode=mode)
    scales = helper.make_tensor("scales", F, [4], [1.0, 1.0, 2.0, 2.0])
    m = onnx_model([r], inputs={"x": [1, 2, 4, 4]}, inits={"scales": scales}, opset=13)
    # out [1,2,8,8] = 128; bilinear weighs 4 neighbours (4 mul + 3 add = 7), bicubic 16 (16 + 15 = 31)
    assert exact(count(m)) == (128 * per_output, 0)


# --- elementwise, reductions, quantisation ---------------------------------------------------------------------


def test_elementwise_counts_output_elements(onnx_model):
    m = onnx_model([node("Add", ["a", "b"], ["s"]), node("Relu", ["s"])], inputs={"a": [2, 3, 4], "b": [4]})
    assert exact(count(m)) == (48, 0)  # broadcast add 24 + relu 24
    m = onnx_model([node("Gelu", ["a"])], inputs={"a": [2, 3, 4]}, opset=20)
    assert exact(count(m)) == (24, 0)


def test_variadic_sum_mean_max(onnx_model):
    m = onnx_model([node("Sum", ["a", "b", "c"])], inputs={"a": [2, 3], "b": [2, 3], "c": [2, 3]})
    assert exact(count(m)) == (12, 0)  # 2 adds per output element * 6
    m = onnx_model([node("Mean", ["a", "b", "c"])], inputs={"a": [2, 3], "b": [2, 3], "c": [2, 3]})
    assert exact(count(m)) == (18, 0)  # 2 adds + 1 divide per element
    m = onnx_model([node("Max", ["a"])], inputs={"a": [2, 3]})
    assert exact(count(m)) == (0, 0)  # one operand: a copy
    m = onnx_model([node("Min", ["a", "b"])], inputs={"a": [2, 3], "b": [3]})
    assert exact(count(m)) == (6, 0)  # one compare per broadcast output element


def test_reductions_count_input_elements(onnx_model):
    axes = helper.make_tensor("axes", I64, [1], [2])
    m = onnx_model([node("ReduceMean", ["x", "axes"])], inputs={"x": [2, 3, 4]}, inits={"axes": axes}, opset=18)
    assert exact(count(m)) == (24, 0)
    m = onnx_model([node("ArgMax", ["x"], axis=1)], inputs={"x": [2, 3, 4]})
    assert exact(count(m)) == (24, 0)


def test_quantize_dequantize(onnx_model):
    q = node("QuantizeLinear", ["x", "s", "z"])
    m = onnx_model([q], inputs={"x": [2, 3, 4]}, inits={"s": scalar("s"), "z": scalar("z", U8, 0)})
    assert exact(count(m)) == (48, 0)  # 24 elements * 2
    d = node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])
    m = onnx_model([d], inputs={"x": [2, 3, 4]}, outputs=["y"])
    assert exact(count(m)) == (96, 0)  # min and max over 24 (2 each) + quantise 24 * 2


def test_dropout_is_free_in_inference_and_counted_in_training(onnx_model):
    m = onnx_model([node("Dropout", ["x"])], inputs={"x": [2, 3, 4]}, opset=13)
    assert exact(count(m)) == (0, 0)
    training = helper.make_tensor("t", TensorProto.BOOL, [], [True])
    m = onnx_model([node("Dropout", ["x", "", "t"])], inputs={"x": [2, 3, 4]}, inits={"t": training}, opset=13)
    assert exact(count(m)) == (24, 0)  # the mask multiply


def test_scatter_with_reduction(onnx_model):
    idx = helper.make_tensor("i", I64, [2, 3], [0] * 6)
    s = node("ScatterElements", ["x", "i", "u"], reduction="add")
    m = onnx_model([s], inputs={"x": [4, 3], "u": [2, 3]}, inits={"i": idx}, opset=16)
    assert exact(count(m)) == (6, 0)  # each of the 6 updates is added
    s = node("ScatterElements", ["x", "i", "u"])
    m = onnx_model([s], inputs={"x": [4, 3], "u": [2, 3]}, inits={"i": idx}, opset=16)
    assert exact(count(m)) == (0, 0)  # a plain scatter is a copy


# --- com.microsoft fused and quantised ops -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "extra", "per_element"),
    [("FastGelu", [], 1), ("FastGelu", ["b"], 2), ("BiasGelu", ["b"], 2), ("QuickGelu", [], 1), ("Gelu", [], 1)],
)
def test_microsoft_activations(onnx_model, op, extra, per_element):
    m = onnx_model(
        [node(op, ["x", *extra], domain=MS)], inputs={"x": [2, 8, 32]}, inits={b: [32] for b in extra}, domains={MS: 1}
    )
    assert exact(count(m)) == (512 * per_element, 0)


def test_microsoft_matmuls(onnx_model):
    fused = node("FusedMatMul", ["a", "b"], domain=MS, transB=1)
    m = onnx_model([fused], inputs={"a": [4, 6], "b": [5, 6]}, domains={MS: 1})
    assert exact(count(m)) == (240, 120)  # B^T [6,5]: 4*5*6
    nbits = node("MatMulNBits", ["a", "b", "s"], domain=MS, K=64, N=32, bits=4, block_size=32)
    packed = helper.make_tensor("b", U8, [32, 2, 16], b"\0" * 1024, raw=True)
    m = onnx_model([nbits], inputs={"a": [2, 8, 64]}, inits={"b": packed, "s": [64]}, domains={MS: 1})
    # 16 rows * 32 * 64 = 32768 MACs; dequantising the 64*32 weights at 2 FLOPs = 4096
    assert exact(count(m)) == (65536 + 4096, 32768)
    dq = node("DynamicQuantizeMatMul", ["a", "b", "s"], domain=MS)
    w8 = helper.make_tensor("b", I8, [6, 5], b"\0" * 30, raw=True)
    m = onnx_model([dq], inputs={"a": [4, 6]}, inits={"b": w8, "s": [1]}, domains={MS: 1})
    # FLOPs: quantise A (min/max 2*24 + 2*24 = 96) and scale to float 20; the integer product 2*120 integer ops
    assert exact(count(m)) == (96 + 20, 0)
    assert count(m).int_ops == 240


def test_microsoft_quantized_elementwise(onnx_model):
    q = node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], domain=MS)
    inits = {
        "sa": scalar("sa"),
        "za": scalar("za", U8, 0),
        "sb": scalar("sb"),
        "zb": scalar("zb", U8, 0),
        "sy": scalar("sy"),
        "zy": scalar("zy", U8, 0),
    }
    m = onnx_model([q], inputs={"a": (U8, [2, 3, 4]), "b": (U8, [4])}, inits=inits, domains={MS: 1})
    assert exact(count(m)) == (24 * 3, 0)  # the add + requantising each of 24 outputs


# --- free ops, skipped ops, versions -----------------------------------------------------------------------------


def test_free_ops_cost_nothing_and_are_not_skipped(onnx_model):
    shape = helper.make_tensor("shape", I64, [2], [6, 4])
    nodes = [node("Reshape", ["x", "shape"], ["r"]), node("Transpose", ["r"], ["t"]), node("Identity", ["t"])]
    report = count(onnx_model(nodes, inputs={"x": [2, 3, 4]}, inits={"shape": shape}))
    assert exact(report) == (0, 0)
    assert not any(layer.ops for layer in report.layers.values())


def test_op_without_formula_is_skipped_never_zero_silently(onnx_model):
    report = count(onnx_model([node("Det", ["x"], ["d"])], inputs={"x": [2, 3, 3]}))
    assert report.skipped == {"Det": 1}
    assert report.skipped_ops["Det"].reason == "no formula"
    assert report.skipped_ops["Det"].layers == ["block"]


def test_formulas_are_versioned_by_opset():
    assert ONNX_OPS.lookup(("", "Attention"), 22) is None  # ONNX Attention exists from opset 23
    assert ONNX_OPS.lookup(("", "Attention"), 23) is not None
    v1, v7, v14 = (ONNX_OPS.lookup(("", "BatchNormalization"), v) for v in (6, 13, 21))
    assert len({v1, v7, v14}) == 3
    assert ONNX_OPS.lookup(("", "Reshape"), 17) is FREE
    assert ONNX_OPS.lookup(("com.example", "Conv")) is None
