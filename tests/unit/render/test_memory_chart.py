"""The peak-memory picture (`count --metric peak-memory`): live bytes as a step chart whose highest point is the
reported peak, with its layer, the backward and the budget marked; valid, self-contained, deterministic SVG."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._metrics import PEAK_MEMORY
from pytest_flopbudget._render.memory_chart import HEIGHT, LEFT, PLOT, columns, render_html, render_svg
from pytest_flopbudget._report import MemoryTimeline, Report
from pytest_flopbudget._safe_text import safe_text

SVG = "{http://www.w3.org/2000/svg}"


def _report(layers: list[tuple[int, str]] | None = None) -> Report:
    """Five samples: 1000 bytes alive before the first op, the peak of 6000 after op 3 (in `b`, the backward's
    first op)."""
    timeline = MemoryTimeline(
        [1000, 3000, 2500, 6000, 2000], layers or [(1, "a.x"), (2, "a.y"), (3, "b"), (4, "")], backward=3
    )
    return Report(
        optional_metrics=frozenset({PEAK_MEMORY}),
        peak_memory=6000,
        peak_layer="b",
        memory_timeline=timeline,
        model="Net",
    )


def _groups(svg: str, kind: str) -> list[ET.Element]:
    return [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == kind]


def test_the_peak_is_marked_with_its_bytes_op_and_layer() -> None:
    svg = render_svg(_report(), title="net: 2x8 float32; training step")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("width") == "1200"
    (peak,) = _groups(svg, "peak")
    assert (peak.get("data-bytes"), peak.get("data-op"), peak.get("data-layer")) == ("6000", "3", "b")
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "peak memory 5.86 KiB at b (after op 3 of 4, in the backward)" in texts
    assert "peak 5.86 KiB at b" in texts
    (backward,) = _groups(svg, "backward")
    # the backward starts at sample 3 of 5: 3/5 of the plot's width from its left edge
    assert backward.find(f"{SVG}line").get("x1") == f"{LEFT + PLOT * 3 / 5:.2f}"  # type: ignore[union-attr]


def test_the_curve_is_one_step_per_sample_scaled_to_the_peak() -> None:
    svg = render_svg(_report())
    path = next(p for p in ET.fromstring(svg).iter(f"{SVG}path") if p.get("class") == "live")
    d = path.get("d", "")
    base = float(d.split(" ")[1].split("V")[0])
    heights = [base - float(part.split("H")[0]) for part in d.split("V")[1:-1]]
    # 1000, 3000, 2500, 6000 and 2000 bytes on a 240-pixel scale topped by the peak
    assert heights == [40.0, 120.0, 100.0, HEIGHT, 80.0]


def test_columns_keep_the_highest_sample_of_each() -> None:
    assert columns([1, 5, 2, 7, 3], width=2) == [(0, 2, 5), (2, 5, 7)]
    assert columns([4, 2], width=10) == [(0, 1, 4), (1, 2, 2)]
    live = [i % 97 for i in range(100_000)]
    live[54_321] = 10**6
    shown = columns(live)
    assert len(shown) == PLOT and max(value for _, _, value in shown) == 10**6
    assert shown[0][0] == 0 and shown[-1][1] == len(live)
    assert all(a[1] == b[0] for a, b in zip(shown, shown[1:]))


def test_bands_name_the_top_level_module_of_each_run_of_ops() -> None:
    groups = _groups(render_svg(_report()), "band")
    bands = [(g.get("data-path"), g.get("data-start"), g.get("data-end")) for g in groups]
    assert bands == [("a", "1", "3"), ("b", "3", "4"), ("", "4", "5")]


def test_a_budget_is_a_line_that_turns_red_when_the_peak_passes_it() -> None:
    over = render_svg(_report(), budget=parse_budget({"peak-memory": "4000B"}, {}))
    (line,) = _groups(over, "budget")
    assert (line.get("data-metric"), line.get("data-over")) == ("peak-memory", "true")
    assert "budget 3.91 KiB: over by +50.0%" in over
    within = render_svg(_report(), budget=parse_budget({"peak-memory": "8000B"}, {}))
    assert _groups(within, "budget")[0].get("data-over") == "false" and "budget 7.81 KiB: within" in within
    assert not _groups(render_svg(_report(), budget=parse_budget({"flops": "10"}, {})), "budget")


@pytest.mark.parametrize("name", ["</text><script>alert(1)</script>", "\x1b[2J", "##[group]x", "a\"b'c&d<e>"])
def test_hostile_layer_names_are_text(name: str) -> None:
    report = _report([(1, name), (3, "b"), (4, "")])
    report.peak_layer = name
    report.memory_timeline = MemoryTimeline([1000, 3000, 6000, 2500, 2000], [(1, name), (3, "b"), (4, "")])
    svg = render_svg(report, title=name)
    root = ET.fromstring(svg)  # still well-formed
    assert "<script" not in svg and "\x1b" not in svg and "##[" not in svg
    assert safe_text(svg) == svg
    assert _groups(svg, "peak")[0].get("data-layer") != "" and not list(root.iter(f"{SVG}script"))


def test_same_report_same_bytes_and_html_loads_nothing() -> None:
    assert render_svg(_report()) == render_svg(_report())
    page = render_html(_report(), title="Net")
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert render_svg(_report(), title="Net").rstrip("\n") in page


def test_no_timeline_no_picture() -> None:
    report = _report()
    report.memory_timeline = None  # a report read back from JSON keeps only the peak
    with pytest.raises(ValueError, match="no timeline of live bytes"):
        render_svg(report)
    with pytest.raises(ValueError, match="no timeline"):
        render_svg(Report())


def test_a_real_training_count_draws_its_own_peak() -> None:
    torch = pytest.importorskip("torch")
    from examples.factories import gpt_tiny
    from pytest_flopbudget import count

    report = count(gpt_tiny(), torch.zeros(1, 64, dtype=torch.int64), training=True)
    svg = render_svg(report)
    (peak,) = _groups(svg, "peak")
    assert peak.get("data-bytes") == str(report.peak_memory) and peak.get("data-layer") == report.peak_layer
    assert _groups(svg, "backward"), "a training count marks where the backward starts"
    resvg = pytest.importorskip("resvg_py")
    image_module = pytest.importorskip("PIL.Image")
    image = image_module.open(io.BytesIO(bytes(resvg.svg_to_bytes(svg_string=svg)))).convert("RGB")
    circle = peak.find(f"{SVG}circle")
    assert circle is not None
    x, y = round(float(circle.get("cx", ""))), round(float(circle.get("cy", "")))
    assert image.getpixel((x, y)) == (0xD6, 0x27, 0x28)  # the red dot at the top of the curve
