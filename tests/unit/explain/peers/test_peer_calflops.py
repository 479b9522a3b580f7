"""calflops as a peer (`_explain/peers/calflops.py`): a Qwen2 decoder, whose attention, RMSNorms and rotary
embedding reach no function calflops patches."""

from __future__ import annotations

import pytest
from peer_models import by_reason, conv_1x1, explained, qwen2_tiny

pytest.importorskip("calflops")


def test_the_1x1_convs_2_flops_agree_with_calflops() -> None:
    explanation = explained(*conv_1x1(), "calflops")
    assert (explanation.ours, explanation.theirs, explanation.items) == (2, 2, ())


def test_a_qwen2_decoder_against_calflops() -> None:
    pytest.importorskip("transformers")
    explanation = explained(*qwen2_tiny(), "calflops")
    reasons = by_reason(explanation)
    # per layer, scaled-dot-product attention on 4 heads of 16 over 16 tokens: QK^T and AV 2 * 4*16*16*16 MACs
    # (65,536 FLOPs) and the scale and softmax on 4*16*16 scores at 6 each (6,144); calflops patches no
    # F.scaled_dot_product_attention, so it never sees the kernel
    assert reasons["fused attention"] == 2 * (65_536 + 6_144)
    # q_proj (16*64), k_proj and v_proj (16*32 each) have biases; calflops' F.linear prices the matmul only
    assert reasons["bias add"] == 2 * (1024 + 512 + 512)
    # each block's two residual adds (16*64) and the rotary `q*cos + rotate_half(q)*sin` adds (16*64 + 16*32)
    # run as `x + y` in a module's own forward; and one add of the 16 positions in the model's
    assert reasons["residual add missed by hooks"] == 2 * (2 * 1024 + 1024 + 512) + 16
    # RMSNorm's pow, mean, eps add, rsqrt and two multiplies, the rotary multiplies, negation, cos and sin, and
    # the MLP's gate * up: `*`, torch.rsqrt and friends reach no patched function
    assert set(reasons) == {"fused attention", "bias add", "residual add missed by hooks", "op not supported"}
    assert explanation.difference == sum(reasons.values())
    assert explanation.ours - explanation.theirs == 188_208
