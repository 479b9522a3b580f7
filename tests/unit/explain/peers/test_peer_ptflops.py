"""ptflops as a peer (`_explain/peers/ptflops.py`): module hooks plus patched functions, which price an
activation or a pool twice."""

from __future__ import annotations

import pytest
from peer_models import by_reason, conv_1x1, explained, tiny_net

pytest.importorskip("ptflops")


def test_the_1x1_convs_2_flops_are_1_mac_to_ptflops() -> None:
    explanation = explained(*conv_1x1(), "ptflops")
    assert (explanation.ours, explanation.theirs) == (2, 1)
    assert by_reason(explanation) == {"MACs vs FLOPs": 1}


def test_with_a_bias_ptflops_counts_the_bias_add_too() -> None:
    explanation = explained(*conv_1x1(bias=True), "ptflops")
    assert (explanation.ours, explanation.theirs) == (3, 2)  # 1 MAC + 1 bias add
    assert by_reason(explanation) == {"MACs vs FLOPs": 1}


def test_a_small_residual_net_against_ptflops() -> None:
    explanation = explained(*tiny_net(), "ptflops")
    # ptflops: conv 13,824 + 512 (bias), batch norm 512 * 2, ReLU 512 in its hook + 512 in F.relu, MaxPool2d 512
    # (its input) + 512 in F.max_pool2d, fc 1,280 + 10: 18,698
    assert (explanation.ours, explanation.theirs) == (34_314, 18_698)
    assert by_reason(explanation) == {
        "MACs vs FLOPs": 13_824 + 1_280,
        "per-element cost": 2_048 - 1_024,
        "counted twice": -(512 + 512),
        "residual add missed by hooks": 512,
    }
    assert sorted(i.their_op for i in explanation.items if i.reason == "counted twice") == ["F.max_pool2d", "F.relu"]
