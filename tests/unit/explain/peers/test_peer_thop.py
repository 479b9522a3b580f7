"""thop as a peer (`_explain/peers/thop.py`): module hooks priced by type, in MACs without the bias."""

from __future__ import annotations

import pytest
from peer_models import by_reason, conv_1x1, explained, tiny_net

pytest.importorskip("thop")


def test_the_1x1_convs_2_flops_are_1_mac_to_thop() -> None:
    explanation = explained(*conv_1x1(), "thop")
    assert (explanation.ours, explanation.theirs, explanation.unit) == (2, 1, "macs")
    assert by_reason(explanation) == {"MACs vs FLOPs": 1}


def test_a_small_residual_net_against_thop() -> None:
    explanation = explained(*tiny_net(), "thop")
    # thop: conv 13,824 MACs, batch norm 2 * 512 * 2 (affine) = 2,048 (ours too), fc 1,280: 17,152
    assert (explanation.ours, explanation.theirs) == (34_314, 17_152)
    assert by_reason(explanation) == {
        "MACs vs FLOPs": 13_824 + 1_280,
        "counted as zero": 512 + 512,  # nn.ReLU and nn.MaxPool2d are zero_ops in its table
        "bias add": 512 + 10,
        "residual add missed by hooks": 512,  # `y + h` in TinyNet's own forward: no hook sees it
    }
    assert [i.layer for i in explanation.items if i.reason == "residual add missed by hooks"] == [""]
