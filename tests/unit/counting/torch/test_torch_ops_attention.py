"""Attention, hand-derived: F.scaled_dot_product_attention (fused CPU kernel and the math path) and
nn.MultiheadAttention (fused `aten._native_multi_head_attention` and the unfused path).

Convention (formulas.attention): QK^T and AV are matmuls, B*H*L*S*E + B*H*L*S*Ev MACs; per score (B*H*L*S) the
scale is 1 FLOP, the softmax 5, an additive mask 1. A causal mask does not reduce the count (dense rule). The
backward is five matmuls (recompute S, dV, dP, dQ, dK) plus 5 FLOPs per score (softmax backward 4 + 1).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch_op_helpers import Call, op_costs, run  # noqa: E402

from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402

FUSED = "aten._scaled_dot_product_flash_attention_for_cpu"
MHA = "aten._native_multi_head_attention"


def sdpa(**options: Any) -> Callable[..., Any]:
    return lambda q, k, v, *mask: F.scaled_dot_product_attention(q, k, v, *mask, **options)


# --- F.scaled_dot_product_attention: the fused CPU kernel ------------------------------------------------------


def test_sdpa_reference_case_hits_the_fused_cpu_kernel() -> None:
    q = torch.randn(4, 8, 128, 64)
    report = run(sdpa(), q, q, q)
    assert list(report.layers[""].ops) == [FUSED]
    # QK^T and AV: 2 * (B*H*S*S*D) = 2 * 4*8*128*128*64 = 67,108,864 MACs -> 134,217,728 matmul FLOPs
    assert report.macs == 67_108_864
    assert 2 * report.macs == 134_217_728
    # + per score (4*8*128*128 = 524,288): scale 1 + softmax 5 = 3,145,728 -> 137,363,456
    assert report.flops == 134_217_728 + 6 * 524_288 == 137_363_456


def test_sdpa_causal_counts_the_same_as_dense() -> None:
    # documented dense rule: is_causal does not reduce the count
    q = torch.randn(1, 2, 16, 8)
    causal, dense = run(sdpa(is_causal=True), q, q, q), run(sdpa(), q, q, q)
    assert list(causal.layers[""].ops) == [FUSED]
    # 2 matmuls of B*H*S*S*D = 2*16*16*8 = 4096 MACs each = 8192 MACs; scores 512 * 6 = 3072; 16384 + 3072
    assert (causal.flops, causal.macs) == (dense.flops, dense.macs) == (19456, 8192)


def test_sdpa_different_kv_length() -> None:
    q, k = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4)
    report = run(sdpa(), q, k, k)
    # B*H = 4; QK^T 4*3*5*4 = 240 MACs; AV 4*3*4*5 = 240 MACs -> 480 MACs = 960 FLOPs
    # scores 4*3*5 = 60 * (scale 1 + softmax 5) = 360 -> 1320
    assert op_costs(report) == {FUSED: (1, 1320, 480)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_sdpa_with_attn_mask(dtype: torch.dtype) -> None:
    q, k = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4)
    mask = torch.ones(3, 5, dtype=dtype) if dtype == torch.bool else torch.randn(3, 5)
    report = run(sdpa(), q, k, k, mask)
    # as above plus 1 FLOP per score for the mask: 60 * 7 = 420 -> 960 + 420 = 1380
    assert op_costs(report) == {FUSED: (1, 1380, 480)}


def test_sdpa_grouped_query_attention() -> None:
    q, kv = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8)
    report = run(sdpa(enable_gqa=True), q, kv, kv)
    # one attention per *query* head: B*H_q = 4; QK^T 4*3*5*8 = 480, AV 480 -> 960 MACs
    # scores 4*3*5 = 60 * 6 = 360 -> 1920 + 360 = 2280
    assert op_costs(report) == {FUSED: (1, 2280, 960)}


def test_sdpa_value_dim_differs_falls_back_to_math_on_cpu() -> None:
    q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 6)
    report = run(sdpa(), q, k, v)
    # the flash CPU kernel needs Ev == E, so torch runs the math decomposition:
    #   scale: q and k are each multiplied by sqrt(1/sqrt(E)): 2*2*3*4 + 2*2*5*4 = 48 + 80 = 128
    #   QK^T 4*3*5*4 = 240 MACs; AV 4*3*6*5 = 360 MACs -> 600 MACs, 1200 FLOPs; softmax 60 * 5 = 300
    assert op_costs(report) == {"aten.mul": (2, 128, 0), "aten.bmm": (2, 1200, 600), "aten._safe_softmax": (1, 300, 0)}
    # the fused formula on the same shapes: same MACs, scale per score instead of per q/k element
    fused = TORCH_OPS.lookup(FUSED)({"query": q, "key": k, "value": v, "attn_mask": None}, None)
    assert fused == Cost(1200 + 60 * 6, 600)


# --- the math path (forced) ------------------------------------------------------------------------------------


def math(fn: Callable[..., Any]) -> Callable[..., Any]:
    def forced(*args: Any) -> Any:
        with sdpa_kernel(SDPBackend.MATH):
            return fn(*args)

    return forced


def test_sdpa_math_path_reference_case_has_the_same_macs() -> None:
    q = torch.randn(4, 8, 128, 64)
    fused = run(sdpa(), q, q, q)
    decomposed = run(math(sdpa()), q, q, q)
    # math path: scale q and k by sqrt(1/sqrt(D)): 2 * 4*8*128*64 = 524,288 multiplies
    #            two bmm of 32 x (128x64 @ 64x128) and (128x128 @ 128x64): 67,108,864 MACs
    #            _safe_softmax over 524,288 scores * 5 = 2,621,440
    assert op_costs(decomposed) == {
        "aten.mul": (2, 524_288, 0),
        "aten.bmm": (2, 134_217_728, 67_108_864),
        "aten._safe_softmax": (1, 2_621_440, 0),
    }
    assert decomposed.macs == fused.macs
    # here q+k elements (2*S*D) equal the scores (S*S) because S = 2*D, so even the FLOPs agree
    assert decomposed.flops == fused.flops == 137_363_456


def test_sdpa_math_path_flops_differ_only_in_where_the_scale_is_applied() -> None:
    q, k = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4)
    fused, decomposed = run(sdpa(), q, k, k), run(math(sdpa()), q, k, k)
    assert decomposed.macs == fused.macs == 480
    # fused: scale per score, 60; math: scale per q and k element, 48 + 80 = 128: 1320 - 60 + 128 = 1388
    assert op_costs(decomposed) == {
        "aten.mul": (2, 128, 0),
        "aten.bmm": (2, 960, 480),
        "aten._safe_softmax": (1, 300, 0),
    }
    assert decomposed.flops == fused.flops - 60 + 128 == 1388


def test_sdpa_math_path_causal_adds_the_mask_but_keeps_the_dense_macs() -> None:
    q = torch.randn(1, 2, 16, 8)
    fused, decomposed = run(sdpa(is_causal=True), q, q, q), run(math(sdpa(is_causal=True)), q, q, q)
    assert decomposed.macs == fused.macs == 8192
    # the math path builds a -inf mask (tril, masked_fill: free) and adds it to the 512 scores
    ops = op_costs(decomposed)
    assert ops["aten.add"] == (1, 512, 0)
    # scale q and k: 2 * 2*16*8 = 512; bmm 16384; mask 512; softmax 2560
    assert decomposed.flops == 512 + 16384 + 512 + 2560 == 19968


def test_sdpa_math_path_with_mask_and_gqa() -> None:
    q, k = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4)
    mask = torch.randn(3, 5)
    assert run(math(sdpa()), q, k, k, mask).macs == run(sdpa(), q, k, k, mask).macs == 480
    q, kv = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8)
    decomposed = run(math(sdpa(enable_gqa=True)), q, kv, kv)
    # k and v are repeated to 4 heads (free); scale q 96 + repeated k 160 = 256; bmm 960 MACs; softmax 300
    assert op_costs(decomposed) == {
        "aten.mul": (2, 256, 0),
        "aten.bmm": (2, 1920, 960),
        "aten._safe_softmax": (1, 300, 0),
    }


# --- backward --------------------------------------------------------------------------------------------------


def test_sdpa_backward_on_cpu() -> None:
    q, k = torch.randn(2, 2, 3, 4, requires_grad=True), torch.randn(2, 2, 5, 4)
    report = run(sdpa(), q, k, k, training=True)
    # forward 1320 (as above) + loss sum over 2*2*3*4 = 48
    # backward: 5 matmuls of B*H*L*S*E = 4*3*5*4 = 240 MACs = 1200 MACs = 2400 FLOPs; 60 scores * 5 = 300
    assert op_costs(report) == {
        FUSED: (1, 1320, 480),
        "aten.sum": (1, 48, 0),
        FUSED + "_backward": (1, 2700, 1200),
    }
    assert (report.backward.flops, report.backward.macs) == (2700, 1200)


# --- the other fused kernels (CUDA in practice; shapes only) ---------------------------------------------------


def test_efficient_and_flash_forward_kernels() -> None:
    aten = torch.ops.aten
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)
    # B*H = 2; QK^T 2*3*5*4 = 120 MACs, AV 120 -> 240 MACs = 480 FLOPs; 30 scores * 6 = 180 -> 660
    efficient = count(Call(lambda q, k: aten._scaled_dot_product_efficient_attention(q, k, k, None, False)[0]), q, k)
    assert op_costs(efficient) == {"aten._scaled_dot_product_efficient_attention": (1, 660, 240)}
    bias = torch.randn(1, 2, 3, 5)
    biased = count(Call(lambda q, k, b: aten._scaled_dot_product_efficient_attention(q, k, k, b, False)[0]), q, k, bias)
    # + 30 mask adds
    assert op_costs(biased) == {"aten._scaled_dot_product_efficient_attention": (1, 690, 240)}
    # _flash_attention_forward takes [B, L, H, E]
    flash = count(
        Call(lambda q, k: aten._flash_attention_forward(q, k, k, None, None, 3, 5, 0.0, False, False)[0]),
        q.transpose(1, 2),
        k.transpose(1, 2),
    )
    assert op_costs(flash) == {"aten._flash_attention_forward": (1, 660, 240)}


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize(
    ("op", "layout"),
    [
        ("aten._scaled_dot_product_flash_attention_backward", "BHLE"),
        ("aten._scaled_dot_product_efficient_attention_backward", "BHLE"),
        ("aten._scaled_dot_product_cudnn_attention_backward", "BHLE"),
        ("aten._flash_attention_backward", "BLHE"),
        ("aten._efficient_attention_backward", "BLHE"),
    ],
)
def test_attention_backward_formulas(op: str, layout: str) -> None:
    # B=1, H=2, L=3, S=5, E=4: five matmuls of 2*3*5*4 = 120 MACs = 600 MACs; 30 scores * 5 = 150 -> 1350
    if layout == "BHLE":
        q, kv = meta(1, 2, 3, 4), meta(1, 2, 5, 4)
    else:
        q, kv = meta(1, 3, 2, 4), meta(1, 5, 2, 4)
    assert TORCH_OPS.lookup(op)({"query": q, "key": kv, "value": kv}, None) == Cost(1350, 600)


def test_fused_sdpa_variants_share_formulas() -> None:
    forward = TORCH_OPS.lookup(FUSED)
    for alias in (
        "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_cudnn_attention",
        "aten._scaled_dot_product_fused_attention_overrideable",
    ):
        assert TORCH_OPS.lookup(alias) is forward
    backward = TORCH_OPS.lookup(FUSED + "_backward")
    assert TORCH_OPS.lookup("aten._scaled_dot_product_fused_attention_overrideable_backward") is backward


# --- nn.MultiheadAttention: fused inference kernel vs the unfused path -----------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, bias: bool = True, need_weights: bool = False) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True, bias=bias)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=self.need_weights, key_padding_mask=key_padding_mask)[0]


def fused_and_unfused(model: nn.Module, *inputs: Any) -> tuple[Report, Report]:
    model.eval()
    with torch.no_grad():
        fused = run(model, *inputs)
    unfused = run(model, *inputs)
    return fused, unfused


# E = 8, H = 2 (head dim 4), B = 2, L = 3:
#   in-projection  [6, 8] @ [8, 24]: 1152 MACs = 2304 FLOPs, bias 6*24 = 144
#   attention      B*H = 4: QK^T 4*3*3*4 = 144 MACs, AV 144 -> 288 MACs = 576 FLOPs; 36 scores * 6 = 216 -> 792
#   out-projection [6, 8] @ [8, 8]: 384 MACs = 768 FLOPs, bias 48 -> 816
#   total: 1824 MACs; 2304 + 144 + 792 + 816 = 4056 FLOPs
MHA_FLOPS, MHA_MACS = 4056, 1824


def test_mha_fused_and_unfused_agree_with_bias() -> None:
    fused, unfused = fused_and_unfused(SelfAttention(bias=True), torch.randn(2, 3, 8))
    assert list(fused.layers["mha"].ops) == [MHA]
    assert MHA not in unfused.layers["mha"].ops
    assert op_costs(unfused) == {
        "aten.mm": (1, 2304, 1152),  # F.linear on the 3-D input: matmul + bias add
        "aten.add": (1, 144, 0),
        FUSED: (1, 792, 288),
        "aten.addmm": (1, 816, 384),  # out-projection on the 2-D view
    }
    assert (fused.flops, fused.macs) == (unfused.flops, unfused.macs) == (MHA_FLOPS, MHA_MACS)
    assert fused.skipped == unfused.skipped == {}
    assert fused.params == unfused.params == 8 * 24 + 24 + 8 * 8 + 8


def test_mha_without_bias_never_takes_the_fused_path() -> None:
    # torch only calls _native_multi_head_attention when in_proj_bias is not None: both runs are unfused
    fused, unfused = fused_and_unfused(SelfAttention(bias=False), torch.randn(2, 3, 8))
    assert MHA not in fused.layers["mha"].ops
    # 4056 - 144 - 48 bias adds = 3864; in- and out-projection are plain mm: 1152 + 384 MACs
    assert op_costs(fused) == op_costs(unfused) == {"aten.mm": (2, 3072, 1536), FUSED: (1, 792, 288)}
    assert (fused.flops, fused.macs) == (3864, MHA_MACS)


def test_mha_with_key_padding_mask() -> None:
    fused, unfused = fused_and_unfused(SelfAttention(), torch.randn(2, 3, 8), torch.zeros(2, 3, dtype=torch.bool))
    assert MHA in fused.layers["mha"].ops
    # + 1 mask add per score: 4056 + 36 = 4092
    assert (fused.flops, fused.macs) == (unfused.flops, unfused.macs) == (4092, MHA_MACS)


def test_mha_unfused_need_weights_path() -> None:
    # need_weights=True (nn.MultiheadAttention's default) computes the weights explicitly:
    #   q scaled by 1/sqrt(4): 2*3*8 = 48 multiplies (instead of 36 per score), two bmm (288 MACs), softmax 180,
    #   the weights averaged over heads: mean over 4*3*3 = 36 elements
    unfused = run(SelfAttention(need_weights=True).eval(), torch.randn(2, 3, 8))
    assert op_costs(unfused) == {
        "aten.mm": (1, 2304, 1152),
        "aten.add": (1, 144, 0),
        "aten.mul": (1, 48, 0),
        "aten.bmm": (2, 576, 288),
        "aten._softmax": (1, 180, 0),
        "aten.addmm": (1, 816, 384),
        "aten.mean": (1, 36, 0),
    }
    assert (unfused.flops, unfused.macs) == (MHA_FLOPS - 36 + 48 + 36, MHA_MACS) == (4104, 1824)


def test_mha_fused_and_unfused_agree_with_need_weights() -> None:
    fused, unfused = fused_and_unfused(SelfAttention(need_weights=True), torch.randn(2, 3, 8))
    assert MHA in fused.layers["mha"].ops
    assert fused.macs == unfused.macs == MHA_MACS
    assert fused.flops == unfused.flops == 4104


def test_mha_fused_cross_attention_formula() -> None:
    aten = torch.ops.aten
    w, b, pw, pb = torch.randn(24, 8), torch.randn(24), torch.randn(8, 8), torch.randn(8)
    # shapes only: the real CPU kernel rejects cross-attention (the module never calls it that way in torch 2.13),
    # but the formula has a cross-attention branch
    cross = Call(lambda q, kv: aten._native_multi_head_attention(q, kv, kv, 8, 2, w, b, pw, pb, None, False)[0])
    fused = count(cross, torch.randn(2, 3, 8), torch.randn(2, 5, 8))
    # q projection [6, 8] @ [8, 8]: 384 MACs, 768 + 48 bias; k and v projections [10, 8] @ [8, 8]: 640 MACs each,
    # 1280 + 80 bias each; attention B*H = 4: QK^T 4*3*5*4 = 240, AV 240 -> 480 MACs, 960 + 60 scores * 6 = 1320;
    # out-projection 384 MACs, 816
    assert op_costs(fused) == {MHA: (1, 816 + 2 * 1360 + 1320 + 816, 384 + 2 * 640 + 480 + 384)}
    assert (fused.flops, fused.macs) == (5672, 2528)


def test_mha_unfused_cross_attention_matches_the_fused_formula() -> None:
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    model = Call(lambda q, kv: mha(q, kv, kv, need_weights=False)[0])
    model.mha = mha
    report = run(model, torch.randn(2, 3, 8), torch.randn(2, 5, 8))
    assert (report.flops, report.macs) == (5672, 2528)


def test_same_tensor_passed_three_times_keeps_its_identity() -> None:
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    model = Call(lambda q, k, v: mha(q, k, v, need_weights=False)[0])
    model.mha = mha
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        report = count(model, x, x, x)
    assert MHA in report.layers["mha"].ops
