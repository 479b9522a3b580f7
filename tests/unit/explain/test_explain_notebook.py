"""An explanation in a notebook (`Explanation._repr_html_`, `_explain/notebook.py`): the totals and the itemised
difference as a table, rendered in headless Chromium, with op and layer names that never run as code."""

from __future__ import annotations

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from tests.browser import ATTRIBUTE_NAME, SCRIPT_NAME, TITLE, assert_self_contained, render


def _explanation(items: tuple[Item, ...], ours: int, theirs: int) -> Explanation:
    return Explanation("fvcore", "fvcore's FlopCountAnalysis", "0.1.5", "macs", ours, theirs, items, ("a note",))


def test_the_items_are_a_table_in_chromium_and_no_name_runs() -> None:
    # a 1x1 conv of 1 MAC (2 FLOPs to us, 1 to fvcore) in a layer named like a script, and a ReLU fvcore ignores
    # under an op named like an attribute that opens an image: 2 + 4 = 6 FLOPs ours, 1 MAC theirs, +5
    items = (
        Item(SCRIPT_NAME, "aten.convolution", 2, 1, reasons.MACS_VS_FLOPS),
        Item("relu", ATTRIBUTE_NAME, 4, 0, reasons.COUNTED_AS_ZERO),
    )
    explanation = _explanation(items, 6, 1)
    html = explanation._repr_html_()
    assert_self_contained(html)
    page = render(html)
    assert page.title == TITLE
    assert page.tables["items"] == [
        ["reason", "op", "ours", "theirs", "ours - theirs"],
        ["counted as zero", f"{ATTRIBUTE_NAME} in relu", "4", "0", "+4"],
        ["MACs vs FLOPs", f"aten.convolution in {SCRIPT_NAME}", "2", "1", "+1"],
        ["total", "", "", "", "+5"],
    ]
    assert "ours against fvcore's FlopCountAnalysis 0.1.5" in page.dom
    assert "MACs vs FLOPs: fvcore counts a multiply-accumulate as 1, we count 2 FLOPs" in page.dom
    assert "note: a note" in page.dom and page.count("script") == page.count("img") == 0


def test_no_difference_says_so() -> None:
    html = _explanation((), 2, 2)._repr_html_()
    assert "no difference: every layer&#x27;s figures agree" in html and "<table" not in html
