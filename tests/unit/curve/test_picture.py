"""The cost-against-dim picture: one line per top-level layer, log-log, names escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.picture import render_html, render_svg
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._metrics import FLOPS

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


def linear_then_quadratic() -> tuple[Formula, Formula]:
    """A decoder linear in seq, then with a small seq**2 term: 0.1% of the model at seq=128, 0.4% at 512."""
    dims = ("seq",)

    def formula(total: dict[tuple[int, ...], int]) -> Formula:
        return Formula(
            dims=dims,
            totals={FLOPS: Polynomial(dims, total)},
            layers={"h.0.attn": {FLOPS: Polynomial(dims, total)}},
            holds=Holds({"seq": 1}, {"seq": (16, 512)}),
            point={"seq": 128},
        )

    return formula({(1,): 357_056}), formula({(2,): 3, (1,): 357_088})


def test_a_changed_formula_draws_base_now_and_each_changed_term_with_its_degree() -> None:
    from pytest_flopbudget._curve.picture import render_change_svg

    base, now = linear_then_quadratic()
    svg = render_change_svg(base, now, title="lm", notes=["seq**2 term of h.{0..1}.attn new (degree 2)"])
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "lm: FLOPs against seq, base vs now" in texts
    assert "degree in seq: base 1 → now 2" in texts
    # 3*128**2 = 49,152 on 45.7M: the point count moved by 0.11%; at the range's end by 0.43%
    assert (
        "at seq=128 (the point): 45.7 MFLOPs → 45.8 MFLOPs (+0.1%); at seq=512: 183 MFLOPs → 184 MFLOPs (+0.4%)"
        in texts
    )
    assert {"base (dashed)", "now", "+3*seq**2 (new, degree 2)", "+32*seq (+0.009%)"} <= set(texts)
    assert {"base: 357056*seq", "now: 3*seq**2 + 357088*seq", "seq**2 term of h.{0..1}.attn new (degree 2)"} <= set(
        texts
    )
    lines = {(p.get("class"), p.get("stroke")): p.get("points", "") for p in root.iter(f"{SVG}polyline")}
    assert set(lines) == {("base", "#888888"), ("now", "#222222"), ("term", "#d62728"), ("term", "#ff7f0e")}

    def slope(points: str) -> float:
        (x0, y0), *_, (x1, y1) = (tuple(map(float, p.split(","))) for p in points.split())
        return (y0 - y1) / (x1 - x0)  # SVG's y points down

    # log-log: the new term is a line twice as steep as the model's, which hides the base under it
    assert abs(slope(lines[("term", "#d62728")]) - 2 * slope(lines[("now", "#222222")])) < 0.02
    assert abs(slope(lines[("base", "#888888")]) - slope(lines[("now", "#222222")])) < 0.01


def test_a_real_renderer_shows_the_new_term_apart_from_the_totals() -> None:
    pytest.importorskip("resvg_py")
    pytest.importorskip("PIL.Image")
    import io

    import resvg_py
    from PIL import Image

    from pytest_flopbudget._curve.picture import render_change_svg

    base, now = linear_then_quadratic()
    image = Image.open(io.BytesIO(bytes(resvg_py.svg_to_bytes(svg_string=render_change_svg(base, now))))).convert("RGB")

    def rows_of(colour: tuple[int, int, int], x: int) -> list[int]:
        return [y for y in range(image.height) if max(abs(a - b) for a, b in zip(image.getpixel((x, y)), colour)) < 40]

    # in the plot's middle column the new term's red line is drawn, well below the model's black one
    middle = 300
    red, black = rows_of((0xD6, 0x27, 0x28), middle), rows_of((0x22, 0x22, 0x22), middle)
    assert red and black and min(red) - max(black) > 50


def test_the_changed_curve_escapes_names_in_its_title_and_notes() -> None:
    from pytest_flopbudget._curve.picture import render_change_svg

    base, now = linear_then_quadratic()
    svg = render_change_svg(base, now, title="</text><script>", notes=["seq**2 term of <b>&\x1b new"])
    root = ET.fromstring(svg)  # well-formed
    assert "<script>" not in svg and "<b>" not in svg and "\x1b" not in svg
    assert not [el for el in root.iter() if el.tag in (f"{SVG}script", f"{SVG}b")]
