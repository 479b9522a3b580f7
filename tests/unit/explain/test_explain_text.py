"""The table of `flopbudget explain` (`_explain/text.py`): one line per reason and op, summed over layers."""

from __future__ import annotations

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from pytest_flopbudget._explain.text import explanation_text


def _explanation(items: tuple[Item, ...], ours: int, theirs: int) -> Explanation:
    return Explanation("fvcore", "fvcore's FlopCountAnalysis", "0.1.5", "macs", ours, theirs, items)


def test_lines_group_layers_by_reason_and_op_largest_first() -> None:
    # two 1x1 convs of 1 MAC each (2 FLOPs to us, 1 to fvcore), one with a bias, and a ReLU fvcore ignores
    items = (
        Item("a", "aten.convolution", 2, 1, reasons.MACS_VS_FLOPS),
        Item("b", "aten.convolution", 2, 1, reasons.MACS_VS_FLOPS),
        Item("b", "aten.convolution", 1, 0, reasons.BIAS_ADD),
        Item("relu", "aten.relu", 4, 0, reasons.COUNTED_AS_ZERO),
    )
    text = explanation_text(_explanation(items, 9, 2), "net")
    rows = [line.split() for line in text.splitlines()]
    assert rows[0] == ["net:", "ours", "against", "fvcore's", "FlopCountAnalysis", "0.1.5"]
    assert ["ours", "9", "FLOPs", "(9", "FLOPs)"] in rows
    assert ["theirs", "2", "MACs", "(2", "MACs)", "(fvcore", "calls", "them", '"flops")'] in rows
    body = [row for row in rows if row and row[0] in ("counted", "MACs", "bias", "total")]
    assert body[:4] == [
        ["counted", "as", "zero", "aten.relu", "in", "relu", "4", "0", "+4"],
        ["MACs", "vs", "FLOPs", "aten.convolution", "(2", "layers)", "4", "2", "+2"],
        ["bias", "add", "aten.convolution", "in", "b", "1", "0", "+1"],
        ["total", "+7"],
    ]
    assert "  bias add: we count the bias add (1 FLOP per output element), fvcore does not" in text


def test_no_difference_says_so() -> None:
    text = explanation_text(_explanation((), 2, 2), "net")
    assert text.splitlines()[-1] == "  no difference: every layer's figures agree"
