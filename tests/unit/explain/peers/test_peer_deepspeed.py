"""DeepSpeed's FlopsProfiler as a peer (`_explain/peers/deepspeed.py`). Importing deepspeed takes seconds: slow."""

from __future__ import annotations

import pytest
from peer_models import by_reason, conv_1x1, explained, tiny_net

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow


def test_the_1x1_convs_2_flops_agree_with_deepspeed() -> None:
    explanation = explained(*conv_1x1(), "deepspeed")
    assert (explanation.ours, explanation.theirs, explanation.items) == (2, 2, ())


def test_a_small_residual_net_against_deepspeed(capsys: pytest.CaptureFixture[str]) -> None:
    explanation = explained(*tiny_net(), "deepspeed")
    assert capsys.readouterr().out == ""  # DeepSpeed logs to stdout: kept out of the table and the JSON
    # DeepSpeed: F.conv2d 28,160 (2 per MAC and the bias), F.batch_norm 2 * 512, F.relu 512, F.max_pool2d 512 (its
    # input), F.linear 2 * 1,280 (no bias): 32,768
    assert (explanation.ours, explanation.theirs) == (34_314, 32_768)
    assert by_reason(explanation) == {"per-element cost": 1_024, "residual add missed by hooks": 512, "bias add": 10}
