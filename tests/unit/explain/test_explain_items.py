"""The explanation's data (`_explain/items.py`): the JSON every consumer reads, and the sums it promises."""

from __future__ import annotations

import json

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import FORMAT, REASONS, Explanation, Item


def _explanation() -> Explanation:
    # Conv2d(3, 8, 3) with a bias on 1x3x6x6 against fvcore: ours 7040 FLOPs, fvcore 3456 MACs
    return Explanation(
        peer="fvcore",
        title="fvcore's FlopCountAnalysis",
        version="0.1.5",
        unit="macs",
        ours=7040,
        theirs=3456,
        items=(
            Item("conv", "aten.convolution", 6912, 3456, reasons.MACS_VS_FLOPS, "conv", "3456 MACs"),
            Item("conv", "aten.convolution", 128, 0, reasons.BIAS_ADD, "conv"),
        ),
    )


def test_the_items_account_for_the_whole_difference() -> None:
    explanation = _explanation()
    assert explanation.difference == 3584 == 3456 + 128
    assert explanation.residual == 0
    assert explanation.by_reason() == {reasons.MACS_VS_FLOPS: 3456, reasons.BIAS_ADD: 128}


def test_the_json_gives_ours_theirs_and_items_with_their_layer_op_figures_and_reason() -> None:
    data = json.loads(json.dumps(_explanation().to_dict()))
    assert data["format"] == FORMAT and (data["ours"], data["theirs"], data["difference"]) == (7040, 3456, 3584)
    assert data["unit"] == "macs" and data["peer"] == "fvcore"
    assert data["items"][0] == {
        "layer": "conv",
        "op": "aten.convolution",
        "their_op": "conv",
        "ours": 6912,
        "theirs": 3456,
        "difference": 3456,
        "reason": "MACs vs FLOPs",
        "detail": "3456 MACs",
    }
    assert sum(item["ours"] - item["theirs"] for item in data["items"]) == data["ours"] - data["theirs"]


def test_an_item_outside_any_layer_has_a_null_layer_and_no_op() -> None:
    item = Item(None, None, 0, 2, reasons.UNEXPLAINED, detail="the peer's total is not the sum of its layers")
    assert item.to_dict() == {
        "layer": None,
        "ours": 0,
        "theirs": 2,
        "difference": -2,
        "reason": "unexplained",
        "detail": "the peer's total is not the sum of its layers",
    }


def test_every_reason_the_issue_names_is_one_with_a_meaning() -> None:
    named = [
        "op not supported", "counted as zero", "MACs vs FLOPs", "bias add", "residual add missed by hooks",
        "fused attention", "causal halving", "padding taps", "scan counted once",
    ]  # fmt: skip
    assert all(REASONS.get(reason) for reason in named)
