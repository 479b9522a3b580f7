"""fvcore's FlopCountAnalysis as a peer (`_explain/peers/fvcore.py`), on a real forward."""

from __future__ import annotations

import pytest
from peer_models import by_reason, conv_1x1, explained

pytest.importorskip("fvcore")


def test_the_1x1_convs_2_flops_are_1_mac_to_fvcore() -> None:
    explanation = explained(*conv_1x1(), "fvcore")
    # 1 multiply-accumulate: 2 FLOPs to us, 1 "flop" to fvcore (it counts one fused multiply-add as one)
    assert (explanation.ours, explanation.theirs, explanation.unit) == (2, 1, "macs")
    assert [(i.op, i.their_op, i.ours, i.theirs, i.reason) for i in explanation.items] == [
        ("aten.convolution", "conv", 2, 1, "MACs vs FLOPs")
    ]


def test_with_a_bias_fvcore_leaves_the_bias_add_out() -> None:
    explanation = explained(*conv_1x1(bias=True), "fvcore")
    assert (explanation.ours, explanation.theirs) == (3, 1)  # 2 per MAC + 1 bias add, against 1 MAC
    assert by_reason(explanation) == {"MACs vs FLOPs": 1, "bias add": 1}


@pytest.mark.slow
def test_resnet50_against_fvcore_itemises_its_units_batch_norm_and_the_ops_it_skips() -> None:
    import torch

    from examples.resnet import resnet50

    torch.manual_seed(0)
    explanation = explained(resnet50(), (torch.zeros(1, 3, 224, 224),), "fvcore")
    assert (explanation.ours, explanation.theirs) == (8_239_860_200, 4_111_512_576)
    assert by_reason(explanation) == {
        # 53 convolutions: 4,087,136,256 MACs, 2 FLOPs each to us; fc: 2048 * 1000 = 2,048,000 MACs
        "MACs vs FLOPs": 4_087_136_256 + 2_048_000,
        # 53 batch norms on 11,113,984 elements: 4 FLOPs each to us (normalise, scale, shift), 2 to fvcore
        "per-element cost": 4 * 11_113_984 - 2 * 11_113_984,
        # 17 ReLU modules on 9,608,704 elements in all: fvcore ignores relu_
        "counted as zero": 9_608_704,
        # 16 residual `out += identity` (aten::add_, 5,519,360 elements) and the 3x3 max pool (9 comparisons for
        # each of 64 * 56 * 56 = 200,704 outputs = 1,806,336): fvcore warns it has no handle for either
        "op not supported": 5_519_360 + 1_806_336,
        "bias add": 1_000,  # fc's bias, 1 per output
    }
    # the adaptive average pool agrees: 2048 * 7 * 7 = 100,352 additions both ways, so it is no item
    assert not any(item.layer == "avgpool" for item in explanation.items)
    assert explanation.difference == 4_128_347_624
