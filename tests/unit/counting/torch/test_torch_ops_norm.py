"""Normalisation, hand-derived: batch / layer / group / instance norm and RMSNorm, eval and train, backward.

Convention (formulas.norm): per element, statistics 4 (mean: add; variance: subtract, square, add), normalising 2
(subtract mean, multiply by inverse std), affine 1 for the weight and 1 for the bias. Evaluation-mode batch norm
uses the running statistics: no statistics cost. RMS norm: statistics 2 (square, add), applying 1, weight 1.
Backward of a norm kernel: twice the full (statistics + affine) forward per element, whatever the affine and the
output mask.

Every test uses x = [2, 3, 4, 5]: 120 elements.
"""

from __future__ import annotations

from functools import partial

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_op_helpers import op_costs  # noqa: E402
from torch_op_helpers import run as checked_run  # noqa: E402

from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402

N = 2 * 3 * 4 * 5  # 120 elements

run = partial(checked_run, macs_free=True)  # normalisation has no MACs


def x() -> torch.Tensor:
    return torch.randn(2, 3, 4, 5)


# --- forward, eval and train -----------------------------------------------------------------------------------

NORMS = [
    # batch norm, eval: running statistics, normalise 2 + weight 1 + bias 1 = 4 per element
    pytest.param(nn.BatchNorm2d(3), False, {"aten.native_batch_norm": (1, 4 * N, 0)}, id="batchnorm-eval"),
    pytest.param(
        nn.BatchNorm2d(3, affine=False), False, {"aten.native_batch_norm": (1, 2 * N, 0)}, id="batchnorm-eval-noaffine"
    ),
    # batch norm, train: statistics 4 + normalise 2 + affine 2 = 8 per element; plus num_batches_tracked += 1,
    # an `aten.add` of one element on the integer buffer
    pytest.param(
        nn.BatchNorm2d(3), True, {"aten.native_batch_norm": (1, 8 * N, 0), "aten.add": (1, 1, 0)}, id="batchnorm-train"
    ),
    pytest.param(
        nn.BatchNorm2d(3, affine=False),
        True,
        {"aten.native_batch_norm": (1, 6 * N, 0), "aten.add": (1, 1, 0)},
        id="batchnorm-train-noaffine",
    ),
    # without running statistics even eval mode normalises with the batch statistics: 8 per element
    pytest.param(
        nn.BatchNorm2d(3, track_running_stats=False),
        False,
        {"aten.native_batch_norm": (1, 8 * N, 0)},
        id="batchnorm-no-running-stats-eval",
    ),
    # layer norm over the last dim: 8 per element in eval and train alike
    pytest.param(nn.LayerNorm(5), False, {"aten.native_layer_norm": (1, 8 * N, 0)}, id="layernorm-eval"),
    pytest.param(nn.LayerNorm(5), True, {"aten.native_layer_norm": (1, 8 * N, 0)}, id="layernorm-train"),
    pytest.param(nn.LayerNorm(5, bias=False), False, {"aten.native_layer_norm": (1, 7 * N, 0)}, id="layernorm-nobias"),
    pytest.param(
        nn.LayerNorm((4, 5), elementwise_affine=False),
        False,
        {"aten.native_layer_norm": (1, 6 * N, 0)},
        id="layernorm-noaffine",
    ),
    pytest.param(nn.GroupNorm(1, 3), False, {"aten.native_group_norm": (1, 8 * N, 0)}, id="groupnorm-eval"),
    pytest.param(
        nn.GroupNorm(3, 3, affine=False), True, {"aten.native_group_norm": (1, 6 * N, 0)}, id="groupnorm-train-noaffine"
    ),
    # instance norm is batch norm with per-instance statistics (always, when there are no running statistics)
    pytest.param(nn.InstanceNorm2d(3), False, {"aten.native_batch_norm": (1, 6 * N, 0)}, id="instancenorm-eval"),
    pytest.param(
        nn.InstanceNorm2d(3, affine=True),
        True,
        {"aten.native_batch_norm": (1, 8 * N, 0)},
        id="instancenorm-train-affine",
    ),
    # RMSNorm on the CPU is decomposed (rows = 2*3*4 = 24): x.pow(2) 120, mean 120, + eps 24 rows, rsqrt 24,
    # x * rstd 120, * weight 120 = 528
    pytest.param(
        nn.RMSNorm(5),
        False,
        {
            "aten.pow": (1, N, 0),
            "aten.mean": (1, N, 0),
            "aten.add": (1, 24, 0),
            "aten.rsqrt": (1, 24, 0),
            "aten.mul": (2, 2 * N, 0),
        },
        id="rmsnorm-eval",
    ),
    pytest.param(
        nn.RMSNorm(5),
        True,
        {
            "aten.pow": (1, N, 0),
            "aten.mean": (1, N, 0),
            "aten.add": (1, 24, 0),
            "aten.rsqrt": (1, 24, 0),
            "aten.mul": (2, 2 * N, 0),
        },
        id="rmsnorm-train",
    ),
    pytest.param(
        nn.RMSNorm(5, elementwise_affine=False),
        False,
        {
            "aten.pow": (1, N, 0),
            "aten.mean": (1, N, 0),
            "aten.add": (1, 24, 0),
            "aten.rsqrt": (1, 24, 0),
            "aten.mul": (1, N, 0),
        },
        id="rmsnorm-noaffine",
    ),
]


@pytest.mark.parametrize(("module", "train", "expected"), NORMS)
def test_norm_forward(module: nn.Module, train: bool, expected: dict[str, tuple[int, int, int]]) -> None:
    report = run(module.train(train), x())
    assert op_costs(report) == expected
    assert report.flops == sum(flops for _, flops, _ in expected.values())


def test_functional_rms_norm() -> None:
    # F.rms_norm without a weight: 4*120 + 2*24 rows = 408
    report = run(lambda t: F.rms_norm(t, (5,)), x())
    assert report.flops == 408
    # with a weight: one more multiply per element = 528, as nn.RMSNorm
    assert run(lambda t, w: F.rms_norm(t, (5,), w), x(), torch.randn(5)).flops == 528


def test_norm_modules_in_eval_count_the_same_under_no_grad() -> None:
    model = nn.Sequential(nn.BatchNorm2d(3), nn.GroupNorm(1, 3), nn.InstanceNorm2d(3), nn.LayerNorm(5)).eval()
    with torch.no_grad():
        inference = run(model, x())
    # batch norm 4 + group norm 8 + instance norm 6 + layer norm 8 = 26 per element
    assert inference.flops == run(model, x()).flops == 26 * N


# --- norm kernels reached only on other devices or through direct calls ----------------------------------------


def test_batch_norm_kernel_variants() -> None:
    aten = torch.ops.aten
    t = torch.randn(2, 3, 5)  # 30 elements
    ones, zeros = torch.ones(3), torch.zeros(3)
    cases = [
        # eval kernel: normalise 2 + affine 2 = 4 per element
        (
            lambda v: aten._native_batch_norm_legit_no_training(v, ones, zeros, zeros, ones, 0.1, 1e-5)[0],
            "aten._native_batch_norm_legit_no_training",
            4 * 30,
        ),
        # training kernel without weight and bias: statistics 4 + normalise 2 = 6
        (
            lambda v: aten._native_batch_norm_legit(v, None, None, zeros.clone(), ones.clone(), True, 0.1, 1e-5)[0],
            "aten._native_batch_norm_legit",
            6 * 30,
        ),
        (
            lambda v: aten._native_batch_norm_legit(v, None, None, True, 0.1, 1e-5)[0],
            "aten._native_batch_norm_legit",
            6 * 30,
        ),
        # the training-with-update kernel always computes statistics: 8 per element
        (
            lambda v: aten._batch_norm_with_update(v, ones, zeros, zeros.clone(), ones.clone(), 0.1, 1e-5)[0],
            "aten._batch_norm_with_update",
            8 * 30,
        ),
        (
            lambda v: aten._batch_norm_no_update(v, ones, zeros, zeros, ones, 0.1, 1e-5)[0],
            "aten._batch_norm_no_update",
            4 * 30,
        ),
    ]
    for fn, op, flops in cases:
        assert op_costs(run(fn, t)) == {op: (1, flops, 0)}


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


def test_fused_rms_norm_formula() -> None:
    # aten._fused_rms_norm is what CUDA runs (the CPU decomposes it): square + add 2, apply 1, weight 1
    fused = TORCH_OPS.lookup("aten._fused_rms_norm")
    assert fused({"input": meta(2, 3, 4, 5), "weight": meta(5)}, None) == Cost(4 * N, 0)
    assert fused({"input": meta(2, 3, 4, 5), "weight": None}, None) == Cost(3 * N, 0)
    # backward: twice the forward with weight
    backward = TORCH_OPS.lookup("aten._fused_rms_norm_backward")
    assert backward({"input": meta(2, 3, 4, 5)}, None) == Cost(8 * N, 0)


def test_norm_kernel_aliases_share_formulas() -> None:
    batch = TORCH_OPS.lookup("aten.native_batch_norm")
    for alias in (
        "aten._native_batch_norm_legit",
        "aten.cudnn_batch_norm",
        "aten.miopen_batch_norm",
        "aten._batch_norm_with_update",
        "aten._native_batch_norm_legit_functional",
    ):
        assert TORCH_OPS.lookup(alias) is batch
    assert TORCH_OPS.lookup("aten.native_group_norm") is TORCH_OPS.lookup("aten.native_layer_norm")
    backward = TORCH_OPS.lookup("aten.native_batch_norm_backward")
    for alias in (
        "aten.batch_norm_backward",
        "aten.native_layer_norm_backward",
        "aten.native_group_norm_backward",
        "aten.cudnn_batch_norm_backward",
        "aten.miopen_batch_norm_backward",
    ):
        assert TORCH_OPS.lookup(alias) is backward


# --- backward --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "forward_op", "backward_op", "extra_forward"),
    [
        (nn.LayerNorm(5), "aten.native_layer_norm", "aten.native_layer_norm_backward", {}),
        (nn.GroupNorm(1, 3), "aten.native_group_norm", "aten.native_group_norm_backward", {}),
        (nn.BatchNorm2d(3), "aten.native_batch_norm", "aten.native_batch_norm_backward", {"aten.add": (1, 1, 0)}),
    ],
)
def test_norm_backward(module: nn.Module, forward_op: str, backward_op: str, extra_forward: dict) -> None:
    report = run(module, x(), training=True)
    # forward 8 per element = 960; loss sum 120; backward 2 * 8 = 16 per element = 1920
    assert op_costs(report) == {
        forward_op: (1, 8 * N, 0),
        "aten.sum": (1, N, 0),
        backward_op: (1, 16 * N, 0),
        **extra_forward,
    }
    assert report.backward.flops == 16 * N


def test_norm_backward_ignores_affine_and_output_mask() -> None:
    # layer norm without affine, input with grad: forward 6 per element, backward still 2 * 8 = 16 per element
    report = run(nn.LayerNorm(5, elementwise_affine=False), x().requires_grad_(), training=True)
    assert op_costs(report)["aten.native_layer_norm"] == (1, 6 * N, 0)
    assert op_costs(report)["aten.native_layer_norm_backward"] == (1, 16 * N, 0)


def test_rms_norm_backward_on_cpu_is_decomposed() -> None:
    report = run(nn.RMSNorm(5), x(), training=True)
    # forward 528 + loss sum 120 = 648
    # backward: the input needs no gradient; grad_weight = (dY * x_normalised).sum over the 24 rows: 120 + 120
    assert (report.forward.flops, report.backward.flops) == (648, 240)
    assert op_costs(report)["aten.sum"] == (2, 2 * N, 0)
