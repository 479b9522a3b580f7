"""Formulas added for the ONNX gaps of issue 9, each against a hand-derived integer on a graph built with onnx.helper.

LRN, SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss get explicit formulas; ReduceX with
`noop_with_empty_axes=1` and no axes, and Clip without bounds, are the identity; an antialiased Resize weighs more
input elements per output than plain bilinear/bicubic when it downscales.
"""

from __future__ import annotations

from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting import formulas as f  # noqa: E402
from pytest_flopbudget._counting.onnx.ops import antialias_taps  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = [2, 3, 4]  # 24 elements


def node(op: str, inputs: list[str], outputs: list[str] | None = None, **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs or ["y"], name=f"/block/{op}", **attrs)


def exact(report: Any) -> tuple[int, int]:
    assert report.skipped == {}, report.skipped_ops
    return report.flops, report.macs


def i64(name: str, values: list[int]) -> Any:
    return helper.make_tensor(name, I64, [len(values)], values)


# --- LRN -------------------------------------------------------------------------------------------------------


def test_lrn_window_totals():
    # size 3 over 5 channels: windows [0,1] [0,2] [1,3] [2,4] [3,4] = 2 + 3 + 3 + 3 + 2 = 13
    assert f.lrn_window_total(5, 3) == 13
    # size 4 (1 below, 2 above): [0,2] [0,3] [1,4] [2,4] [3,4] = 3 + 4 + 4 + 3 + 2 = 16
    assert f.lrn_window_total(5, 4) == 16
    assert f.lrn_window_total(3, 5) == 9  # every window covers all 3 channels
    assert f.lrn_window_total(4, 1) == 4  # size 1: each channel alone


@pytest.mark.parametrize(("size", "windows"), [(3, 13), (4, 16)])
def test_lrn(onnx_model, size, windows):
    m = onnx_model([node("LRN", ["x"], size=size)], inputs={"x": [1, 5, 2, 2]}, opset=13)
    # 1*5*2*2 = 20 elements * (square 1 + scale, bias, pow, divide 4) = 100;
    # window sums at 4 positions (batch 1 * 2*2): 4 * windows (13 or 16, see above)
    assert exact(count(m)) == (100 + 4 * windows, 0)


def test_lrn_opset_1(onnx_model):
    m = onnx_model([node("LRN", ["x"], size=3)], inputs={"x": [2, 5, 1, 1]}, opset=1)
    assert exact(count(m)) == (2 * 5 * 5 + 2 * 13, 0)  # 10 elements * 5, 2 positions * 13


# --- losses ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [12, 13])
def test_softmax_cross_entropy(onnx_model, opset):
    sce = node("SoftmaxCrossEntropyLoss", ["scores", "labels"])
    m = onnx_model([sce], inputs={"scores": [2, 3, 4], "labels": (I64, [2, 4])}, opset=opset)
    # scores [N=2, C=3, d=4]: log_softmax 24 * 5 = 120; NLL 1 per label: 2*4 = 8
    assert exact(count(m)) == (128, 0)


def test_softmax_cross_entropy_with_weights_and_log_prob(onnx_model):
    sce = node(
        "SoftmaxCrossEntropyLoss", ["scores", "labels", "w"], ["loss", "log_prob"], reduction="sum", ignore_index=1
    )
    m = onnx_model(
        [sce], inputs={"scores": [5, 7], "labels": (I64, [5])}, inits={"w": [7]}, opset=13, outputs=["loss", "log_prob"]
    )
    # 5*7 = 35 scores * 5 = 175, + 5 labels; weights, ignore_index and the reduction are in the 1 per label, and
    # log_prob is the log_softmax already counted
    assert exact(count(m)) == (180, 0)


@pytest.mark.parametrize(("reduction", "weight"), [("none", False), ("mean", True), ("sum", False)])
def test_negative_log_likelihood_loss(onnx_model, reduction, weight):
    inputs = ["x", "target", "w"] if weight else ["x", "target"]
    nll = node("NegativeLogLikelihoodLoss", inputs, reduction=reduction)
    m = onnx_model(
        [nll], inputs={"x": [2, 3, 4], "target": (I64, [2, 4])}, inits={"w": [3]} if weight else {}, opset=22
    )
    assert exact(count(m)) == (8, 0)  # 1 per target: 2*4


# --- the identity cases ----------------------------------------------------------------------------------------


def reduce_model(onnx_model: Any, op: str, opset: int, axes: list[int] | None, noop: int) -> Any:
    inputs = ["x", "axes"] if axes is not None else ["x"]
    inits = {"axes": i64("axes", axes)} if axes is not None else {}
    return onnx_model([node(op, inputs, noop_with_empty_axes=noop)], inputs={"x": X}, inits=inits, opset=opset)


@pytest.mark.parametrize(
    ("op", "opset", "axes", "noop", "expected"),
    [
        ("ReduceSum", 13, None, 1, 0),  # no axes, noop: the identity
        ("ReduceSum", 13, [], 1, 0),  # an empty axes tensor is the same
        ("ReduceSum", 13, None, 0, 24),  # no axes without noop: reduce everything, 1 per input element
        ("ReduceSum", 13, [1], 1, 24),  # axes given: noop does not apply
        ("ReduceMean", 18, None, 1, 0),
        ("ReduceMax", 18, [], 1, 0),
        ("ReduceProd", 18, None, 1, 0),
        ("ReduceL2", 18, None, 1, 24),  # composite: |x| is still computed, 1 per element
        ("ReduceSumSquare", 18, None, 1, 24),  # x^2, 1 per element
        ("ReduceLogSumExp", 18, None, 1, 24),
    ],
)
def test_reduce_with_noop_and_no_axes(onnx_model, op, opset, axes, noop, expected):
    report = count(reduce_model(onnx_model, op, opset, axes, noop))
    assert exact(report) == (expected, 0)
    assert op in report.ops  # counted (at zero), not skipped and not dropped


def test_reduce_sum_noop_with_runtime_empty_axes(onnx_model):
    m = onnx_model(
        [node("ReduceSum", ["x", "axes"], noop_with_empty_axes=1)], inputs={"x": X, "axes": (I64, [0])}, opset=13
    )
    assert exact(count(m)) == (0, 0)  # the axes tensor's shape says it is empty
    m = onnx_model(
        [node("ReduceSum", ["x", "axes"], noop_with_empty_axes=1)], inputs={"x": X, "axes": (I64, [1])}, opset=13
    )
    assert exact(count(m)) == (24, 0)  # one runtime axis: a real reduction


def test_reduce_before_noop_existed(onnx_model):
    m = onnx_model([node("ReduceMean", ["x"])], inputs={"x": X}, opset=13)  # axes attribute era: reduce all
    assert exact(count(m)) == (24, 0)


@pytest.mark.parametrize(
    ("opset", "inputs", "attrs", "expected"),
    [
        (13, ["x"], {}, 0),  # no bounds: the identity
        (13, ["x", "lo"], {}, 24),  # a lower bound: 1 compare per element
        (13, ["x", "", "hi"], {}, 24),
        (13, ["x", "lo", "hi"], {}, 24),  # a clamp is one op per element
        (6, ["x"], {}, 0),  # attributes: both default to the float range
        (6, ["x"], {"min": 0.0}, 24),
        (6, ["x"], {"max": 6.0}, 24),
    ],
)
def test_clip(onnx_model, opset, inputs, attrs, expected):
    inits = {name: helper.make_tensor(name, F, [], [0.0]) for name in inputs[1:] if name}
    m = onnx_model([node("Clip", inputs, **attrs)], inputs={"x": X}, inits=inits, opset=opset)
    assert exact(count(m)) == (expected, 0)


# --- Resize with antialias -------------------------------------------------------------------------------------


def resize_model(
    onnx_model: Any,
    x: list[int],
    sizes: list[int] | None = None,
    scales: list[float] | None = None,
    mode: str = "linear",
    antialias: int = 1,
    **attrs: Any,
) -> Any:
    inputs, inits = ["x", "", ""], {}
    if scales is not None:
        inputs[2] = "scales"
        inits["scales"] = helper.make_tensor("scales", F, [len(scales)], scales)
    if sizes is not None:
        inputs.append("sizes")
        inits["sizes"] = i64("sizes", sizes)
    r = node("Resize", inputs, mode=mode, antialias=antialias, **attrs)
    return onnx_model([r], inputs={"x": x}, inits=inits, opset=18)


@pytest.mark.parametrize(
    ("x", "sizes", "mode", "per_output"),
    [
        # s = 4/8 on both axes: linear 2*ceil(1/s) = 4 taps per axis -> 16; 2*16 - 1 = 31 per output
        ([1, 1, 8, 8], [1, 1, 4, 4], "linear", 31),
        # cubic 2*ceil(2/s) = 8 per axis -> 64; 2*64 - 1 = 127
        ([1, 1, 8, 8], [1, 1, 4, 4], "cubic", 127),
        # s = 4/10: 1/s = 2.5 -> 2*3 = 6 per axis -> 36; 71
        ([1, 1, 10, 10], [1, 1, 4, 4], "linear", 71),
    ],
)
def test_resize_antialias_downscale(onnx_model, x, sizes, mode, per_output):
    m = resize_model(onnx_model, x, sizes=sizes, mode=mode)
    assert exact(count(m)) == (16 * per_output, 0)  # 1*1*4*4 = 16 outputs


def test_resize_antialias_one_axis_downscaled(onnx_model):
    m = resize_model(onnx_model, [1, 2, 8, 6], sizes=[1, 2, 4, 6])
    # height s = 1/2: 4 taps; width unchanged: the plain 2; 8 taps -> 15 per output * (2*4*6 = 48 outputs)
    assert exact(count(m)) == (15 * 48, 0)


def test_resize_antialias_uses_the_given_scale(onnx_model):
    m = resize_model(onnx_model, [1, 1, 5, 5], scales=[1.0, 1.0, 0.5, 0.5])
    # out floor(5 * 0.5) = 2 per axis, but the filter follows the scale 1/2 (not 2/5): 4 taps per axis -> 16, 31
    assert exact(count(m)) == (4 * 31, 0)
    m = resize_model(onnx_model, [1, 1, 5, 5], sizes=[1, 1, 2, 2])
    # sizes: s = 2/5, 1/s = 2.5 -> 6 taps per axis -> 36, 71 per output
    assert exact(count(m)) == (4 * 71, 0)


def test_resize_antialias_keep_aspect_ratio(onnx_model):
    m = resize_model(onnx_model, [1, 1, 8, 12], sizes=[2, 6], axes=[2, 3], keep_aspect_ratio_policy="not_larger")
    # common scale min(2/8, 6/12) = 1/4: out [1,1,2,3] = 6; 2*4 = 8 taps per axis -> 64, 127 per output
    assert exact(count(m)) == (6 * 127, 0)


def test_resize_antialias_upscale_and_nearest_are_unchanged(onnx_model):
    m = resize_model(onnx_model, [1, 1, 4, 4], sizes=[1, 1, 8, 8])
    assert exact(count(m)) == (64 * 7, 0)  # upscaling: plain bilinear, 7 per output
    m = resize_model(onnx_model, [1, 1, 8, 8], sizes=[1, 1, 4, 4], antialias=0)
    assert exact(count(m)) == (16 * 7, 0)  # no antialias: plain bilinear
    m = resize_model(onnx_model, [1, 1, 8, 8], sizes=[1, 1, 4, 4], mode="nearest")
    assert exact(count(m)) == (0, 0)  # nearest ignores antialias: a gather


@pytest.mark.parametrize(("size_in", "size_out"), [(8, 4), (10, 4), (5, 2), (9, 4), (100, 33), (6, 5), (4, 8)])
def test_antialias_taps_match_the_onnx_reference_footprint(size_in, size_out):
    reference = pytest.importorskip("onnx.reference.ops.op_resize")
    linear, cubic = (getattr(reference, name, None) for name in ("_linear_coeffs_antialias", "_cubic_coeffs_antialias"))
    if linear is None or cubic is None:
        pytest.skip("this onnx has no antialias reference coefficients")
    scale = size_out / size_in
    assert antialias_taps([1, 1, size_in], [1, 1, size_out], "linear") == len(linear(0.25, scale))
    assert antialias_taps([1, 1, size_in], [1, 1, size_out], "cubic") == len(cubic(0.25, scale))
