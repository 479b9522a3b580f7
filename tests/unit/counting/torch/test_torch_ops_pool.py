"""Pooling, adaptive pooling and interpolation, hand-derived, forward and backward.

Conventions (formulas.py): max / avg pooling costs 1 FLOP per window element per output (the average's divide
replaces one add); the window is the full kernel even where it overlaps padding. Adaptive pools sum, per dimension,
the window sizes end - start with start = floor(i * in / out), end = ceil((i + 1) * in / out). Interpolation per
output element: nearest is free, linear modes weigh 2**d neighbours (2 * 2**d - 1 FLOPs), cubic 4**d
(2 * 4**d - 1). Pool backwards cost the same as their forward; upsampling backwards the same as the forward
(nearest: 1 add per gradient element).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_op_helpers import Call, op_costs  # noqa: E402
from torch_op_helpers import run as checked_run  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.formulas import Cost, adaptive_window_total  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402

run = partial(checked_run, macs_free=True)  # pooling and interpolation have no MACs


# --- max / avg pooling -----------------------------------------------------------------------------------------

POOLS = [
    # 1-D pools run as their 2-D kernels with a [1, k] window. L_out = (9 - 3) // 2 + 1 = 4: 2*3*4 = 24 outputs * 3
    pytest.param(nn.MaxPool1d(3, 2), (2, 3, 9), "aten.max_pool2d_with_indices", 72, id="maxpool1d"),
    pytest.param(nn.AvgPool1d(3, 2), (2, 3, 9), "aten.avg_pool2d", 72, id="avgpool1d"),
    # 6x6 -> 3x3: 2*9 = 18 outputs * 4
    pytest.param(nn.MaxPool2d(2), (1, 2, 6, 6), "aten.max_pool2d_with_indices", 72, id="maxpool2d"),
    # kernel (2, 3), stride 1, padding 1: H_out = 6 + 2 - 2 + 1 = 7, W_out = 6 + 2 - 3 + 1 = 6: 2*42 = 84 * 6 = 504
    pytest.param(
        nn.MaxPool2d((2, 3), stride=1, padding=1),
        (1, 2, 6, 6),
        "aten.max_pool2d_with_indices",
        504,
        id="maxpool2d-rect-pad",
    ),
    # ceil_mode: (6 - 3) / 2 = 1.5 -> ceil 2, + 1 = 3 (floor would give 2): 2*9 = 18 outputs * 9 = 162
    pytest.param(
        nn.MaxPool2d(3, 2, ceil_mode=True), (1, 2, 6, 6), "aten.max_pool2d_with_indices", 162, id="maxpool2d-ceil"
    ),
    # dilation 2, kernel 2, stride 2: (6 - 2*(2-1) - 1) // 2 + 1 = 2: 2*4 = 8 outputs * 4 taps = 32
    pytest.param(nn.MaxPool2d(2, dilation=2), (1, 2, 6, 6), "aten.max_pool2d_with_indices", 32, id="maxpool2d-dilated"),
    # kernel 3, stride 2, padding 1: (6 + 2 - 3) // 2 + 1 = 3: 18 outputs * 9 (padding taps included) = 162
    pytest.param(nn.AvgPool2d(3, 2, 1), (1, 2, 6, 6), "aten.avg_pool2d", 162, id="avgpool2d-pad"),
    # 4^3 -> 2^3: 2*8 = 16 outputs * 8
    pytest.param(nn.MaxPool3d(2), (1, 2, 4, 4, 4), "aten.max_pool3d_with_indices", 128, id="maxpool3d"),
    pytest.param(nn.AvgPool3d(2), (1, 2, 4, 4, 4), "aten.avg_pool3d", 128, id="avgpool3d"),
    # kernel (1, 2, 2) on [1, 1, 2, 4, 4]: 1*2*2*2 = 8 outputs * 4 = 32
    pytest.param(nn.AvgPool3d((1, 2, 2)), (1, 1, 2, 4, 4), "aten.avg_pool3d", 32, id="avgpool3d-rect"),
]


@pytest.mark.parametrize(("module", "shape", "op", "flops"), POOLS)
def test_pool(module: nn.Module, shape: tuple[int, ...], op: str, flops: int) -> None:
    assert op_costs(run(module, torch.randn(*shape))) == {op: (1, flops, 0)}


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize(
    ("op", "kernel", "out", "flops"),
    [
        # kernels reached on other paths (no autograd, mkldnn, quantized) or by direct calls; an int-like kernel
        # [k] stands for k in every spatial dim
        ("aten.max_pool1d", [3], meta(2, 3, 4), 24 * 3),
        ("aten.max_pool1d_with_indices", [3], (meta(2, 3, 4), meta(2, 3, 4)), 24 * 3),
        ("aten.avg_pool1d", [3], meta(2, 3, 4), 24 * 3),
        ("aten.max_pool2d", [2], meta(1, 2, 3, 3), 18 * 4),
        ("aten.max_pool2d", [2, 3], meta(1, 2, 3, 3), 18 * 6),
        ("aten.mkldnn_max_pool2d", [2], meta(1, 2, 3, 3), 18 * 4),
        ("aten.quantized_max_pool2d", [3, 1], meta(1, 2, 3, 3), 18 * 3),
        ("aten.max_pool3d", [2], meta(1, 2, 2, 2, 2), 16 * 8),
        ("aten.mkldnn_max_pool3d", [1, 2, 3], meta(1, 2, 2, 2, 2), 16 * 6),
    ],
)
def test_pool_kernel_variants(op: str, kernel: list[int], out: Any, flops: int) -> None:
    assert TORCH_OPS.lookup(op)({"kernel_size": kernel}, out) == Cost(flops, 0)


@pytest.mark.parametrize("op", ["aten.adaptive_avg_pool1d", "aten.adaptive_max_pool1d"])
def test_adaptive_1d_kernel_variants(op: str) -> None:
    # [2, 3, 5] -> [2, 3, 3]: windows 2 + 3 + 2 = 7 per channel * 6 = 42
    formula = TORCH_OPS.lookup(op)
    assert formula({"self": meta(2, 3, 5), "output_size": [3]}, (meta(2, 3, 3), meta(2, 3, 3))) == Cost(42, 0)


# --- adaptive pooling ------------------------------------------------------------------------------------------


def test_adaptive_window_totals_by_hand() -> None:
    # in 5 -> out 3: [floor(0), ceil(5/3)=2) = 2; [floor(5/3)=1, ceil(10/3)=4) = 3; [floor(10/3)=3, 5) = 2 -> 7
    assert adaptive_window_total(5, 3) == 7
    # in 7 -> out 2: [0, ceil(3.5)=4) = 4; [floor(3.5)=3, 7) = 4 -> 8 (the middle element is in both windows)
    assert adaptive_window_total(7, 2) == 8
    # divisible 6 -> 2: windows of 3 and 3 = 6 = the input size
    assert adaptive_window_total(6, 2) == 6
    # upsampling 3 -> 5: [0,1) [0,2) [1,2) [1,3) [2,3) = 1 + 2 + 1 + 2 + 1 = 7
    assert adaptive_window_total(3, 5) == 7


ADAPTIVE = [
    # output 1x1 is torch's special case: a mean over H*W, 2*3*25 = 150 input elements
    pytest.param(nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5), "aten.mean", 150, id="avg2d-global"),
    # non-divisible 5x7 -> 3x2: H windows 2 + 3 + 2 = 7, W windows 4 + 4 = 8: 56 per channel * 2*3 = 336
    pytest.param(nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 5, 7), "aten._adaptive_avg_pool2d", 336, id="avg2d-5x7-to-3x2"),
    pytest.param(nn.AdaptiveMaxPool2d((3, 2)), (2, 3, 5, 7), "aten.adaptive_max_pool2d", 336, id="max2d-5x7-to-3x2"),
    # divisible 4x6 -> 2x2: every input element in exactly one window: 2*3*24 = 144 = numel
    pytest.param(nn.AdaptiveAvgPool2d((2, 2)), (2, 3, 4, 6), "aten._adaptive_avg_pool2d", 144, id="avg2d-divisible"),
    # 1-D runs as 2-D with a height of 1: 5 -> 3 windows 7 * 2*3 = 42
    pytest.param(nn.AdaptiveAvgPool1d(3), (2, 3, 5), "aten._adaptive_avg_pool2d", 42, id="avg1d-5-to-3"),
    pytest.param(nn.AdaptiveMaxPool1d(3), (2, 3, 5), "aten.adaptive_max_pool2d", 42, id="max1d-5-to-3"),
    # upsampling 3 -> 5: 7 * 2 channels = 14
    pytest.param(nn.AdaptiveAvgPool1d(5), (1, 2, 3), "aten._adaptive_avg_pool2d", 14, id="avg1d-3-to-5"),
    # 5x4x3 -> 2x3x2: D 5 -> 2: [0,3) [2,5) = 6; H 4 -> 3: [0,2) [1,3) [2,4) = 6; W 3 -> 2: [0,2) [1,3) = 4
    # 6*6*4 = 144 per channel * 2 = 288
    pytest.param(nn.AdaptiveAvgPool3d((2, 3, 2)), (1, 2, 5, 4, 3), "aten._adaptive_avg_pool3d", 288, id="avg3d"),
    pytest.param(nn.AdaptiveMaxPool3d((2, 3, 2)), (1, 2, 5, 4, 3), "aten.adaptive_max_pool3d", 288, id="max3d"),
    # unbatched [C, D, H, W]
    pytest.param(nn.AdaptiveAvgPool3d((2, 3, 2)), (2, 5, 4, 3), "aten._adaptive_avg_pool3d", 288, id="avg3d-unbatched"),
    pytest.param(nn.AdaptiveAvgPool3d(1), (1, 2, 5, 4, 3), "aten.mean", 120, id="avg3d-global"),
]


@pytest.mark.parametrize(("module", "shape", "op", "flops"), ADAPTIVE)
def test_adaptive_pool(module: nn.Module, shape: tuple[int, ...], op: str, flops: int) -> None:
    assert op_costs(run(module, torch.randn(*shape))) == {op: (1, flops, 0)}


# --- pooling backward ------------------------------------------------------------------------------------------

POOL_BACKWARDS = [
    # grad_output 2*3*3 = 18 elements * window 4 = 72 (the forward's cost); loss sum over 18 outputs
    pytest.param(nn.MaxPool2d(2), (1, 2, 6, 6), "aten.max_pool2d_with_indices_backward", 72, 18, id="max2d"),
    pytest.param(nn.AvgPool2d(2), (1, 2, 6, 6), "aten.avg_pool2d_backward", 72, 18, id="avg2d"),
    # 1-D: 6 outputs * 2
    pytest.param(nn.MaxPool1d(2), (1, 2, 6), "aten.max_pool2d_with_indices_backward", 12, 6, id="max1d"),
    pytest.param(nn.AvgPool1d(2), (1, 2, 6), "aten.avg_pool2d_backward", 12, 6, id="avg1d"),
    pytest.param(nn.MaxPool3d(2), (1, 2, 4, 4, 4), "aten.max_pool3d_with_indices_backward", 128, 16, id="max3d"),
    pytest.param(nn.AvgPool3d(2), (1, 2, 4, 4, 4), "aten.avg_pool3d_backward", 128, 16, id="avg3d"),
    # adaptive backwards reuse the forward windows: 336 / 288 as above
    pytest.param(
        nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 5, 7), "aten._adaptive_avg_pool2d_backward", 336, 36, id="adaptive-avg2d"
    ),
    pytest.param(
        nn.AdaptiveMaxPool2d((3, 2)), (2, 3, 5, 7), "aten.adaptive_max_pool2d_backward", 336, 36, id="adaptive-max2d"
    ),
    pytest.param(
        nn.AdaptiveAvgPool3d((2, 3, 2)),
        (1, 2, 5, 4, 3),
        "aten._adaptive_avg_pool3d_backward",
        288,
        24,
        id="adaptive-avg3d",
    ),
    pytest.param(
        nn.AdaptiveMaxPool3d((2, 3, 2)),
        (1, 2, 5, 4, 3),
        "aten.adaptive_max_pool3d_backward",
        288,
        24,
        id="adaptive-max3d",
    ),
    pytest.param(
        nn.AdaptiveAvgPool3d((2, 3, 2)),
        (2, 5, 4, 3),
        "aten._adaptive_avg_pool3d_backward",
        288,
        24,
        id="adaptive-avg3d-unbatched",
    ),
    pytest.param(
        nn.AdaptiveMaxPool3d((2, 3, 2)),
        (2, 5, 4, 3),
        "aten.adaptive_max_pool3d_backward",
        288,
        24,
        id="adaptive-max3d-unbatched",
    ),
]


@pytest.mark.parametrize(("module", "shape", "op", "flops", "outputs"), POOL_BACKWARDS)
def test_pool_backward(module: nn.Module, shape: tuple[int, ...], op: str, flops: int, outputs: int) -> None:
    report = run(module, torch.randn(*shape, requires_grad=True), training=True)
    # forward: the pool + loss sum over its outputs; backward: the pool backward, same cost as the forward
    assert (report.forward.flops, report.backward.flops) == (flops + outputs, flops)
    assert op_costs(report)[op] == (1, flops, 0)


# --- interpolation ---------------------------------------------------------------------------------------------


def interpolate(**options: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda t: F.interpolate(t, **options)


X1, X2, X3 = (1, 2, 3), (1, 2, 3, 4), (1, 2, 2, 3, 4)

INTERPOLATIONS = [
    # nearest is a gather: free, but the op is recognised (listed with zero cost, never skipped)
    pytest.param(interpolate(scale_factor=2, mode="nearest"), X2, "aten.upsample_nearest2d", 0, id="nearest2d"),
    pytest.param(
        interpolate(scale_factor=2, mode="nearest-exact"), X2, "aten._upsample_nearest_exact2d", 0, id="nearest-exact2d"
    ),
    pytest.param(interpolate(scale_factor=2, mode="nearest"), X1, "aten.upsample_nearest1d", 0, id="nearest1d"),
    pytest.param(interpolate(scale_factor=2, mode="nearest"), X3, "aten.upsample_nearest3d", 0, id="nearest3d"),
    # linear: 3 -> 6, 1*2*6 = 12 outputs * (2*2 - 1 = 3) = 36
    pytest.param(interpolate(scale_factor=2, mode="linear"), X1, "aten.upsample_linear1d", 36, id="linear1d"),
    # bilinear: 3x4 -> 6x8, 2*48 = 96 outputs * (2*4 - 1 = 7) = 672
    pytest.param(interpolate(scale_factor=2, mode="bilinear"), X2, "aten.upsample_bilinear2d", 672, id="bilinear2d"),
    # explicit size 5x7, align_corners: 2*35 = 70 outputs * 7 = 490
    pytest.param(
        interpolate(size=(5, 7), mode="bilinear", align_corners=True),
        X2,
        "aten.upsample_bilinear2d",
        490,
        id="bilinear2d-size",
    ),
    # bicubic: 96 outputs * (2*16 - 1 = 31) = 2976
    pytest.param(interpolate(scale_factor=2, mode="bicubic"), X2, "aten.upsample_bicubic2d", 2976, id="bicubic2d"),
    # antialiased kernels: same per-output cost as their plain mode
    pytest.param(
        interpolate(scale_factor=2, mode="bilinear", antialias=True),
        X2,
        "aten._upsample_bilinear2d_aa",
        672,
        id="bilinear2d-aa",
    ),
    pytest.param(
        interpolate(scale_factor=2, mode="bicubic", antialias=True),
        X2,
        "aten._upsample_bicubic2d_aa",
        2976,
        id="bicubic2d-aa",
    ),
    # trilinear: 2x3x4 -> 4x6x8, 2*192 = 384 outputs * (2*8 - 1 = 15) = 5760
    pytest.param(
        interpolate(scale_factor=2, mode="trilinear"), X3, "aten.upsample_trilinear3d", 5760, id="trilinear3d"
    ),
]


@pytest.mark.parametrize(("fn", "shape", "op", "flops"), INTERPOLATIONS)
def test_interpolate(fn: Callable[..., Any], shape: tuple[int, ...], op: str, flops: int) -> None:
    report = count(Call(fn), torch.randn(*shape))
    assert report.skipped == {}
    assert op_costs(report) == {op: (1, flops, 0)}


def test_upsample_module_nearest() -> None:
    report = count(nn.Upsample(scale_factor=2), torch.randn(*X2))
    assert report.skipped == {} and report.flops == 0


UPSAMPLE_BACKWARDS = [
    # backward of bilinear: the forward's cost on the gradient, 96 * 7 = 672; loss sum over 96 outputs
    pytest.param("bilinear", X2, "aten.upsample_bilinear2d_backward", 672, 96, id="bilinear2d"),
    pytest.param("bicubic", X2, "aten.upsample_bicubic2d_backward", 2976, 96, id="bicubic2d"),
    pytest.param("linear", X1, "aten.upsample_linear1d_backward", 36, 12, id="linear1d"),
    pytest.param("trilinear", X3, "aten.upsample_trilinear3d_backward", 5760, 384, id="trilinear3d"),
    # nearest backward sums each gradient element into its source: 1 per gradient element
    pytest.param("nearest", X2, "aten.upsample_nearest2d_backward", 96, 96, id="nearest2d"),
    pytest.param("nearest", X1, "aten.upsample_nearest1d_backward", 12, 12, id="nearest1d"),
]


@pytest.mark.parametrize(("mode", "shape", "op", "flops", "outputs"), UPSAMPLE_BACKWARDS)
def test_interpolate_backward(mode: str, shape: tuple[int, ...], op: str, flops: int, outputs: int) -> None:
    report = count(Call(interpolate(scale_factor=2, mode=mode)), torch.randn(*shape, requires_grad=True), training=True)
    assert report.skipped == {}
    assert op_costs(report)[op] == (1, flops, 0)
    assert report.backward.flops == flops
    assert report.forward.flops == op_costs(report)[op.replace("_backward", "")][1] + outputs


def test_nearest_exact_backward() -> None:
    report = run(interpolate(scale_factor=2, mode="nearest-exact"), torch.randn(*X2, requires_grad=True), training=True)
    # forward free + loss sum 96; backward: 96 gradient elements summed into their sources
    assert op_costs(report) == {
        "aten._upsample_nearest_exact2d": (1, 0, 0),
        "aten.sum": (1, 96, 0),
        "aten._upsample_nearest_exact2d_backward": (1, 96, 0),
    }


# --- backwards of free spatial ops -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "shape"),
    [
        pytest.param(lambda t: F.pad(t, (1, 1), mode="reflect"), (1, 2, 4), id="reflection_pad1d_backward"),
        pytest.param(lambda t: F.pad(t, (1, 1, 1, 1), mode="replicate"), (1, 2, 4, 4), id="replication_pad2d_backward"),
        pytest.param(lambda t: t.unfold(2, 2, 1).sum(-1), (1, 2, 4), id="unfold_backward"),
        pytest.param(lambda t: F.fold(t, (4, 4), 2, stride=2), (1, 8, 4), id="col2im"),
    ],
)
def test_spatial_gradient_scatters_are_counted(fn: Callable[..., Any], shape: tuple[int, ...]) -> None:
    # gradients of overlapping / reflected positions are summed: these ops have arithmetic and need a formula
    report = count(Call(fn), torch.randn(*shape, requires_grad=True), training=True)
    assert report.skipped == {}
