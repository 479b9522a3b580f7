"""The differential icicle (render/diff_flame.py): boxes sized by the count now and coloured by the change against
the baseline, parsed as real SVG/HTML; hostile names escaped; the pixels a real renderer draws."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from test_flame import HOSTILE, build_report

from pytest_flopbudget._render import diff_flame
from pytest_flopbudget._render.diff_flame import GROWTH, NEW, SHRINK, UNCHANGED, change_colour, render_html, render_svg
from pytest_flopbudget._render.flame import CHART
from pytest_flopbudget._report import LayerCost, Report
from pytest_flopbudget._safe_text import safe_text

SVG = "{http://www.w3.org/2000/svg}"


def drawn(svg: str) -> dict[str, dict[str, object]]:
    """path -> x, width, y, fill and tooltip of every layer box."""
    found: dict[str, dict[str, object]] = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        if group.get("class") != "layer":
            continue
        rect, title = group.find(f"{SVG}rect"), group.find(f"{SVG}title")
        assert rect is not None and title is not None
        found[group.get("data-path", "")] = {
            "x": Decimal(rect.get("x", "")),
            "width": Decimal(rect.get("width", "")),
            "y": int(rect.get("y", "")),
            "fill": rect.get("fill"),
            "title": title.text or "",
        }
    return found


def group_text(svg: str, cls: str) -> str:
    group = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == cls)
    return "".join(group.itertext())


BASE = build_report({"enc": 400, "enc.attn": 200, "dec": 300, "head": 100, "old": 50})
NOW = build_report({"enc": 400, "enc.attn": 600, "dec": 150, "head": 100, "extra": 50})


def test_colours_say_grew_shrank_unchanged_and_new() -> None:
    svg = render_svg(BASE, NOW, name="net")
    boxes = drawn(svg)
    # enc grew inclusively (600 -> 1000: +67%, past the full scale): the deepest growth colour; attn tripled
    assert boxes["enc"]["fill"] == boxes["enc.attn"]["fill"] == "#{:02x}{:02x}{:02x}".format(*GROWTH[1])
    assert boxes["dec"]["fill"] == "#{:02x}{:02x}{:02x}".format(*SHRINK[1])  # halved
    assert boxes["head"]["fill"] == UNCHANGED
    assert boxes["extra"]["fill"] == NEW
    assert "old" not in boxes  # removed: no width now
    # widths are the count now: enc is 1000 of 1300 FLOPs
    assert abs(boxes["enc"]["width"] - Decimal(CHART) * 1000 / 1300) <= Decimal("0.01")  # type: ignore[operator]
    assert boxes["enc.attn"]["title"].startswith("enc.attn · 200 FLOPs → 600 FLOPs (+200.0%)")  # type: ignore[union-attr]
    assert boxes["extra"]["title"].startswith("extra · new · 50 FLOPs")  # type: ignore[union-attr]


def test_totals_legend_and_removed_layers() -> None:
    svg = render_svg(BASE, NOW, name="net")
    assert group_text(svg, "totals").startswith("FLOPs: base 1.05 kFLOPs → now 1.30 kFLOPs (+23.8%)")
    legend = group_text(svg, "legend")
    for word in ("unchanged", "grew", "shrank", "new", "removed"):
        assert word in legend
    assert group_text(svg, "removed") == "✕ removed since the baseline: old (50 FLOPs)"


def test_small_changes_are_pale_but_never_grey_and_the_scale_is_monotone() -> None:
    assert change_colour(1000, 1000) == UNCHANGED
    assert change_colour(None, 5) == NEW
    assert change_colour(1000, 1001) not in (UNCHANGED, change_colour(1000, 1400))
    reds = [int(change_colour(100, 100 + p)[3:5], 16) for p in (1, 10, 25, 50, 90)]
    assert reds == sorted(reds, reverse=True)  # green falls as growth deepens
    assert reds[-2] == reds[-1]  # capped at FULL_PERCENT
    assert change_colour(0, 10) == change_colour(100, 1000)  # from nothing: as deep as growth goes


def test_metric_params_colours_by_parameters() -> None:
    base = Report(layers={"a": LayerCost(flops=10, params=5), "b": LayerCost(flops=10, params=5)})
    now = Report(layers={"a": LayerCost(flops=20, params=5), "b": LayerCost(flops=10, params=9)})
    boxes = drawn(render_svg(base, now, metric="params"))
    assert boxes["a"]["fill"] == UNCHANGED
    assert boxes["b"]["fill"] not in (UNCHANGED, NEW)
    with pytest.raises(ValueError, match="unknown metric"):
        render_svg(base, now, metric="nope")  # type: ignore[arg-type]


def test_no_change_is_all_grey() -> None:
    svg = render_svg(BASE, BASE)
    assert {box["fill"] for box in drawn(svg).values()} == {UNCHANGED}
    assert "(+0.0%)" in group_text(svg, "totals")
    assert not [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "removed"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_escaped_and_cannot_inject(name: str) -> None:
    base = build_report({name: 10, f"{name}.{name}": 5, f"gone{name}": 5})
    now = build_report({name: 30, f"{name}.{name}": 5, f"new{name}": 5})
    svg = render_svg(base, now, title=name, name=name)
    root = ET.fromstring(svg)  # well-formed whatever the name
    assert not [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] in ("script", "x", "foreignObject")]
    assert safe_text(svg) == svg
    assert all(line.startswith("<") for line in svg.splitlines())
    assert "##[" not in svg and "\x1b" not in svg
    page = render_html(base, now, title=name, name=name)
    assert "<script" not in page.replace("&lt;script", "")
    parser = HTMLParser()
    parser.feed(page)
    assert page.count("<svg") == 1 and "Content-Security-Policy" in page


def test_same_input_same_bytes() -> None:
    assert render_svg(BASE, NOW) == render_svg(BASE, NOW)
    assert diff_flame.render_html(BASE, NOW) == diff_flame.render_html(BASE, NOW)


def test_a_real_renderer_draws_growth_red_and_unchanged_grey() -> None:
    resvg = pytest.importorskip("resvg_py")
    image_module = pytest.importorskip("PIL.Image")
    svg = render_svg(BASE, NOW)
    image = image_module.open(io.BytesIO(bytes(resvg.svg_to_bytes(svg_string=svg)))).convert("RGB")
    boxes = drawn(svg)
    for path in ("enc.attn", "dec", "head", "extra"):
        box = boxes[path]
        x = int(box["x"] + box["width"]) - 3  # type: ignore[operator]
        fill = str(box["fill"])
        expected = (int(fill[1:3], 16), int(fill[3:5], 16), int(fill[5:7], 16))
        assert image.getpixel((x, box["y"] + 2)) == expected, path
    assert boxes["enc.attn"]["fill"] != boxes["head"]["fill"]


def test_narrow_boxes_carry_upright_labels_and_keep_their_change_colour() -> None:
    base = build_report({"h.0.attn.c_attn": 280, "h.0.attn.c_proj": 10, "h.0.mlp": 700})
    now = build_report({"h.0.attn.c_attn": 280, "h.0.attn.c_proj": 20, "h.0.mlp": 700})
    svg = render_svg(base, now)
    group = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("data-path") == "h.0.attn.c_proj")
    text, rect = group.find(f"{SVG}text"), group.find(f"{SVG}rect")
    assert text is not None and rect is not None
    assert (text.text, text.get("class")) == ("c_proj", "upright")
    assert rect.get("fill") == change_colour(10, 20) and int(rect.get("height", "")) > 19
