"""PyTorch's FlopCounterMode as a peer (`_explain/peers/torch_flop_counter.py`): the fused attention it counts as
zero on CPU."""

from __future__ import annotations

from peer_models import by_reason, conv_1x1, explained


def test_the_1x1_convs_2_flops_agree_with_flopcountermode() -> None:
    explanation = explained(*conv_1x1(), "torch")
    assert (explanation.ours, explanation.theirs, explanation.unit, explanation.items) == (2, 2, "flops", ())


def test_a_vit_under_no_grad_runs_fused_attention_which_flopcountermode_counts_as_zero() -> None:
    import torch

    from examples.vit import vit_tiny

    torch.manual_seed(0)
    explanation = explained(vit_tiny(), (torch.zeros(1, 3, 32, 32),), "torch")
    # 17 tokens (16 patches of 8x8 and the class token), 64 wide, 4 heads of 16, MLP 128, 2 blocks, 10 classes.
    # Each block's nn.MultiheadAttention runs as one aten._native_multi_head_attention: in_proj 17*64*192 MACs
    # (417,792 FLOPs + 3,264 bias), out_proj 17*64*64 (139,264 + 1,088), QK^T and AV 2 * 4*17*17*16 MACs (73,984)
    # and the scale and softmax on 4*17*17 scores, 6 each (6,936): 642,328 FLOPs, all zero to FlopCounterMode
    fused = 2 * (417_792 + 3_264 + 139_264 + 1_088 + 73_984 + 6_936)
    assert by_reason(explanation) == {
        "fused attention": fused,
        # 5 layer norms on 17*64 = 1088 elements at 8 each, 2 GELUs on 17*128 at 1, the position add and the two
        # residual adds per block on 1088 elements: FlopCounterMode prices matmuls, convolutions and attention only
        "counted as zero": 5 * 8 * 1088 + 2 * 17 * 128 + 5 * 1088,
        # conv_proj (64 * 4 * 4 outputs), mlp.0 (17*128) and mlp.2 (17*64) twice, the head (10)
        "bias add": 1024 + 2 * (2176 + 1088) + 10,
    }
    assert [item.layer for item in explanation.items if item.reason == "fused attention"] == [
        "encoder.layers.0.self_attention",
        "encoder.layers.1.self_attention",
    ]
    assert (explanation.ours, explanation.theirs) == (2_854_138, 1_508_608)
