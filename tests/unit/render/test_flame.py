"""The icicle picture: hand-derived box geometry, nesting on real models (PyTorch and ONNX), escaping of hostile
names, determinism, the HTML page, and the pixels a real SVG renderer draws."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Callable
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import pytest
from growth import assert_linear

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._render import flame
from pytest_flopbudget._render.flame import CHART, MARGIN, fit_label, render_html, render_svg, xml_text
from pytest_flopbudget._report import EstimatedOp, LayerCost, PhaseTotals, Report, SkippedOp
from pytest_flopbudget._safe_text import safe_text

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = [
    "</text><script>alert(1)</script>",
    "]]><x>",
    "a\"b'c&d<e>",
    "\x1b[2Jclear",
    "::stop-commands::x",
    "##[group]x",
    "new\nline\ttab\rcr",
    "bidi\u202eevil",
    "lone\ud800surrogate",
    "not\ufffechar",
    "<!--",
]


def build_report(layers: dict[str, int], skipped: dict[str, int] | None = None, params: int | None = None) -> Report:
    """A Report from layer path -> FLOPs (MACs are half, one parameter per layer), skipped ops on the root."""
    costs = {path: LayerCost(flops=f, macs=f // 2, params=1) for path, f in layers.items()}
    if params is not None and layers:  # a Report's params are its layers' sum: the first layer holds the rest
        first = next(iter(layers))
        costs[first] = LayerCost(flops=layers[first], macs=layers[first] // 2, params=params - len(layers) + 1)
    for op, calls in (skipped or {}).items():
        costs.setdefault("", LayerCost()).skipped[op] = calls
    return Report(
        layers=costs,
        forward=PhaseTotals(flops=sum(layers.values()), macs=sum(f // 2 for f in layers.values())),
        skipped_ops={op: SkippedOp(calls, [""]) for op, calls in (skipped or {}).items()},
    )


def boxes(svg: str) -> dict[str, dict[str, object]]:
    """path -> x, width (exact decimals), depth, title and label of every drawn layer box."""
    root = ET.fromstring(svg)
    found: dict[str, dict[str, object]] = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") != "layer":
            continue
        rect = group.find(f"{SVG}rect")
        title = group.find(f"{SVG}title")
        text = group.find(f"{SVG}text")
        assert rect is not None and title is not None
        path = group.get("data-path")
        assert path is not None and path not in found
        found[path] = {
            "x": Decimal(rect.get("x", "")),
            "width": Decimal(rect.get("width", "")),
            "y": int(rect.get("y", "")),
            "height": int(rect.get("height", "")),
            "upright": text is not None and text.get("class") == "upright",
            "fill": rect.get("fill"),
            "depth": int(group.get("data-depth", "")),
            "title": title.text or "",
            "label": text.text if text is not None else "",
        }
    return found


def parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def assert_well_formed(svg: str, report: Report, metric: str = "flops") -> dict[str, dict[str, object]]:
    """The picture's promises for any report: nested boxes, widths by inclusive cost, every sizeable layer drawn."""
    drawn = boxes(svg)
    root = drawn[""]
    assert (root["x"], root["width"], root["depth"]) == (MARGIN, CHART, 0)
    inclusive = {path: getattr(cost, metric) for path, cost in report.inclusive().items()}
    total = report.metric(metric)
    children: dict[str, list[str]] = {}
    for path, box in drawn.items():
        if path == "":
            continue
        up = drawn[parent(path)]  # a drawn box's parent is drawn
        assert box["depth"] == up["depth"] + 1  # type: ignore[operator]
        assert up["x"] <= box["x"] and box["x"] + box["width"] <= up["x"] + up["width"]  # type: ignore[operator]
        children.setdefault(parent(path), []).append(path)
        # the width is the inclusive share of the chart, to the hundredth of a pixel
        assert abs(box["width"] - Decimal(CHART) * inclusive[path] / total) <= Decimal("0.01")  # type: ignore[operator]
    for up, kids in children.items():
        assert sum(drawn[k]["width"] for k in kids) <= drawn[up]["width"]  # type: ignore[misc, operator]
        spans = sorted((drawn[k]["x"], drawn[k]["x"] + drawn[k]["width"]) for k in kids)  # type: ignore[operator]
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))  # siblings never overlap
    for path, value in inclusive.items():
        if total and value * 200 >= total:  # at least 0.5% of the model: ~6 px, always drawn and named
            assert path in drawn, path
            assert drawn[path]["title"].startswith((path or "") + " · ") or path == ""  # type: ignore[union-attr]
    return drawn


def test_box_geometry_and_labels_are_hand_derived() -> None:
    report = build_report({"a": 600, "a.x": 300, "b": 100})
    drawn = assert_well_formed(render_svg(report, name="net"), report)
    # total 1000 FLOPs over the 1180 px chart: a (900 inclusive) is 1062 px, a.x 354 px, b 118 px after a
    assert {p: (b["x"], b["width"], b["depth"]) for p, b in drawn.items()} == {
        "": (Decimal("10.00"), Decimal("1180.00"), 0),
        "a": (Decimal("10.00"), Decimal("1062.00"), 1),
        "a.x": (Decimal("10.00"), Decimal("354.00"), 2),
        "b": (Decimal("1072.00"), Decimal("118.00"), 1),
    }
    assert drawn[""]["label"] == "net · 1.00 kFLOPs · 100%"
    assert drawn["a"]["label"] == "a · 900 FLOPs · 90%"
    assert drawn["b"]["label"] == "b · 100 FLOPs"  # 118 px: room for (118 - 6) / 7.2 = 15 characters
    assert drawn["a.x"]["title"] == "a.x · 300 FLOPs · 30% of the model\n300 FLOPs (inclusive of children)"
    assert drawn["b"]["y"] == drawn["a"]["y"] == drawn[""]["y"] + flame.ROW  # one row per depth


def test_positions_are_exact_for_huge_counts_and_round_half_up() -> None:
    # 1/3 and 2/3 of 10^30: 393.333.. px and 786.666.. px; rounding is monotone so they still tile the root
    third = 10**30 // 3
    report = build_report({"a": third, "b": 10**30 - third})
    drawn = assert_well_formed(render_svg(report), report)
    assert (drawn["a"]["width"], drawn["b"]["x"], drawn["b"]["width"]) == (
        Decimal("393.33"), Decimal("403.33"), Decimal("786.67"),
    )  # fmt: skip
    assert flame._scaled(1, 2 * CHART * 100) == 1  # exactly half a hundredth rounds up


def test_metric_params_sizes_boxes_by_parameters() -> None:
    layers = {"big": LayerCost(flops=10, params=300), "small": LayerCost(flops=990, params=100)}
    report = Report(layers=layers, forward=PhaseTotals(flops=1000, macs=0))
    drawn = assert_well_formed(render_svg(report, metric="params"), report, "params")
    assert (drawn["big"]["width"], drawn["small"]["width"]) == (Decimal("885.00"), Decimal("295.00"))
    assert drawn["big"]["label"] == "big · 300 params · 75%"
    with pytest.raises(ValueError, match="unknown metric 'skipped'"):
        render_svg(report, metric="skipped")


def test_zero_cost_layers_are_left_out_and_narrow_ones_counted() -> None:
    layers = {"free": 0, "tiny": 1, "big": 999_999}
    svg = render_svg(build_report(layers))
    drawn = boxes(svg)
    assert set(drawn) == {"", "big"}  # free costs nothing; tiny would be 0.001 px wide
    assert "1 layer narrower than 0.5 px not drawn" in svg


def test_an_empty_model_is_one_full_width_box() -> None:
    report = Report()
    drawn = boxes(render_svg(report))
    assert list(drawn) == [""] and drawn[""]["width"] == CHART and drawn[""]["label"] == "(model) · 0 FLOPs · 0%"


def test_odd_paths_nest_under_their_parents() -> None:
    # `.a` (an empty first component) and `a..b` walk up to the root without counting any ancestor twice
    report = build_report({".a": 100, "a..b": 200, "a.": 100, "": 600})
    drawn = assert_well_formed(render_svg(report), report)
    assert drawn[".a"]["width"] == Decimal("118.00") and drawn["a"]["width"] == Decimal("354.00")


def test_40k_layers_render_in_linear_time_and_draw_what_is_visible() -> None:
    def siblings(count: int) -> Report:
        layers = {f"blocks.{i}": 1 for i in range(count)}
        layers["head"] = count
        return build_report(layers)

    def picture(count: int) -> Callable[[], str]:
        report = siblings(count)
        return lambda: render_svg(report)

    assert_linear(picture, 5_000)  # to 40,000 layers; benchmarks/bench_render.py times 100,000
    report = siblings(40_000)
    svg = render_svg(report)
    drawn = assert_well_formed(svg, report)
    assert set(drawn) == {"", "blocks", "head"}
    assert "40,000 layers narrower than 0.5 px not drawn" in svg.replace("40000", "40,000")


def test_labels_are_cut_to_fit_their_box() -> None:
    assert fit_label(["conv1 · 118 MFLOPs · 3.2%", "conv1 · 118 MFLOPs", "conv1"], 30000) == "conv1 · 118 MFLOPs · 3.2%"
    assert fit_label(["conv1 · 118 MFLOPs · 3.2%", "conv1 · 118 MFLOPs", "conv1"], 10000) == "conv1"
    assert fit_label(["a_very_long_layer_name"], 6000) == "a_very…"  # (60 - 6) / 7.2 = 7 characters
    assert fit_label(["abc"], 1500) == ""  # not even two characters fit
    assert (
        fit_label(["注意力层"], 7000) == "注意力层" and fit_label(["注意力層名字"], 7000) == "注意力…"
    )  # 2 columns each
    # every drawn label fits its box at 0.6 em per character: across it, or up it
    report = build_report({f"layer_with_a_long_name_{i}": 10 + i for i in range(40)})
    drawn = boxes(render_svg(report))
    for box in drawn.values():
        room = box["height"] if box["upright"] else float(box["width"])  # type: ignore[arg-type]
        assert len(str(box["label"])) * flame.CHAR <= room - 6  # type: ignore[operator]
    assert any(box["upright"] for box in drawn.values())


def test_a_name_too_long_for_its_narrow_box_stands_upright_in_a_taller_row() -> None:
    # 1000 FLOPs over 1180 px: `attn` (30%, 354 px) holds its label across; `c_proj` (2%, 23.6 px) cannot, so it
    # stands upright, and its row grows to hold `c_proj` (6 columns * 7.2 px + 8 px padding + 2 = 53 px)
    report = build_report({"h.0.attn.c_attn": 280, "h.0.attn.c_proj": 20, "h.0.mlp": 700})
    svg = render_svg(report, name="gpt")
    drawn = assert_well_formed(svg, report)
    assert (drawn["h.0.attn.c_proj"]["label"], drawn["h.0.attn.c_proj"]["upright"]) == ("c_proj", True)
    assert (drawn["h.0.attn.c_attn"]["label"], drawn["h.0.attn.c_attn"]["upright"]) == (
        "c_attn · 280 FLOPs · 28%",
        False,
    )
    assert drawn["h.0.attn"]["upright"] is False and drawn["h.0.attn"]["height"] == flame.ROW - 1
    assert drawn["h.0.attn.c_proj"]["height"] == drawn["h.0.attn.c_attn"]["height"] == 52  # one row, one height
    text = next(
        g.find(f"{SVG}text") for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("data-path") == "h.0.attn.c_proj"
    )
    assert text is not None and text.get("transform", "").startswith("rotate(-90 ")
    # the note under the picture sits below the taller row
    rows_bottom = max(box["y"] + box["height"] for box in drawn.values())  # type: ignore[operator]
    note_y = max(int(t.get("y", "0")) for t in ET.fromstring(svg).iter(f"{SVG}text") if "hover a box" in (t.text or ""))
    assert note_y > rows_bottom
    # a box too narrow even upright (under ROTATE_MIN) keeps the empty label, and its row its height
    tiny = build_report({"a": 990, "b": 10})  # b is 11.8 px
    assert (boxes(render_svg(tiny))["b"]["label"], boxes(render_svg(tiny))["b"]["height"]) == ("", flame.ROW - 1)


def test_a_real_renderer_draws_an_upright_label_inside_its_box() -> None:
    report = build_report({"h.0.attn.c_attn": 280, "h.0.attn.c_proj": 20, "h.0.mlp": 700})
    svg = render_svg(report)
    image = pixels(svg)
    box = boxes(svg)["h.0.attn.c_proj"]
    left, top = int(box["x"]), int(box["y"])  # type: ignore[call-overload]
    inside = image.crop((left + 2, top + 2, left + int(box["width"]) - 2, top + int(box["height"]) - 2))  # type: ignore[attr-defined, call-overload]
    ink = [pixel for pixel in inside.get_flattened_data() if max(pixel) < 100]
    assert len(ink) > 40  # the glyphs of `c_proj`, dark on the box's fill
    # taller than wide: the ink runs up the box
    dark = [(x, y) for y in range(inside.height) for x in range(inside.width) if max(inside.getpixel((x, y))) < 100]
    xs, ys = [x for x, _ in dark], [y for _, y in dark]
    assert max(ys) - min(ys) > 2 * (max(xs) - min(xs))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_escaped_and_cannot_inject(name: str) -> None:
    report = build_report({name: 700, f"ok.{name}": 300}, skipped={name: 2})
    report.model = name
    budget = parse_budget({"flops": "900"}, {})
    for text in (render_svg(report, title=name, budget=budget), render_html(report, title=name, budget=budget)):
        text.encode("utf-8")  # no lone surrogate left
        assert safe_text(text) == text  # nothing for the stdout filter to change: no control character, `::` or `##[`
        assert "##[" not in text and "<script" not in text and "<x>" not in text and "<!--" not in text
    svg = render_svg(report, title=name, budget=budget)
    root = ET.fromstring(svg)  # well-formed XML whatever the names
    assert not [el for el in root.iter() if el.tag not in {f"{SVG}{t}" for t in ("svg", "title", "style", "rect",
                                                                                    "text", "g")}]  # fmt: skip
    drawn = boxes(svg)

    def shown(text: str) -> str:
        return ET.fromstring(f"<t>{xml_text(text)}</t>").text or ""

    assert set(drawn) == {"", shown(name), "ok", shown(f"ok.{name}")}
    visible = shown(name)
    assert "\n" not in visible and "\x1b" not in visible and "\u202e" not in visible and "\ud800" not in visible
    assert drawn[visible]["title"].startswith(f"{visible} · 700 FLOPs")  # type: ignore[union-attr]
    if name.isprintable():
        assert visible == name  # markup characters are escaped for XML, not changed: the reader sees the real name


def test_same_report_same_bytes_and_colours_by_layer_name() -> None:
    report = build_report({"stem": 10, "layer1.0.conv1": 40, "layer1.1.conv1": 40, "head": 10})
    budget = parse_budget({"flops": "90", "params": "10"}, {})
    assert render_svg(report, budget=budget) == render_svg(report, budget=budget)
    assert render_html(report) == render_html(report)
    drawn = boxes(render_svg(report))
    assert drawn["layer1.0.conv1"]["fill"] == drawn["layer1.1.conv1"]["fill"] != drawn["stem"]["fill"]


def budget_groups(svg: str) -> list[tuple[str, str, str]]:
    """(metric, over, text right of the bar) of each budget bar."""
    return [(metric, over, text) for metric, over, _, text in budget_bars(svg)]


def budget_bars(svg: str) -> list[tuple[str, str, str, str]]:
    """(metric, over, the bar's name, the text right of the bar) of each budget bar."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "budget":
            name, text = (t.text or "" for t in group.findall(f"{SVG}text"))
            found.append((group.get("data-metric", ""), group.get("data-over", ""), name, text))
    return found


def test_budget_bars_show_use_and_turn_red_when_over() -> None:
    report = build_report({"a": 8_239_860_200}, params=25_557_032)
    budget = parse_budget({"flops": "8.3G", "params": "25.5M", "skipped": 0}, {})
    svg = render_svg(report, budget=budget)
    assert budget_groups(svg) == [
        ("flops", "false", "8.24 GFLOPs of 8.30 GFLOPs budget, 99.3%"),
        ("params", "true", "25.6M params of 25.5M params budget, 100.2% (over budget)"),
    ]
    bars = [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "budget"]
    fills = {g.get("data-metric"): [r.get("fill") for r in g.iter(f"{SVG}rect")] for g in bars}
    assert fills["flops"] == ["#e6e6e6", "#2ca02c"] and fills["params"] == ["#e6e6e6", "#d62728"]
    widths = {g.get("data-metric"): g.findall(f"{SVG}rect")[1].get("width") for g in bars}
    # 300 px * 8,239,860,200 / 8,300,000,000 = 297.826 px; over budget the bar is full, not longer
    assert widths["flops"] == "297.83" and widths["params"] == "300.00"
    # each bar names its metric on its left, in a column as wide as the longest name
    assert [(bar[0], bar[2]) for bar in budget_bars(svg)] == [("flops", "FLOPs"), ("params", "params")]
    assert {g.find(f"{SVG}rect").get("x") for g in bars} == {str(MARGIN + round(len("params") * flame.CHAR + 8))}  # type: ignore[union-attr]
    assert "skipped ops: none (budget: at most 0); the count is exact" in svg
    # a MAC budget written in the flops slot is a macs bar; no budget, no bar
    assert [g[0] for g in budget_groups(render_svg(report, budget=parse_budget({"flops": "5 GMACs"}, {})))] == ["macs"]
    assert budget_groups(render_svg(report)) == []


def test_skipped_ops_are_listed_as_a_lower_bound() -> None:
    report = build_report({"a": 100}, skipped={"aten.kthvalue": 2, "aten.nonzero": 1})
    svg = render_svg(report, budget=parse_budget({"skipped": 1}, {}))
    assert (
        "skipped ops: 3 calls not counted (budget: at most 1) OVER (aten.kthvalue x2, aten.nonzero x1); "
        "the totals are a lower bound" in svg
    )
    assert "estimated:" not in svg
    report.estimated_ops = {"aten.nonzero": EstimatedOp(4, ["a"], "upper bound")}
    assert "estimated: 4 op calls sized by a data-dependent rule" in render_svg(report)


def test_html_page_inlines_the_svg_and_loads_nothing() -> None:
    report = build_report({"a": 600, "b": 400})
    page = render_html(report, title="demo")
    svg = render_svg(report, title="demo")
    assert svg in page and page.startswith("<!DOCTYPE html>\n")
    assert "default-src 'none'" in page  # the browser may fetch nothing, should anything slip in

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict[str, str | None]]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert names <= {"html", "head", "meta", "title", "style", "body", "svg", "rect", "text", "g"}
    for _, attrs in parser.tags:  # no attribute that loads or runs anything
        assert not {"src", "href", "xlink:href", "onload", "onclick", "onmouseover"} & set(attrs)
    assert "url(" not in page and "@import" not in page


def real_report(factory: str, *shape: int) -> Report:
    pytest.importorskip("torch")
    import importlib

    import torch

    from pytest_flopbudget import count

    module, _, name = factory.partition(":")
    return count(getattr(importlib.import_module(module), name)().eval(), torch.zeros(*shape))


@pytest.mark.parametrize(
    ("factory", "shape"),
    [("examples.factories:resnet18_on_meta", (1, 3, 224, 224)), ("examples.vit:vit_tiny", (1, 3, 32, 32))],
)
def test_real_pytorch_models(factory: str, shape: tuple[int, ...]) -> None:
    report = real_report(factory, *shape)
    for metric in ("flops", "macs", "params"):
        assert_well_formed(render_svg(report, metric=metric), report, metric)
    assert render_svg(real_report(factory, *shape)) == render_svg(report)  # a second count, the same bytes


def test_resnet18_shows_its_stages_in_forward_order() -> None:
    report = real_report("examples.factories:resnet18_on_meta", 1, 3, 224, 224)
    drawn = boxes(render_svg(report))
    stages = [p for p in drawn if drawn[p]["depth"] == 1]
    # maxpool (1.81M FLOPs, 0.59 px) is drawn; relu (803k, 0.26 px), avgpool and fc (1.02M, 0.33 px) are too narrow
    assert stages == ["conv1", "bn1", "maxpool", "layer1", "layer2", "layer3", "layer4"]
    assert drawn["layer1"]["label"] == "layer1 · 929 MFLOPs · 26%"


def test_onnx_model(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from pytest_flopbudget import count

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], b"\0" * (4 * 27 * 4), raw=True)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/features/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/features/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["y"], name="/head/pool/GlobalAveragePool"),
    ]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_empty_tensor_value_info("y")], initializer=[weight],
    )  # fmt: skip
    path = tmp_path / "net.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    report = count(str(path))
    drawn = assert_well_formed(render_svg(report), report)
    # conv: 2*4*8*8 outputs * 27 taps = 13,824 MACs = 27,648 FLOPs; relu 512; pool 512 adds (+ 8 divides)
    assert report.layers["features.conv"].flops == 27_648
    assert {"features", "features.conv"} <= set(drawn)


def pixels(svg: str) -> object:
    resvg = pytest.importorskip("resvg_py")
    image_module = pytest.importorskip("PIL.Image")
    png = bytes(resvg.svg_to_bytes(svg_string=svg))
    return image_module.open(io.BytesIO(png)).convert("RGB")


def colour(hex_colour: str) -> tuple[int, int, int]:
    return (int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16))


def test_a_real_renderer_draws_the_boxes_and_bars() -> None:
    report = build_report({"a": 600, "a.x": 300, "b": 100})
    svg = render_svg(report, budget=parse_budget({"flops": "800"}, {}))
    image = pixels(svg)
    drawn = boxes(svg)
    assert image.size == (1200, int(ET.fromstring(svg).get("height", "")))  # type: ignore[attr-defined]
    for path in ("", "a", "a.x", "b"):
        box = drawn[path]
        # a point inside the box, right of any label, is the box's fill
        x = int(box["x"] + box["width"]) - 3  # type: ignore[operator]
        assert image.getpixel((x, box["y"] + 2)) == colour(str(box["fill"])), path  # type: ignore[attr-defined, operator]
    # below a.x's row nothing is drawn; a's own work (300 FLOPs) leaves the row under it empty right of a.x
    under = drawn["a.x"]["y"] + 5  # type: ignore[operator]
    assert image.getpixel((800, under)) == (255, 255, 255)  # type: ignore[attr-defined]
    # the budget bar (1000 of 800: over) is red across its whole width
    bar_y = next(int(r.get("y", "")) for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("fill") == "#d62728")
    bar_x = next(int(r.get("x", "")) for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("fill") == "#d62728")
    assert image.getpixel((bar_x + 5, bar_y + 5)) == colour("#d62728")  # type: ignore[attr-defined]
    assert image.getpixel((bar_x + 295, bar_y + 5)) == colour("#d62728")  # type: ignore[attr-defined]
    # left of the bar, its metric's name is drawn in dark ink
    label = image.crop((MARGIN, bar_y, bar_x - 4, bar_y + flame.ROW - 4))  # type: ignore[attr-defined]
    assert min(min(pixel) for pixel in label.get_flattened_data()) < 100


def test_skipped_ops_in_a_real_report_reach_the_picture() -> None:
    layers = {"a": LayerCost(flops=100, skipped={"aten.foo": 3})}
    report = Report(
        layers=layers, forward=PhaseTotals(flops=100, macs=0), skipped_ops={"aten.foo": SkippedOp(3, ["a"])}
    )
    assert "skipped ops: 3 calls not counted (aten.foo x3); the totals are a lower bound" in render_svg(report)


def test_the_totals_line_names_integer_ops_only_in_a_model_that_has_some() -> None:
    from pytest_flopbudget._metrics import INT_OPS

    plain = Report(layers={"fc": LayerCost(flops=240, macs=120)}, forward=PhaseTotals(flops=240, macs=120))
    assert "int ops" not in render_svg(plain)
    layers = {"fc": LayerCost(flops=240, macs=120), "q": LayerCost({INT_OPS: 131_072})}
    quantized = Report(layers=layers, forward=PhaseTotals({"flops": 240, "macs": 120, INT_OPS: 131_072}))
    assert "240 FLOPs · 120 MACs · 131k int ops · 0 params; box width: inclusive FLOPs" in render_svg(quantized)
    assert "box width: inclusive integer ops" in render_svg(quantized, metric=INT_OPS)


def test_a_report_read_back_from_json_draws_its_siblings_in_natural_order() -> None:
    # baselines, cached counts and xdist workers hand back `Report.from_dict`, whose layers are sorted as text
    report = Report.from_dict(build_report({f"h.{i}": 100 for i in range(12)}).to_dict())
    drawn = boxes(render_svg(report))
    by_x = sorted((box["x"], path) for path, box in drawn.items() if box["depth"] == 2)
    assert [path for _, path in by_x] == [f"h.{i}" for i in range(12)]  # not h.0, h.1, h.10, h.11, h.2


def test_budget_bars_of_metrics_in_the_same_unit_are_told_apart_by_name() -> None:
    from pytest_flopbudget._metrics import BYTES, PARAM_BYTES

    layers = {"fc": LayerCost({"flops": 240, "macs": 120, BYTES: 4_000, PARAM_BYTES: 1_000}, params=250)}
    report = Report(layers=layers, forward=PhaseTotals({"flops": 240, "macs": 120, BYTES: 4_000}))
    report.optional_metrics = frozenset({BYTES, PARAM_BYTES})
    budget = parse_budget({"bytes": "8k", "param-bytes": "2k"}, {})
    names = [(bar[2], bar[3].split(" of ")[0]) for bar in budget_bars(render_svg(report, budget=budget))]
    assert names == [("bytes moved", "3.91 KiB"), ("param bytes", "1000 B")]
