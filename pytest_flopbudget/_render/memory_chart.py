"""`flopbudget count --metric peak-memory --format svg|html`: live tensor bytes over the counted call, as a step
chart, with the peak and its layer marked.

A peak is not a sum over layers, so an icicle of "peak memory per layer" would be a made-up figure. What explains a
peak is the curve it tops: the live bytes after each op, in call order (forward, then the backward of a training
count), like PyTorch's memory visualizer's timeline. Under the curve, a band shows which top-level module ran each
op, so the climb to the peak can be read against the model's structure; a pyproject model's `peak-memory` budget is
a horizontal line.

The curve is the counter's own (`Report.memory_timeline`, kept by `counting/torch/peak_memory.py`): its highest
sample is the reported peak. Where there are more ops than pixels, each pixel column shows the highest sample it
covers, so the peak is always drawn at its height. The same promises as the icicle (`flame.py`) hold: one
self-contained SVG (or an HTML page around it), the same bytes for the same Report, every name escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._metrics import PEAK_MEMORY
from pytest_flopbudget._render.flame import (
    FONT,
    MARGIN,
    WIDTH,
    fit_label,
    html_page,
    svg_document,
    text_svg,
    xml_text,
)
from pytest_flopbudget._render.flame import name_colour as colour
from pytest_flopbudget._render.formatting import ROOT_LABEL, format_percent, layer_label
from pytest_flopbudget._report import ROOT, MemoryTimeline, Report

#: The plot's left edge leaves room for the axis labels (`1023 MiB`); its width and height in pixels.
LEFT = MARGIN + 80
PLOT = WIDTH - MARGIN - LEFT
HEIGHT = 240
BAND = 20
#: Horizontal grid lines: at 0, a quarter, a half, three quarters and the top of the scale.
GRID = 4

_STYLE = "g.band:hover rect{stroke:#000;stroke-width:1.5}g.band text{pointer-events:none}"


def render_svg(report: Report, *, title: str = "", budget: Budget | None = None) -> str:
    """The chart as a standalone SVG document (UTF-8 text ending in a newline); `budget`'s `peak-memory` ceiling,
    if it has one, is drawn as a line. Raises `ValueError` for a report without a timeline (peak memory not
    measured, or a report read back from JSON, which keeps only the peak)."""
    timeline = report.memory_timeline
    if not report.measures(PEAK_MEMORY) or timeline is None or not timeline.live:
        raise ValueError("this report has no timeline of live bytes: peak memory was not measured in this process")
    title = title or report.model or ROOT_LABEL
    live = timeline.live
    peak_at = max(range(len(live)), key=lambda index: (live[index], -index))  # the first sample at the peak
    peak = live[peak_at]
    limit = budget.limit(PEAK_MEMORY) if budget is not None else None
    top = max(peak, limit.value if limit is not None else 0, 1)

    body: list[str] = []
    y = MARGIN + 16
    body.append(text_svg(MARGIN, y, title, size=15, weight="bold"))
    y += 20
    ops = len(live) - 1
    phase = "backward" if timeline.backward is not None and peak_at >= timeline.backward else "forward"
    where = "before the first op" if peak_at == 0 else f"after op {peak_at} of {ops}, in the {phase}"
    summary = f"peak memory {_bytes(peak)} at {layer_label(timeline.layer_at(peak_at))} ({where})"
    body.append(text_svg(MARGIN, y, summary, weight="bold"))
    if limit is not None:
        y += 18
        over = peak > limit.value
        verdict = f"over by {format_percent(peak - limit.value, limit.value)}" if over else "within"
        line = f"budget {_bytes(limit.value)}: {verdict}"
        body.append(text_svg(MARGIN, y, line, fill="#d62728" if over else "#2ca02c"))
    y += 18
    body.append(
        text_svg(MARGIN, y, "live tensor bytes after each op, in call order; ops counted in fake mode", fill="#444")
    )
    plot_top = y + 30  # room above the plot for the peak's label
    base = plot_top + HEIGHT
    body.extend(_grid(plot_top, top))
    body.append(_curve(live, plot_top, top))
    if timeline.backward is not None:
        body.append(_backward(timeline.backward, len(live), plot_top))
    if limit is not None:
        body.append(_budget_line(limit.value, peak, plot_top, top))
    body.append(_peak_marker(peak_at, len(live), peak, plot_top, top, timeline))
    body.extend(_bands(timeline, len(live), base + 6))
    y = base + 6 + BAND + 4 + FONT
    body.append(text_svg(LEFT, y, f"op 0 (the inputs, parameters and buffers) to op {ops}", fill="#666", size=11))
    for note in (
        "in: parameters, buffers, inputs and activations (a training count: saved activations and gradients)",
        "out: optimizer state, the allocator's rounding and cache, kernels' workspaces, the CUDA context",
    ):
        y += 15
        body.append(text_svg(MARGIN, y, note, fill="#666", size=11))
    return svg_document(body, y + MARGIN, title, style=_STYLE)


def render_html(report: Report, *, title: str = "", budget: Budget | None = None) -> str:
    """`render_svg` inline in a minimal HTML page that may load nothing."""
    return html_page(render_svg(report, title=title, budget=budget), title or report.model or ROOT_LABEL)


def columns(live: Sequence[int], width: int = PLOT) -> list[tuple[int, int, int]]:
    """The curve as at most `width` columns `(first sample, end sample, highest value among them)`: one per sample
    when they fit, else samples shared out evenly, each column drawn at its highest sample."""
    count = len(live)
    shown = min(count, width)
    found = []
    for column in range(shown):
        start, end = column * count // shown, (column + 1) * count // shown
        found.append((start, end, max(live[start:end])))
    return found


# -- parts ---------------------------------------------------------------------------------------------------------


def _x(sample: int, samples: int) -> int:
    """The left edge of sample `sample` of `samples`, in hundredths of a pixel, exactly (rounded half up)."""
    return LEFT * 100 + (2 * PLOT * 100 * sample + samples) // (2 * samples)


def _y(value: int, plot_top: int, top: int) -> int:
    """The height of `value` on a scale of 0..`top`, in hundredths of a pixel from the SVG's top edge."""
    return (plot_top + HEIGHT) * 100 - (2 * HEIGHT * 100 * value + top) // (2 * top)


def _px(hundredths: int) -> str:
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def _bytes(value: int) -> str:
    return PEAK_MEMORY.format_value(value)


def _grid(plot_top: int, top: int) -> list[str]:
    parts = []
    for step in range(GRID + 1):
        value = top * step // GRID
        y = _px(_y(value, plot_top, top))
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{LEFT + PLOT}" y2="{y}" stroke="#e0e0e0"/>'
            + f'<text x="{LEFT - 6}" y="{y}" dy="4" text-anchor="end" font-size="11" fill="#666">'
            + f"{xml_text(_bytes(value))}</text>"
        )
    return parts


def _curve(live: Sequence[int], plot_top: int, top: int) -> str:
    """The step curve, filled below: one horizontal run per column at its highest sample."""
    base = _y(0, plot_top, top)
    steps = [f"M{_px(_x(0, len(live)))} {_px(base)}"]
    for _, end, value in columns(live):
        steps.append(f"V{_px(_y(value, plot_top, top))}H{_px(_x(end, len(live)))}")
    steps.append(f"V{_px(base)}Z")
    return f'<path class="live" d="{"".join(steps)}" fill="#9ecae1" stroke="#3182bd" stroke-width="1"/>'


def _backward(index: int, samples: int, plot_top: int) -> str:
    x = _px(_x(index, samples))
    return (
        f'<g class="backward"><line x1="{x}" y1="{plot_top}" x2="{x}" y2="{plot_top + HEIGHT}" stroke="#888" '
        f'stroke-dasharray="4 3"/>{_text_at(x, plot_top + 12, "backward", fill="#666", size=11, pad=4)}</g>'
    )


def _budget_line(limit: int, peak: int, plot_top: int, top: int) -> str:
    y = _px(_y(limit, plot_top, top))
    colour = "#d62728" if peak > limit else "#2ca02c"
    label = xml_text(f"budget {_bytes(limit)}")
    return (
        f'<g class="budget" data-metric="{PEAK_MEMORY}" data-over="{str(peak > limit).lower()}">'
        f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + PLOT}" y2="{y}" stroke="{colour}" stroke-dasharray="6 4"/>'
        f'<text x="{LEFT + PLOT - 4}" y="{y}" dy="-4" text-anchor="end" font-size="11" fill="{colour}">{label}</text>'
        "</g>"
    )


def _peak_marker(index: int, samples: int, peak: int, plot_top: int, top: int, timeline: MemoryTimeline) -> str:
    """A red line and dot at the peak's sample, labelled with its bytes and layer (to the left near the right edge)."""
    centre = (_x(index, samples) + _x(index + 1, samples)) // 2
    x, y = _px(centre), _px(_y(peak, plot_top, top))
    layer = timeline.layer_at(index)
    label = f"peak {_bytes(peak)} at {layer_label(layer)}"
    right_side = centre < (LEFT + PLOT // 2) * 100
    anchor = "start" if right_side else "end"
    shift = 6 if right_side else -6
    return (
        f'<g class="peak" data-bytes="{peak}" data-op="{index}" data-layer="{xml_text(layer)}">'
        f'<line x1="{x}" y1="{y}" x2="{x}" y2="{plot_top + HEIGHT}" stroke="#d62728"/>'
        f'<circle cx="{x}" cy="{y}" r="3.5" fill="#d62728"/>'
        f'<text x="{x}" y="{y}" dx="{shift}" dy="-6" text-anchor="{anchor}" font-size="11" fill="#d62728">'
        f"{xml_text(label)}</text></g>"
    )


def _bands(timeline: MemoryTimeline, samples: int, y: int) -> list[str]:
    """A box per run of ops in one top-level module (the model's own ops are grey), as wide as the run."""
    runs: list[tuple[int, int, str]] = []
    for position, (start, path) in enumerate(timeline.layers):
        end = timeline.layers[position + 1][0] if position + 1 < len(timeline.layers) else samples
        name = path.split(".", 1)[0] if path else ROOT
        if runs and runs[-1][2] == name:
            runs[-1] = (runs[-1][0], end, name)
        else:
            runs.append((start, end, name))
    parts = []
    for start, end, name in runs:
        left, right = _x(start, samples), _x(end, samples)
        if right - left < 50:  # narrower than half a pixel: its ops are still in the curve
            continue
        shown = layer_label(name)
        label = fit_label([shown], right - left)
        fill = colour(name, name)  # the icicle's colour for the same module (the model's own ops grey)
        text = f'<text x="{_px(left + 300)}" y="{y + 14}">{xml_text(label)}</text>' if label else ""
        parts.append(
            f'<g class="band" data-path="{xml_text(name)}" data-start="{start}" data-end="{end}">'
            f"<title>{xml_text(f'{shown}: ops {start} to {end - 1}')}</title>"
            f'<rect x="{_px(left)}" y="{y}" width="{_px(right - left)}" height="{BAND - 1}" fill="{fill}"/>{text}</g>'
        )
    return parts


def _text_at(x: str, y: int, text: str, *, fill: str, size: int, pad: int) -> str:
    return f'<text x="{x}" y="{y}" dx="{pad}" font-size="{size}" fill="{fill}">{xml_text(text)}</text>'
