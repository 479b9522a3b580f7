"""The shape math both backends share (`counting/formulas.py`), checked against arithmetic written out by hand.

The backends' own tests check that an op reaches the right formula; these check each formula on small shapes
whose costs can be worked out on paper, so a change to a convention shows up here first, with its arithmetic.
"""

from __future__ import annotations

import pytest

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.formulas import Cost


def test_cost_adds_and_multiplies_both_figures() -> None:
    assert Cost(3, 1) + Cost(10, 5) == Cost(13, 6)
    assert Cost(3, 1).times(4) == Cost(12, 4)
    assert Cost(3, 1).__add__((1, 1)) is NotImplemented  # a plain tuple is not a cost


def test_matmul_and_linear() -> None:
    # M*N*K = 4*5*6 = 120 MACs; 2*M*N*K = 240 FLOPs
    assert f.matmul(4, 5, 6) == Cost(240, 120)
    # batched: 3 * 120 = 360 MACs
    assert f.matmul(4, 5, 6, batch=3) == Cost(720, 360)
    # Linear(8 -> 3) on 2 rows: 2*3*8 = 48 MACs, 96 FLOPs, + bias 2*3 = 6 adds
    assert f.linear(2, 8, 3, bias=False) == Cost(96, 48)
    assert f.linear(2, 8, 3, bias=True) == Cost(102, 48)


def test_conv_counts_taps_per_group() -> None:
    # 1 image, 4 -> 6 channels, 5x5 output, 3x3 kernel: 6*25 = 150 outputs * 4*9 = 36 taps = 5,400 MACs
    assert f.conv(1, 4, 6, (5, 5), (3, 3)) == Cost(10_800, 5_400)
    # groups=2: each output reads 4/2 = 2 channels: 150 * 2*9 = 2,700 MACs; bias adds 150
    assert f.conv(1, 4, 6, (5, 5), (3, 3), groups=2, bias=True) == Cost(5_400 + 150, 2_700)


def test_conv_transpose_follows_the_input_size() -> None:
    # 2 images of 3 channels at 4x4 scattered through 5 out-channels * 2x2 taps: 2*3*16*5*4 = 1,920 MACs
    assert f.conv_transpose(2, 3, 5, (4, 4), (2, 2)) == Cost(3_840, 1_920)
    # the bias is added once per output element: 2*5*8*8 = 640
    assert f.conv_transpose(2, 3, 5, (4, 4), (2, 2), bias=True, out_spatial=(8, 8)) == Cost(3_840 + 640, 1_920)


def test_attention_and_its_backward() -> None:
    # 2 heads, 3 queries, 4 keys, head_dim 5: QK^T 2*3*4*5 = 120 MACs, AV 2*3*5*4 = 120 MACs -> 240 MACs, 480 FLOPs
    # scores 2*3*4 = 24, each scaled (1) and softmaxed (5): 144; a mask adds 24 more
    assert f.attention(2, 3, 4, 5) == Cost(480 + 144, 240)
    assert f.attention(2, 3, 4, 5, masked=True) == Cost(480 + 168, 240)
    # v_dim 7: AV 2*3*7*4 = 168 MACs -> 288 MACs
    assert f.attention(2, 3, 4, 5, v_dim=7) == Cost(576 + 144, 288)
    # backward: five products of 2*3*4*5 = 120 MACs each = 600 MACs; scores 24 * (4 + 1) = 120
    assert f.attention_backward(2, 3, 4, 5) == Cost(1_200 + 120, 600)


def test_normalisations_and_softmax() -> None:
    # layer norm on 10 elements: stats 4 + apply 2 + weight 1 + bias 1 = 8 per element
    assert f.norm(10, stats=True, weight=True, bias=True) == Cost(80, 0)
    # batch norm in inference (running stats): apply 2 + weight 1 = 3 per element
    assert f.norm(10, stats=False, weight=True, bias=False) == Cost(30, 0)
    # RMS norm: square, add, multiply = 3 per element, + 1 for the weight
    assert f.rms_norm(10, weight=False) == Cost(30, 0)
    assert f.rms_norm(10, weight=True) == Cost(40, 0)
    assert f.softmax(6) == Cost(30, 0)  # 5 per element
    assert f.reduction(7) == Cost(7, 0)
    assert f.reduction(7, f.VARIANCE) == Cost(21, 0)


@pytest.mark.parametrize(("n", "expected"), [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4)])
def test_log2_ceil(n: int, expected: int) -> None:
    assert f.log2_ceil(n) == expected


def test_selection_sorting_and_searching() -> None:
    assert f.selection(12) == Cost(12, 0)  # one comparison per input element
    # 3 rows of 5: 5 * ceil(log2 5) = 5*3 = 15 per row, 45 in all
    assert f.comparison_sort(3, 5) == Cost(45, 0)
    assert f.comparison_sort(4, 1) == Cost(0, 0)  # a row of one is sorted
    # 6 values among 7 boundaries: 8 places, ceil(log2 8) = 3 comparisons each = 18
    assert f.binary_search(6, 7) == Cost(18, 0)


def test_pooling_windows() -> None:
    assert f.pool(10, 9) == Cost(90, 0)  # a 3x3 window per output
    # adaptive 5 -> 3: windows [0,2) [1,4) [3,5) = 2 + 3 + 2 = 7
    assert f.adaptive_window_total(5, 3) == 7
    assert f.adaptive_window_total(4, 2) == 4  # [0,2) [2,4): no overlap when it divides
    # 2 batch*channels, 5x4 -> 3x2: 7 * 4 = 28 window elements per map, 56 in all
    assert f.adaptive_pool(2, (5, 4), (3, 2)) == Cost(56, 0)


def test_interpolation_modes() -> None:
    assert f.interpolate(10, "nearest", 2) == f.ZERO
    assert f.interpolate(10, "nearest-exact", 2) == f.ZERO
    # bilinear: 4 neighbours, 4 multiplies + 3 adds = 7 per output
    assert f.interpolate(10, "bilinear", 2) == Cost(70, 0)
    # bicubic: 16 neighbours, 16 + 15 = 31 per output
    assert f.interpolate(10, "bicubic", 2) == Cost(310, 0)
    assert f.interpolate(10, "linear", 1) == Cost(30, 0)  # 2 + 1


def test_rnn_cells() -> None:
    # LSTM step, batch 2, input 3, hidden 4: 2*16*3 = 96 + 2*16*4 = 128 -> 224 MACs, 448 FLOPs
    # per hidden unit: 4 gates * (2 biases + add + activation) = 16, + 4 cell update = 20; 2*4 units -> 160
    assert f.rnn_cell(2, 3, 4, gates=4, bias=True) == Cost(448 + 160, 224)
    # GRU without bias: 2*12*3 + 2*12*4 = 168 MACs; per unit 3 * 2 + 5 = 11 -> 88
    assert f.rnn_cell(2, 3, 4, gates=3, bias=False) == Cost(336 + 88, 168)
    # plain RNN with bias: 2*4*3 + 2*4*4 = 56 MACs; per unit 1 * 4 = 4 -> 32
    assert f.rnn_cell(2, 3, 4, gates=1, bias=True) == Cost(112 + 32, 56)


def test_gemm_scales_cost_a_multiply_each() -> None:
    # 2x3 @ 3x4: 24 MACs, 48 FLOPs; the addend: 8 adds
    assert f.gemm(2, 4, 3, has_addend=True) == Cost(56, 24)
    # alpha and beta not 1: 8 * (1 + 1 + 1) = 24
    assert f.gemm(2, 4, 3, has_addend=True, alpha=2.0, beta=0.5) == Cost(72, 24)
    # no addend (or beta 0): only alpha's multiply, if any
    assert f.gemm(2, 4, 3, has_addend=False) == Cost(48, 24)
    assert f.gemm(2, 4, 3, has_addend=True, alpha=3.0, beta=0.0) == Cost(56, 24)


def test_variadic_and_cross_entropy() -> None:
    assert f.variadic(6, 3) == Cost(12, 0)  # 2 binary operations per output
    assert f.variadic(6, 1) == Cost(0, 0)  # a copy
    # 4 rows of 10 scores: log_softmax 40*5 = 200, NLL 1 per target = 4
    assert f.cross_entropy(40, 4) == Cost(204, 0)


def test_local_response_norm_truncates_its_window() -> None:
    # 5 channels, size 3: windows [0,1] [0,2] [1,3] [2,4] [3,4] = 2 + 3 + 3 + 3 + 2 = 13
    assert f.lrn_window_total(5, 3) == 13
    # size 4 (1 below, 2 above): [0,2] [0,3] [1,4] [2,4] [3,4] = 3 + 4 + 4 + 3 + 2 = 16
    assert f.lrn_window_total(5, 4) == 16
    # 2 positions * 5 channels = 10 elements * (1 + 4) = 50, + 2 * 13 window sums = 26
    assert f.local_response_norm(2, 5, 3) == Cost(76, 0)


def test_integer_ops_are_a_third_figure_of_a_cost():
    assert Cost(3, 1, 8) + Cost(10, 5) == Cost(13, 6, 8)
    assert Cost(3, 1, 8).times(2) == Cost(6, 2, 16)
    assert f.matmul(4, 5, 6).in_integers() == Cost(0, 0, 240)  # 2 per integer MAC, no floating-point MACs
    assert f.gemm(4, 5, 6, has_addend=True).in_integers() == Cost(0, 0, 260)  # its integer bias add too
    assert f.on_integers(f.matmul(4, 5, 6), True) == Cost(0, 0, 240)
    assert f.on_integers(f.matmul(4, 5, 6), False) == Cost(240, 120)
    assert f.on_integers(f.elementwise(7), True) == Cost(7, 0)  # no MACs: elementwise ops stay FLOPs
    # a cost without integer ops is still its (flops, macs) pair, in comparisons and in print
    assert Cost(6, 3) == (6, 3) and (6, 3) == Cost(6, 3) and Cost(6, 3, 1) != (6, 3)  # noqa: SIM300
    assert repr(Cost(6, 3)) == "Cost(flops=6, macs=3)" and repr(Cost(0, 0, 2)) == "Cost(flops=0, macs=0, int_ops=2)"
    assert hash(Cost(6, 3)) == hash((6, 3))
