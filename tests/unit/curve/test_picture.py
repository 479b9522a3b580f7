"""The cost-against-dim picture: one line per top-level layer, log-log, names escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pytest_flopbudget.curve.formula import Formula, Holds
from pytest_flopbudget.curve.picture import render_html, render_svg
from pytest_flopbudget.curve.polynomial import Polynomial
from pytest_flopbudget.metrics import FLOPS

SVG = "{http://www.w3.org/2000/svg}"
DIMS = ("seq", "batch")


def formula() -> Formula:
    def poly(terms: dict[tuple[int, int], int]) -> Polynomial:
        return Polynomial(DIMS, terms)

    return Formula(
        dims=DIMS,
        totals={FLOPS: poly({(2, 1): 128, (1, 1): 4096})},
        layers={
            "blocks.0.attn": {FLOPS: poly({(2, 1): 128})},
            "blocks.0.mlp": {FLOPS: poly({(1, 1): 4096})},
            "<head>&": {FLOPS: Polynomial(DIMS)},
        },
        holds=Holds({"seq": 1, "batch": 1}, {"seq": (64, 8192), "batch": (1, 8)}),
        point={"seq": 2048, "batch": 2},
    )


def test_one_line_for_the_model_and_one_per_top_level_layer() -> None:
    root = ET.fromstring(render_svg(formula(), title="lm"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert (
        "lm: FLOPs against seq (batch=2)" in texts and "exact on seq in [64, 8192], batch in [1, 8]; log-log" in texts
    )
    assert {"(model)", "blocks"} <= set(texts) and "64" in texts and "8192" in texts
    model, _ = list(root.iter(f"{SVG}polyline"))  # the model and blocks; <head>& costs nothing: no line
    points = [tuple(map(float, p.split(","))) for p in model.get("points", "").split()]
    first, last = points[0], points[-1]
    assert last[0] > first[0] and last[1] < first[1]  # grows: right and up (SVG's y points down)


def test_names_are_escaped_and_the_page_loads_nothing() -> None:
    f = formula()
    f.layers["<b>&"] = {FLOPS: Polynomial(DIMS, {(1, 0): 1})}
    svg = render_svg(f, title="x")
    assert "<b>&" not in svg and "&lt;b&gt;&amp;" in svg
    page = render_html(f, title="<t>")
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page and "<t>" not in page
