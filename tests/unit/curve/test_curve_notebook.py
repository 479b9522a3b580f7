"""A curve in a notebook (`Formula._repr_html_`, `_curve/notebook.py`): the formulas and the log-log picture
inline, rendered in headless Chromium, with layer names that never run as code."""

from __future__ import annotations

from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._metrics import FLOPS, MACS
from tests.browser import ATTRIBUTE_NAME, SCRIPT_NAME, TITLE, assert_self_contained, render

DIMS = ("seq",)


def formula() -> Formula:
    """A decoder block: attention 128*seq**2 FLOPs under a layer named like a script, an MLP 4096*seq under one
    named like an attribute that opens an image."""
    attention, mlp = Polynomial(DIMS, {(2,): 128}), Polynomial(DIMS, {(1,): 4096})
    return Formula(
        dims=DIMS,
        totals={FLOPS: Polynomial(DIMS, {(2,): 128, (1,): 4096}), MACS: Polynomial(DIMS, {(2,): 64, (1,): 2048})},
        layers={f"blocks.{SCRIPT_NAME}": {FLOPS: attention}, ATTRIBUTE_NAME: {FLOPS: mlp}},
        holds=Holds({"seq": 1}, {"seq": (64, 8192)}, samples=5, verified=2),
        point={"seq": 2048},
    )


def test_the_formulas_and_the_picture_in_chromium_and_no_name_runs() -> None:
    html = formula()._repr_html_()
    assert_self_contained(html)
    page = render(html)
    assert page.title == TITLE
    assert "Formula in seq: exact on seq in [64, 8192] (5 counts, 2 checked off the fit)" in page.dom
    assert "FLOPs  128*seq**2 + 4096*seq" in page.dom
    # per layer at depth 2, with their names as text: the script-named attention and the image-named MLP
    assert f"blocks.{SCRIPT_NAME}  128*seq**2".replace("<", "&lt;").replace(">", "&gt;") in page.dom
    assert page.count("svg", "curve") == 1 and page.count("polyline") == 3  # the model, blocks and the MLP
    assert page.count("script") == page.count("img") == 0
    assert page.non_white_pixels() > 2_000
