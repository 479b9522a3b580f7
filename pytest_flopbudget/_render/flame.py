"""The per-layer cost as a picture: an icicle graph of the module tree, as SVG or as an HTML page around it.

A table answers "how much does each layer cost"; a picture answers "where does the compute go" at a glance, and
is what people paste into a pull request or a design doc. The whole model is the top box, each module's children
sit below it, and every box is as wide as its inclusive cost (its own ops plus its children's), so a box's
children never reach past it and the gap beside them is the module's own work. Siblings keep the order the
forward reached them, as in the table (`table.tree_order`). A label is drawn across its box where it fits (cut
with `…`), and upright in a taller row where only that shows a narrow box's name (`box_label`).

Three promises, each tested:

* **self-contained**: no script, no external font, stylesheet or image; the HTML page forbids loading anything
  (a Content-Security-Policy of `default-src 'none'`), so it can be attached to a CI run and opened offline.
* **deterministic**: the same Report gives the same bytes (no clock, no random colours: a box's colour is a
  checksum of its name, coordinates are exact integer arithmetic rounded once), so a committed picture only
  changes when the model does.
* **safe**: every name comes from a user's model, so each one is XML-escaped, made visible when it holds control
  characters (`\\x1b`) and kept to one line; `##[` is written as `#&#35;[` so not even the raw bytes can be read
  as a legacy runner command, and no line starts with anything but `<`. `safe_text` of the output is the output.

Nothing here imports torch: the renderer reads a `Report`, which both backends produce.
"""

from __future__ import annotations

import html
import re
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._metrics import FLOPS, METRICS, SKIPPED, Metric
from pytest_flopbudget._render.formatting import ROOT_LABEL, format_pair, format_value, metric_title, plural
from pytest_flopbudget._render.table import tree_order
from pytest_flopbudget._report import ROOT, Report, ancestors
from pytest_flopbudget._safe_text import visible

WIDTH = 1200
MARGIN = 10
CHART = WIDTH - 2 * MARGIN
ROW = 20
FONT = 12
#: A monospace stack of common system fonts (nothing is downloaded); labels are cut to fit assuming 0.6 em.
FONTS = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"
#: The advance of one character of a 12 px monospace font (0.6 em), for truncating labels to their box.
CHAR = 7.2
#: Boxes narrower than this many hundredths of a pixel are not drawn (nor their children, which are narrower).
MIN_WIDTH = 50
#: A box whose name does not fit across it, and that is at least this many hundredths of a pixel wide, is
#: labelled upright (rotated, read bottom to top) in a row made taller for it: deep rows of narrow boxes
#: (`h.3.attn.c_proj`) are then read without hovering.
ROTATE_MIN = 1400
#: The most a row grows for its upright labels, in pixels: about 14 characters; a longer one is cut with `…`.
ROTATED_MAX = 110
BAR = 300
SHOWN_SKIPPED = 5
#: The HTML page may load and run nothing: only its own inline styles apply.
CSP = "default-src 'none'; style-src 'unsafe-inline'"

_STYLE = "g.layer:hover rect{stroke:#000;stroke-width:1.5}g.layer text{pointer-events:none}"

#: The size a picture's own `<svg` element opens with.
_SIZE = re.compile(r'<svg [^>]*?width="(\d+)" height="(\d+)"')

#: Characters XML 1.0 forbids even as character references, and Unicode's non-characters; shown as `\\uXXXX`.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Box:
    """One drawn module: `start`/`end` in hundredths of a pixel from the chart's left edge, `depth` its row."""

    path: str
    depth: int
    value: int
    start: int
    end: int


def render_svg(
    report: Report,
    *,
    metric: Metric = FLOPS,
    title: str = "",
    name: str = "",
    budget: Budget | None = None,
) -> str:
    """The picture as a standalone SVG document (UTF-8 text ending in a newline).

    `title` heads the picture (default: the model's class name); `name` labels the top box (default: `title`'s
    model, or `(model)`); `budget`, when it has ceilings, adds a bar per budgeted metric showing how much of it
    the model uses.
    """
    # Only counted metrics spread over layers (`skipped` is a count of calls, not a cost).
    pictured = METRICS.counted
    if metric not in pictured:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(pictured)}")
    title = title or report.model or ROOT_LABEL
    name = name or report.model or ROOT_LABEL
    body: list[str] = []
    y = MARGIN + 16
    body.append(text_svg(MARGIN, y, title, size=15, weight="bold"))
    y += 20
    # an optional metric (bytes) is in the line only when it is the one pictured, integer ops only where there are some
    totals = " · ".join(
        format_value(report.metric(m), m)
        for m in pictured
        if (not m.optional and (not m.omit_zero or report.metric(m))) or m == metric
    )
    body.append(text_svg(MARGIN, y, f"{totals}; box width: inclusive {metric_title(metric)}", fill="#444"))
    y += 8
    limits = [(m, limit.value) for m in pictured if budget is not None and (limit := budget.limit(m)) is not None]
    # each bar is named by its metric in a column left of the bars, as wide as the longest name
    label_width = max((_columns(metric_title(m)) for m, _ in limits), default=0) * CHAR + 8
    for limit_metric, limit_value in limits:
        body.append(_budget_bar(y, report.metric(limit_metric), limit_value, limit_metric, round(label_width)))
        y += ROW + 2
    y += 6 + FONT
    skipped_limit = budget.limit(SKIPPED) if budget is not None else None
    body.append(_skipped_line(y, report, skipped_limit.value if skipped_limit is not None else None))
    if report.estimated_ops:
        y += ROW - 2
        calls = sum(op.calls for op in report.estimated_ops.values())
        body.append(
            text_svg(MARGIN, y, f"estimated: {plural(calls, 'op call')} sized by a data-dependent rule", fill="#8a5a00")
        )
    y += 10
    boxes, hidden = layout(report, metric)
    drawn, height = icicle_svg(boxes, y, report.metric(metric), name, metric)
    body.extend(drawn)
    y += height + 4 + FONT
    note = f"hover a box for its full name and figures; {metric_title(metric)} are inclusive of children"
    if hidden:
        note += f"; {plural(hidden, 'layer')} narrower than {MIN_WIDTH / 100:g} px not drawn"
    body.append(text_svg(MARGIN, y, note, fill="#666", size=11))
    height = y + MARGIN
    return svg_document(body, height, title)


def svg_document(body: list[str], height: int, title: str, style: str = _STYLE) -> str:
    """The SVG around a picture's elements: size, fonts, title, style and a white ground; shared by the count
    picture, the differential one (diff_flame.py) and the memory chart (memory_chart.py, with its own `style`)
    so all stay the same document."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'font-family="{FONTS}" font-size="{FONT}">'
    )
    lines = [head, f"<title>{xml_text(title)}</title>", f"<style>{style}</style>",
             f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>', *body, "</svg>"]  # fmt: skip
    return "\n".join(lines) + "\n"


def stack_svg(documents: Sequence[str]) -> str:
    """Standalone SVG documents (each as `svg_document` or `curve.picture` writes it) one under the other in one
    SVG document, each nested at its offset: `count --format svg` of a model with a curve (the icicle, then the
    curve)."""
    placed: list[str] = []
    width = height = 0
    for document in documents:
        size = _SIZE.search(document)
        if size is None:
            raise ValueError("not an SVG document of a picture: no width and height")
        placed.append(document.rstrip("\n").replace("<svg ", f'<svg x="0" y="{height}" ', 1))
        width, height = max(width, int(size.group(1))), height + int(size.group(2))
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    return "\n".join([head, *placed, "</svg>"]) + "\n"


def render_html(
    report: Report,
    *,
    metric: Metric = FLOPS,
    title: str = "",
    name: str = "",
    budget: Budget | None = None,
) -> str:
    """`render_svg` inline in a minimal HTML page that may load nothing (no script is needed: hover is CSS)."""
    svg = render_svg(report, metric=metric, title=title, name=name, budget=budget)
    return html_page(svg, title or report.model or ROOT_LABEL)


def html_page(svg: str, title: str) -> str:
    """`svg` (one picture, or markup holding several: `pictures:PATH`) inline in a minimal HTML page titled `title`
    that may load and run nothing."""
    heading = xml_text(title)
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                f"<title>flopbudget: {heading}</title>",
                "<style>body{margin:16px;background:#fff;color:#222;font-family:monospace}"
                "svg{max-width:100%;height:auto}</style>",
                "</head>",
                "<body>",
                svg.rstrip("\n"),
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )


def layout(report: Report, metric: Metric = FLOPS) -> tuple[list[Box], int]:
    """The boxes to draw, depth first in forward order, and how many costed layers were too narrow to draw.

    Positions are exact: a box spans `[start, end)` of its parent's cost, converted to hundredths of a pixel by
    integer division rounded half up. Rounding is monotone, so a child never pokes out of its parent and two
    siblings never overlap, whatever the magnitudes (counts go up to 10^30).
    """
    values, children = inclusive_tree(report, metric)
    order = tree_order(report.layers)
    total = values[ROOT]
    boxes: list[Box] = []
    stack: list[tuple[str, int, int]] = [(ROOT, 0, 0)]
    while stack:
        path, depth, offset = stack.pop()
        value = values[path]
        start, end = _scaled(offset, total), _scaled(offset + value, total)
        if path == ROOT:
            end = CHART * 100  # drawn full width even when the model costs nothing
        elif end - start < MIN_WIDTH:
            continue
        boxes.append(Box(path, depth, value, start, end))
        kids = sorted(
            (child for child in children.get(path, ()) if values[child] > 0),
            key=lambda child: (order.get(child, len(order)), child),
        )
        placed: list[tuple[str, int, int]] = []
        for child in kids:
            placed.append((child, depth + 1, offset))
            offset += values[child]
        stack.extend(reversed(placed))
    drawn = {box.path for box in boxes}
    hidden = sum(1 for path, value in values.items() if value > 0 and path not in drawn)
    return boxes, hidden


def xml_text(text: str) -> str:
    """`text` for XML character data or a double-quoted attribute: one line, visible controls, escaped markup."""
    shown = visible(str(text)).replace("\n", "\\x0a").replace("\t", "\\x09")
    shown = _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", shown)
    return html.escape(shown, quote=True).replace("##[", "#&#35;[")


def fit_label(candidates: Sequence[str], width: int) -> str:
    """The first of `candidates` that fits in `width` hundredths of a pixel, else the last one cut with `…`;
    empty when not even two characters fit."""
    room = int((width / 100 - 6) / CHAR)
    for text in candidates:
        if _columns(text) <= room:
            return text
    if room < 2 or not candidates:
        return ""
    cut = ""
    for char in candidates[-1]:
        if _columns(cut + char) > room - 1:
            break
        cut += char
    return cut + "…"


# -- parts ---------------------------------------------------------------------------------------------------------


def inclusive_tree(report: Report, metric: Metric) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Inclusive value of every module path and its ancestors, and each path's children.

    The tree is `report.ancestors`'s: the parent of `a.b.c` is `a.b` (and of `a` the root), odd names (`.a`,
    `a..b`) give each ancestor once, and a path deeper than the tree's limits hangs, under its full name, from
    its deepest ancestor within them (so a 700 KB dotted name costs linear memory, not quadratic).
    """
    values: dict[str, int] = {ROOT: 0}
    children: dict[str, list[str]] = {}
    for path, value in report.layer_metric(metric).items():
        parent = ROOT
        for node in ancestors(path):
            if node not in values:
                values[node] = 0
                children.setdefault(parent, []).append(node)
            values[node] += value
            parent = node
    return values, children


def _scaled(value: int, total: int) -> int:
    """`value` of `total` as hundredths of a pixel of the chart, rounded half up, exactly."""
    if total <= 0:
        return 0
    return (2 * CHART * 100 * value + total) // (2 * total)


def _px(hundredths: int) -> str:
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def _share(value: int, total: int) -> str:
    if total <= 0:
        return "0%"
    percent = 100 * value / total
    return f"{percent:.0f}%" if percent >= 9.95 or percent == 0 else f"{percent:.1f}%"


@dataclass(frozen=True)
class Label:
    """The text drawn in a box, and whether it stands upright (rotated a quarter turn, read bottom to top)."""

    text: str
    upright: bool = False

    @property
    def length(self) -> int:
        """Pixels along the text at 0.6 em per column, with the box's padding."""
        return round(_columns(self.text) * CHAR) + 8


#: Fill and tooltip (already escaped) of a box, where they are not the name's colour and the figures (the diff's).
Paint = Callable[[Box], "tuple[str | None, str | None]"]


def icicle_svg(
    boxes: Sequence[Box], top: int, total: int, name: str, metric: Metric, paint: Paint | None = None
) -> tuple[list[str], int]:
    """The boxes as SVG elements from `top` down, and the height they take: a row per depth, `ROW` high, or
    taller where some of its boxes carry an upright label (`box_label`), as tall as the longest of those."""
    labels = [box_label(box, name, metric, total) for box in boxes]
    heights = [ROW] * (max((box.depth for box in boxes), default=0) + 1)
    for box, label in zip(boxes, labels):
        if label.upright:
            heights[box.depth] = max(heights[box.depth], label.length + 2)
    tops = [top]
    for height in heights:
        tops.append(tops[-1] + height)
    elements = []
    for box, label in zip(boxes, labels):
        fill, tooltip = paint(box) if paint is not None else (None, None)
        row_top, height = tops[box.depth], heights[box.depth]
        elements.append(box_svg(box, row_top, height, label, total, name, metric, fill, tooltip))
    return elements, tops[-1] - top


def box_label(box: Box, name: str, metric: Metric, total: int) -> Label:
    """`name · 929 MFLOPs · 26%` across the box, cut to fit down to the name alone; where not even the name fits
    and the box is at least `ROTATE_MIN` wide, the name (with its figure where there is room) upright, cut to
    `ROTATED_MAX` pixels, if that shows more of it than across."""
    short = _short(box, name)
    figure = format_value(box.value, metric)
    width = box.end - box.start
    across = fit_label([f"{short} · {figure} · {_share(box.value, total)}", f"{short} · {figure}", short], width)
    if (across and not across.endswith("…")) or width < ROTATE_MIN:
        return Label(across)
    upright = fit_label([f"{short} · {figure}", short], ROTATED_MAX * 100)
    if _columns(upright.rstrip("…")) > _columns(across.rstrip("…")):
        return Label(upright, upright=True)
    return Label(across)


def box_svg(
    box: Box,
    top: int,
    height: int,
    label: Label,
    total: int,
    name: str,
    metric: Metric,
    fill: str | None = None,
    tooltip: str | None = None,
) -> str:
    """One box in its row (`top`, `height`); `fill` and `tooltip` (already escaped) replace the name's colour and
    the figures (the diff's)."""
    path = box.path
    short = _short(box, name)
    full = name if path == ROOT else path
    x, width = box.start + MARGIN * 100, box.end - box.start
    parts = [
        f'<g class="layer" data-path="{xml_text(path)}" data-depth="{box.depth}">',
        f"<title>{tooltip or _tooltip(full, box, _share(box.value, total), metric)}</title>",
        f'<rect x="{_px(x)}" y="{top}" width="{_px(width)}" height="{height - 1}"'
        f' fill="{fill or name_colour(path, short)}"/>',
    ]
    if label.upright:  # the baseline runs up the box's middle, from 4 px above its bottom
        centre, bottom = _px(x + width // 2 + 400), top + height - 5
        parts.append(
            f'<text class="upright" x="{centre}" y="{bottom}" transform="rotate(-90 {centre} {bottom})">'
            f"{xml_text(label.text)}</text>"
        )
    elif label.text:
        parts.append(f'<text x="{_px(x + 300)}" y="{top + 14}">{xml_text(label.text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _short(box: Box, name: str) -> str:
    """The box's own name: the last part of its path (the model's name for the root)."""
    return name if box.path == ROOT else (box.path.rsplit(".", 1)[-1] or box.path)


def _tooltip(full: str, box: Box, share: str, metric: Metric) -> str:
    first = xml_text(f"{full} · {format_value(box.value, metric)} · {share} of the model")
    return f"{first}&#10;{box.value:,} {metric_title(metric)} (inclusive of children)"


def name_colour(path: str, short: str) -> str:
    """A warm colour fixed by the layer's own name (`conv1` looks the same in every block); the model is grey."""
    if path == ROOT:
        return "#c8c8c8"
    digest = zlib.crc32(short.encode("utf-8", "surrogatepass"))
    red = 205 + digest % 50
    green = 90 + (digest >> 8) % 140
    blue = 40 + (digest >> 16) % 50
    return f"#{red:02x}{green:02x}{blue:02x}"


def _budget_bar(y: int, now: int, limit: int, metric: Metric, label_width: int) -> str:
    """`FLOPs [#####     ] 8.24 GFLOPs of 8.30 GFLOPs budget, 99.3%`, red when over; the metric's name fills
    the first `label_width` pixels, so that bars of metrics in the same unit (bytes moved, param bytes) are told
    apart."""
    over = now > limit
    shown_now, shown_limit = format_pair(now, limit, metric)
    if limit == 0:
        percent = "over" if over else "0.0%"
        filled = BAR * 100 if over else 0
    else:
        percent = f"{100 * now / limit:.1f}%"
        filled = min(BAR * 100, (2 * BAR * 100 * now + limit) // (2 * limit))
    colour = "#d62728" if over else "#2ca02c"
    text = f"{shown_now} of {shown_limit} budget, {percent}" + (" (over budget)" if over else "")
    top = y + 2
    left = MARGIN + label_width
    return (
        f'<g class="budget" data-metric="{metric}" data-over="{str(over).lower()}">'
        + text_svg(MARGIN, top + 12, metric_title(metric), weight="bold")
        + f'<rect x="{left}" y="{top}" width="{BAR}" height="{ROW - 4}" fill="#e6e6e6"/>'
        f'<rect x="{left}" y="{top}" width="{_px(filled)}" height="{ROW - 4}" fill="{colour}"/>'
        + text_svg(left + BAR + 10, top + 12, text, fill="#d62728" if over else "#222")
        + "</g>"
    )


def _skipped_line(y: int, report: Report, limit: int | None) -> str:
    """The ops that were not counted (the totals are then a lower bound), and the model's ceiling on them."""
    calls = report.skipped_calls
    allowed = "" if limit is None else f" (budget: at most {limit})"
    over = limit is not None and calls > limit
    if not report.skipped_ops:
        text = f"skipped ops: none{allowed}; the count is exact under the documented conventions"
        return text_svg(MARGIN, y, text, fill="#444")
    ops = sorted(report.skipped_ops.items(), key=lambda item: (-item[1].calls, item[0]))
    named = ", ".join(f"{op} x{entry.calls}" for op, entry in ops[:SHOWN_SKIPPED])
    more = f" and {len(ops) - SHOWN_SKIPPED} more" if len(ops) > SHOWN_SKIPPED else ""
    text = (
        f"skipped ops: {plural(calls, 'call')} not counted{allowed}{' OVER' if over else ''} ({named}{more}); "
        "the totals are a lower bound"
    )
    return text_svg(MARGIN, y, text, fill="#d62728" if over or limit is None else "#8a5a00")


def text_svg(x: int, y: int, text: str, *, fill: str = "#222", size: int = FONT, weight: str = "") -> str:
    bold = f' font-weight="{weight}"' if weight else ""
    return f'<text x="{x}" y="{y}" font-size="{size}" fill="{fill}"{bold}>{xml_text(text)}</text>'


def _columns(text: str) -> int:
    """Monospace columns `text` takes: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
