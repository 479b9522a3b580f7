"""The per-layer change since the baseline as a picture: the icicle of `flame.py`, its boxes coloured by growth.

A diff table lists where a model grew; a differential picture shows it in place, inside the model's structure, so
a reviewer sees at once that "the growth is all in the decoder's attention". The boxes are the current count's
(`flame.layout`, widths from the inclusive cost now); each box's colour is its inclusive change against the
baseline's same module on a diverging scale: reds for growth, blues for shrinkage, deeper the larger the relative
change (full at +/-`FULL_PERCENT`%), grey for unchanged, and a colour of its own for a layer that is new. A layer
that was removed has no width now, so it is named below the boxes with its baseline figure. A legend and the
totals (`base → now`) head the picture.

The icicle's promises hold here too (self-contained, deterministic, every name escaped through `flame.xml_text`).
"""

from __future__ import annotations

from pytest_flopbudget._metrics import FLOPS, METRICS, Metric
from pytest_flopbudget._render.flame import (
    FONT,
    MARGIN,
    ROW,
    Box,
    html_page,
    icicle_svg,
    inclusive_tree,
    layout,
    svg_document,
    text_svg,
    xml_text,
)
from pytest_flopbudget._render.formatting import ROOT_LABEL, format_pair, format_percent, format_value, metric_title
from pytest_flopbudget._report import ROOT, Report

#: A change of this many percent (either way) gets the scale's deepest colour.
FULL_PERCENT = 50
UNCHANGED = "#c8c8c8"
NEW = "#8e44ad"
REMOVED = "#555555"
#: The diverging scale's ends: (palest, deepest) for growth and for shrinkage.
GROWTH = ((0xF6, 0xC4, 0xB8), (0xB2, 0x18, 0x2B))
SHRINK = ((0xC6, 0xDB, 0xEF), (0x21, 0x66, 0xAC))
#: How many removed layers are named before the rest are counted.
SHOWN_REMOVED = 8


def change_colour(base: int | None, now: int) -> str:
    """The fill for a box that costs `now` and cost `base` at the baseline (None: the module is new)."""
    if base is None:
        return NEW
    if now == base:
        return UNCHANGED
    if base == 0:  # it cost nothing before: as deep as growth goes
        return _blend(GROWTH, 1.0)
    fraction = min(1.0, abs(now - base) / base * 100 / FULL_PERCENT)
    return _blend(GROWTH if now > base else SHRINK, fraction)


def render_svg(baseline: Report, report: Report, *, metric: Metric = FLOPS, title: str = "", name: str = "") -> str:
    """Base vs now as a standalone SVG document (UTF-8 text ending in a newline)."""
    if metric not in METRICS.counted:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS.counted)}")
    title = title or report.model or ROOT_LABEL
    name = name or report.model or ROOT_LABEL
    before, _ = inclusive_tree(baseline, metric)
    after, _ = inclusive_tree(report, metric)
    base_total, now_total = baseline.metric(metric), report.metric(metric)
    body: list[str] = []
    y = MARGIN + 16
    body.append(text_svg(MARGIN, y, title, size=15, weight="bold"))
    y += 20
    shown_base, shown_now = format_pair(base_total, now_total, metric)
    change = format_percent(now_total - base_total, base_total)
    totals = f"{metric_title(metric)}: base {shown_base} → now {shown_now} ({change}); box width: inclusive now"
    body.append(f'<g class="totals">{text_svg(MARGIN, y, totals, fill="#444")}</g>')
    y += ROW
    body.append(_legend(y))
    y += 10
    boxes, hidden = layout(report, metric)

    def paint(box: Box) -> tuple[str | None, str | None]:
        base = before.get(box.path) if box.path != ROOT else base_total
        return change_colour(base, box.value), _tooltip(name if box.path == ROOT else box.path, base, box.value, metric)

    drawn, height = icicle_svg(boxes, y, now_total, name, metric, paint)
    body.extend(drawn)
    y += height + 4 + FONT
    removed = sorted(
        (path for path, value in before.items() if path != ROOT and value > 0 and not after.get(path)),
        key=lambda path: (-before[path], path),
    )
    if removed:
        named = ", ".join(f"{path} ({format_value(before[path], metric)})" for path in removed[:SHOWN_REMOVED])
        more = f" and {len(removed) - SHOWN_REMOVED} more" if len(removed) > SHOWN_REMOVED else ""
        line = text_svg(MARGIN, y, f"✕ removed since the baseline: {named}{more}", fill=REMOVED)
        body.append(f'<g class="removed" data-count="{len(removed)}">{line}</g>')
        y += ROW - 2
    note = f"hover a box for base → now; colour: inclusive change of {metric_title(metric)} against the baseline"
    if hidden:
        note += f"; {hidden} narrow layers not drawn"
    body.append(text_svg(MARGIN, y, note, fill="#666", size=11))
    height = y + MARGIN
    return svg_document(body, height, title)


def render_html(baseline: Report, report: Report, *, metric: Metric = FLOPS, title: str = "", name: str = "") -> str:
    """`render_svg` inline in the icicle's HTML page, which may load and run nothing."""
    svg = render_svg(baseline, report, metric=metric, title=title, name=name)
    return html_page(svg, title or report.model or ROOT_LABEL)


# -- parts ---------------------------------------------------------------------------------------------------------


def _blend(scale: tuple[tuple[int, int, int], tuple[int, int, int]], fraction: float) -> str:
    """The colour `fraction` of the way from the scale's palest to its deepest end (at least a quarter of the way,
    so the smallest change is still told from grey)."""
    weight = 0.25 + 0.75 * fraction
    pale, deep = scale
    red, green, blue = (round(p + (d - p) * weight) for p, d in zip(pale, deep))
    return f"#{red:02x}{green:02x}{blue:02x}"


def _legend(y: int) -> str:
    """Swatches for the scale's steps, in the order of the scale."""
    entries = [
        (change_colour(100, 100 - FULL_PERCENT), f"-{FULL_PERCENT}% or less"),
        (change_colour(1000, 990), "shrank"),
        (UNCHANGED, "unchanged"),
        (change_colour(1000, 1010), "grew"),
        (change_colour(100, 100 + FULL_PERCENT), f"+{FULL_PERCENT}% or more"),
        (NEW, "new"),
    ]
    parts = ['<g class="legend">']
    x = MARGIN
    for colour, label in entries:
        parts.append(f'<rect x="{x}" y="{y - 11}" width="14" height="14" fill="{colour}" data-label="{label}"/>')
        parts.append(text_svg(x + 18, y, label, fill="#444", size=11))
        x += 18 + len(label) * 7 + 16
    parts.append(text_svg(x, y, "✕ removed (listed below)", fill=REMOVED, size=11))
    parts.append("</g>")
    return "".join(parts)


def _tooltip(full: str, base: int | None, now: int, metric: Metric) -> str:
    if base is None:
        first = f"{full} · new · {format_value(now, metric)}"
    else:
        shown_base, shown_now = format_pair(base, now, metric)
        first = f"{full} · {shown_base} → {shown_now} ({format_percent(now - base, base)})"
    second = f"{base if base is not None else 0:,} → {now:,} {metric_title(metric)} (inclusive of children)"
    return f"{xml_text(first)}&#10;{xml_text(second)}"
