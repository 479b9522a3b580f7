"""Convolutions, hand-derived: Conv1d/2d/3d and ConvTranspose1d/2d/3d, forward and backward.

Convention (formulas.py): a forward conv output element is a dot product over (C_in / groups) * prod(kernel) taps:
MACs = N * C_out * prod(out_spatial) * (C_in / groups) * prod(kernel). A transposed conv scatters every *input*
element through (C_out / groups) * prod(kernel) taps: MACs = N * C_in * prod(in_spatial) * (C_out / groups) *
prod(kernel). The bias is 1 FLOP per output element. Output size: floor((L + 2p - d*(k-1) - 1) / s) + 1; transposed:
(L - 1)*s - 2p + d*(k-1) + output_padding + 1.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torch_op_helpers import Call, op_costs, run  # noqa: E402

from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402


def conv_only(report: Report) -> tuple[int, int]:
    (calls, flops, macs) = op_costs(report)["aten.convolution"]
    assert calls == 1
    return flops, macs


# --- forward convolutions --------------------------------------------------------------------------------------

FORWARD = [
    pytest.param(
        # L_out = floor((11 + 2*1 - 2*(3-1) - 1) / 2) + 1 = 5; outputs 2*6*5 = 60; taps (4/2)*3 = 6
        # MACs 60*6 = 360, FLOPs 720 + 60 bias = 780
        nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
        (2, 4, 11),
        780,
        360,
        id="conv1d-s2-p1-d2-g2",
    ),
    pytest.param(
        # L_out = 11 - 3 + 1 = 9; outputs 2*6*9 = 108; taps 4*3 = 12: 1296 MACs, 2592 + 108 bias = 2700
        nn.Conv1d(4, 6, 3),
        (2, 4, 11),
        2700,
        1296,
        id="conv1d-bias",
    ),
    pytest.param(
        # depthwise: L_out = 8; outputs 4*8 = 32; taps (4/4)*3 = 3: 96 MACs
        nn.Conv1d(4, 4, 3, groups=4, bias=False),
        (1, 4, 10),
        192,
        96,
        id="conv1d-depthwise",
    ),
    pytest.param(
        # H_out = floor((8 + 2 - 2 - 1) / 2) + 1 = 4 = W_out; outputs 2*4*16 = 128; taps 3*9 = 27
        # MACs 128*27 = 3456; FLOPs 6912 + 128 = 7040
        nn.Conv2d(3, 4, 3, stride=2, padding=1),
        (2, 3, 8, 8),
        7040,
        3456,
        id="conv2d-s2-p1-bias",
    ),
    pytest.param(
        nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False),
        (2, 3, 8, 8),
        6912,
        3456,
        id="conv2d-s2-p1-nobias",
    ),
    pytest.param(
        # H_out = floor((7 + 2 - 1*(3-1) - 1) / 2) + 1 = 4; W_out = floor((7 - 2*(2-1) - 1) / 1) + 1 = 5
        # outputs 4*4*5 = 80; taps 3*3*2 = 18: 1440 MACs; 2880 + 80 = 2960
        nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
        (1, 3, 7, 7),
        2960,
        1440,
        id="conv2d-rectangular-dilated",
    ),
    pytest.param(
        # grouped: 6 -> 4 channels in 2 groups: taps (6/2)*9 = 27; out 4*4*4 = 64: 1728 MACs
        nn.Conv2d(6, 4, 3, groups=2, bias=False),
        (1, 6, 6, 6),
        3456,
        1728,
        id="conv2d-groups2",
    ),
    pytest.param(
        # depthwise multiplier 2 (groups = in_channels = 4, 8 filters): out 8*4*4 = 128; taps 1*9: 1152 MACs
        nn.Conv2d(4, 8, 3, groups=4, bias=False),
        (1, 4, 6, 6),
        2304,
        1152,
        id="conv2d-depthwise-x2",
    ),
    pytest.param(
        # depthwise with bias: out 4*4*4 = 64, taps 9: 576 MACs; 1152 + 64 = 1216
        nn.Conv2d(4, 4, 3, groups=4),
        (1, 4, 6, 6),
        1216,
        576,
        id="conv2d-depthwise-bias",
    ),
    pytest.param(
        # padding="same" keeps 5x5: out 4*25 = 100, taps 27: 2700 MACs; 5400 + 100 = 5500
        nn.Conv2d(3, 4, 3, padding="same"),
        (1, 3, 5, 5),
        5500,
        2700,
        id="conv2d-same",
    ),
    pytest.param(
        # unbatched [C, H, W] costs as a batch of one: out 4*3*3 = 36, taps 27: 972 MACs; 1944 + 36 = 1980
        nn.Conv2d(3, 4, 3),
        (3, 5, 5),
        1980,
        972,
        id="conv2d-unbatched",
    ),
    pytest.param(
        # D/H/W_out = floor((5 + 2 - 3) / 2) + 1 = 3: out 4*27 = 108; taps 2*27 = 54: 5832 MACs; 11664 + 108 = 11772
        nn.Conv3d(2, 4, 3, stride=2, padding=1),
        (1, 2, 5, 5, 5),
        11772,
        5832,
        id="conv3d-s2-p1-bias",
    ),
    pytest.param(
        # depthwise 3-D: out 4*2*2*2 = 32, taps 27: 864 MACs
        nn.Conv3d(4, 4, 3, groups=4, bias=False),
        (1, 4, 4, 4, 4),
        1728,
        864,
        id="conv3d-depthwise",
    ),
    pytest.param(
        # dilation 2 in 3-D: out = 6 - 2*2 = 2 per dim -> 2*8 = 16 outputs (N=1, C_out=2); taps 3*27 = 81: 1296 MACs
        nn.Conv3d(3, 2, 3, dilation=2, bias=False),
        (1, 3, 6, 6, 6),
        2592,
        1296,
        id="conv3d-dilated",
    ),
]


@pytest.mark.parametrize(("module", "shape", "flops", "macs"), FORWARD)
def test_convolution(module: nn.Module, shape: tuple[int, ...], flops: int, macs: int) -> None:
    report = run(module, torch.randn(*shape))
    assert conv_only(report) == (flops, macs)
    assert (report.flops, report.macs) == (flops, macs)


def test_seed_keras_1x1_conv() -> None:
    # the TensorFlow-profiler seed: a 1x1 filter on a 1x1x1x1 input without bias = 1 MAC = 2 FLOPs
    report = run(nn.Conv2d(1, 1, 1, bias=False), torch.randn(1, 1, 1, 1))
    assert (report.flops, report.macs, report.params) == (2, 1, 1)


# --- transposed convolutions: cost follows the INPUT spatial size ----------------------------------------------

TRANSPOSED = [
    pytest.param(
        # in: N*C_in*L = 2*4*5 = 40 elements, each scattered through (6/2)*3 = 9 taps: 360 MACs
        # L_out = (5-1)*2 + 3 + 1 = 12: bias 2*6*12 = 144; FLOPs 720 + 144 = 864
        nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2),
        (2, 4, 5),
        864,
        360,
        id="convT1d-s2-op1-g2",
    ),
    pytest.param(
        nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2, bias=False),
        (2, 4, 5),
        720,
        360,
        id="convT1d-nobias",
    ),
    pytest.param(
        # in 4*5*5 = 100 elements * (6/2)*9 = 27 taps: 2700 MACs
        # H_out = (5-1)*2 - 2*1 + 3 + 1 = 10: bias 6*100 = 600; FLOPs 5400 + 600 = 6000
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        (1, 4, 5, 5),
        6000,
        2700,
        id="convT2d-s2-p1-op1-g2",
    ),
    pytest.param(
        # stride 2, no padding: H_out = (5-1)*2 + 3 = 11; the forward-conv formula on the output would give
        # 6*11*11 * 4*9 = 26136 MACs; input-based: 4*25 * 6*9 = 5400 MACs; bias 6*121 = 726 -> 10800 + 726 = 11526
        nn.ConvTranspose2d(4, 6, 3, stride=2),
        (1, 4, 5, 5),
        11526,
        5400,
        id="convT2d-s2",
    ),
    pytest.param(
        # dilation 2: H_out = (5-1)*2 - 2 + 2*2 + 1 + 1 = 12; MACs 4*25*6*9 = 5400; bias 6*144 = 864 -> 11664
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2),
        (1, 4, 5, 5),
        11664,
        5400,
        id="convT2d-dilated",
    ),
    pytest.param(
        # depthwise transposed: in 4*9 = 36 elements * (4/4)*4 taps = 144 MACs
        nn.ConvTranspose2d(4, 4, 2, stride=2, groups=4, bias=False),
        (1, 4, 3, 3),
        288,
        144,
        id="convT2d-depthwise",
    ),
    pytest.param(
        # in 2*8 = 16 elements * 3*8 taps = 384 MACs; out 4^3 = 64 * 3 channels = 192 bias adds -> 768 + 192 = 960
        nn.ConvTranspose3d(2, 3, 2, stride=2),
        (1, 2, 2, 2, 2),
        960,
        384,
        id="convT3d-s2",
    ),
]


@pytest.mark.parametrize(("module", "shape", "flops", "macs"), TRANSPOSED)
def test_transposed_convolution(module: nn.Module, shape: tuple[int, ...], flops: int, macs: int) -> None:
    report = run(module, torch.randn(*shape))
    assert conv_only(report) == (flops, macs)


def test_transposed_conv_is_the_adjoint_of_the_forward_conv() -> None:
    # a stride-2 conv 6->4 on 11x11 gives 5x5; its transpose 4->6 on 5x5 gives 11x11 and costs the same MACs
    forward = run(nn.Conv2d(6, 4, 3, stride=2, bias=False), torch.randn(1, 6, 11, 11))
    transposed = run(nn.ConvTranspose2d(4, 6, 3, stride=2, bias=False), torch.randn(1, 4, 5, 5))
    # 4*5*5 * 6*9 = 5400 both ways
    assert forward.macs == transposed.macs == 5400


def test_conv_variants_share_the_convolution_formula() -> None:
    convolution = TORCH_OPS.lookup("aten.convolution")
    for alias in ("aten._convolution", "aten.convolution_overrideable", "aten.mkldnn_convolution"):
        assert TORCH_OPS.lookup(alias) is convolution


def test_mkldnn_convolution_direct_call() -> None:
    aten = torch.ops.aten
    report = count(
        Call(lambda x, w: aten.mkldnn_convolution(x, w, None, [0, 0], [1, 1], [1, 1], 1)),
        torch.randn(1, 3, 5, 5),
        torch.randn(4, 3, 3, 3),
        execution="real",  # no fake kernel for this op
    )
    # out 4*3*3 = 36, taps 27: 972 MACs
    assert report.skipped == {}
    assert (report.flops, report.macs) == (1944, 972)


# --- backward: aten.convolution_backward with output_mask ------------------------------------------------------


def test_conv2d_training_step_input_without_grad() -> None:
    report = run(nn.Conv2d(3, 4, 3), torch.randn(2, 3, 6, 6), training=True)
    # forward: out 2*4*4*4 = 128, taps 27: 3456 MACs; 6912 + 128 bias = 7040; loss sum 128
    # backward: output_mask = [grad_input=False, grad_weight=True, grad_bias=True]:
    #   grad_weight costs one forward conv (3456 MACs = 6912 FLOPs) + grad_bias sums 128 elements = 7040
    assert op_costs(report) == {
        "aten.convolution": (1, 7040, 3456),
        "aten.sum": (1, 128, 0),
        "aten.convolution_backward": (1, 7040, 3456),
    }
    assert (report.forward.flops, report.forward.macs) == (7168, 3456)
    assert (report.backward.flops, report.backward.macs) == (7040, 3456)


def test_conv2d_training_step_without_bias() -> None:
    report = run(nn.Conv2d(3, 4, 3, bias=False), torch.randn(2, 3, 6, 6), training=True)
    # only grad_weight: 3456 MACs
    assert op_costs(report)["aten.convolution_backward"] == (1, 6912, 3456)


def test_conv2d_training_step_input_with_grad() -> None:
    report = run(nn.Conv2d(3, 4, 3), torch.randn(2, 3, 6, 6, requires_grad=True), training=True)
    # grad_input + grad_weight: 2 * 3456 MACs = 13824 FLOPs, + 128 bias-grad adds = 13952
    assert op_costs(report)["aten.convolution_backward"] == (1, 13952, 6912)


def test_grouped_conv_backward() -> None:
    report = run(nn.Conv2d(4, 8, 3, groups=2, bias=False), torch.randn(1, 4, 5, 5, requires_grad=True), training=True)
    # forward: out 8*3*3 = 72, taps (4/2)*9 = 18: 1296 MACs; backward grad_input + grad_weight: 2592 MACs
    assert op_costs(report)["aten.convolution"] == (1, 2592, 1296)
    assert op_costs(report)["aten.convolution_backward"] == (1, 5184, 2592)


def test_two_layer_conv_net_second_conv_needs_grad_input() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 2, 3, bias=False))
    report = run(model, torch.randn(1, 3, 6, 6), training=True)
    layers = report.layers
    # conv 0: out 4*4*4 = 64, taps 27: 1728 MACs; 3456 + 64 bias = 3520
    #   backward: input has no grad -> grad_weight 1728 MACs + grad_bias 64 adds = 3520
    assert layers["0"].ops["aten.convolution"].flops == 3520
    assert (layers["0"].ops["aten.convolution_backward"].flops, layers["0"].ops["aten.convolution_backward"].macs) == (
        3520,
        1728,
    )
    # conv 1: out 2*2*2 = 8, taps 4*9 = 36: 288 MACs = 576 FLOPs
    #   backward: its input (conv 0's output) needs a gradient: grad_input + grad_weight = 576 MACs, no bias
    assert layers["1"].ops["aten.convolution"].macs == 288
    assert (layers["1"].ops["aten.convolution_backward"].flops, layers["1"].ops["aten.convolution_backward"].macs) == (
        1152,
        576,
    )
    # loss = y.sum() over 8 outputs, in the root module
    assert layers[""].ops["aten.sum"].flops == 8
    assert (report.forward.flops, report.forward.macs) == (3520 + 576 + 8, 1728 + 288)
    assert (report.backward.flops, report.backward.macs) == (3520 + 1152, 1728 + 576)


def test_transposed_conv_backward() -> None:
    module = nn.ConvTranspose2d(4, 2, 3, stride=2)
    # forward: in 4*3*3 = 36 * 2*9 taps = 648 MACs; H_out = (3-1)*2 + 3 = 7: bias 2*49 = 98 -> 1296 + 98 = 1394
    no_input_grad = run(module, torch.randn(1, 4, 3, 3), training=True)
    assert op_costs(no_input_grad)["aten.convolution"] == (1, 1394, 648)
    # backward, input without grad: grad_weight (648 MACs) + grad_bias (98 adds) = 1394
    assert op_costs(no_input_grad)["aten.convolution_backward"] == (1, 1394, 648)
    # with input grad: 2*648 MACs = 2592 FLOPs + 98 = 2690
    with_input_grad = run(module, torch.randn(1, 4, 3, 3, requires_grad=True), training=True)
    assert op_costs(with_input_grad)["aten.convolution_backward"] == (1, 2690, 1296)


def test_conv1d_and_conv3d_backward() -> None:
    # Conv1d(2, 3, 3) on [1, 2, 7]: out 3*5 = 15, taps 6: 90 MACs; input with grad: backward 180 MACs + 15 adds
    one = run(nn.Conv1d(2, 3, 3), torch.randn(1, 2, 7, requires_grad=True), training=True)
    assert op_costs(one)["aten.convolution_backward"] == (1, 360 + 15, 180)
    # Conv3d(2, 2, 2, bias=False) on [1, 2, 3, 3, 3]: out 2*8 = 16, taps 16: 256 MACs; weight grad only
    three = run(nn.Conv3d(2, 2, 2, bias=False), torch.randn(1, 2, 3, 3, 3), training=True)
    assert op_costs(three)["aten.convolution_backward"] == (1, 512, 256)
