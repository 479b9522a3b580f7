"""A `Formula` drawn: cost against one dim, log-log, one line for the model and one per top-level layer
(`flopbudget count --dim seq=64..8192 --format svg|html`).

On log-log axes a term `c * seq**k` is a straight line of slope k: a layer whose line is steeper than the others
grows faster, which is what a curve is for. The other dims sit at the entry's point. Safe like the flame picture:
every name is escaped (`render.flame.xml_text`), and the page loads nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pytest_flopbudget.metrics import FLOPS, Metric
from pytest_flopbudget.render.flame import CSP, xml_text
from pytest_flopbudget.report import truncate_path

from .formula import Formula
from .polynomial import Polynomial

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 210, 40, 50
#: The most lines drawn: the model and its largest top-level layers at the top of the range.
MAX_LINES = 8
SAMPLES = 48
COLOURS = ("#222222", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def render_svg(formula: Formula, *, metric: Metric = FLOPS, title: str = "") -> str:
    dim = formula.dims[0]
    low, high = formula.holds.ranges[dim]
    step = formula.holds.step.get(dim, 1)
    sizes = _sizes(low, high, step)
    lines = _lines(formula, metric)
    point = dict(formula.point)
    values = {name: [(x, float(poly.at({**point, dim: x}))) for x in sizes] for name, poly in lines}
    positive = [v for series in values.values() for _, v in series if v > 0]
    if not positive or high <= low:
        y_low, y_high = 1.0, 10.0
    else:
        y_low, y_high = min(positive), max(positive)
        if y_high <= y_low:
            y_low, y_high = y_low / 10, y_high * 10
    x_of = _scale(low, high, LEFT, WIDTH - RIGHT)
    y_of = _scale(y_low, y_high, HEIGHT - BOTTOM, TOP)
    others = ", ".join(f"{d}={point[d]}" for d in formula.dims[1:] if d in point)
    heading = f"{title}: {metric.label} against {dim}" + (f" ({others})" if others else "")
    body = [
        f'<text x="{LEFT}" y="22" class="title">{xml_text(heading)}</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 12}" class="note">{xml_text(formula.holds.describe())}; log-log</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" class="frame"/>',
    ]
    for x in sorted({low, high, *(d for d in _decades(low, high) if 1.5 * low < d < high / 1.5)}):
        body.append(f'<text x="{x_of(x):.1f}" y="{HEIGHT - BOTTOM + 16}" class="tick">{x:g}</text>')
    for y in _decades(y_low, y_high):
        label = xml_text(metric.format_value(int(y), digits=2))
        body.append(f'<text x="{LEFT - 6}" y="{y_of(y):.1f}" class="ytick">{label}</text>')
    for i, (name, _) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x_of(x):.1f},{y_of(v):.1f}" for x, v in values[name] if v > 0)
        if points:
            body.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        legend_y = TOP + 14 + 16 * i
        body.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>')
        body.append(f'<text x="{WIDTH - RIGHT + 28}" y="{legend_y}" class="legend">{xml_text(name[:24])}</text>')
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}">'
    )
    # a style element applies to the whole page it is in: scoped to this picture, so that the icicle drawn beside it
    # (`count --format html` of a curve model, the pictures page) keeps its own font sizes
    style = (
        ".curve text{font-family:monospace;font-size:11px;fill:#222}.curve .title{font-size:13px}"
        ".curve .note{fill:#555}.curve .tick{text-anchor:middle}.curve .ytick{text-anchor:end}"
        ".curve .frame{fill:none;stroke:#999}"
    )
    parts = [head, f"<title>{xml_text(heading)}</title>", f"<style>{style}</style>",
             f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>', *body, "</svg>"]  # fmt: skip
    return "\n".join(parts) + "\n"


def render_html(formula: Formula, *, metric: Metric = FLOPS, title: str = "") -> str:
    """`render_svg` in a minimal page that loads nothing."""
    svg = render_svg(formula, metric=metric, title=title).rstrip("\n")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>flopbudget: {xml_text(title)}</title>",
        "<style>body{margin:16px;background:#fff}svg{max-width:100%;height:auto}</style>",
        "</head>", "<body>", svg, "</body>", "</html>",
    ]) + "\n"  # fmt: skip


def _lines(formula: Formula, metric: Metric) -> list[tuple[str, Polynomial]]:
    """The model, then its top-level layers that cost something, the largest at the top of the range first."""
    dim = formula.dims[0]
    top = {**formula.point, dim: formula.holds.ranges[dim][1]}
    layers = dict.fromkeys(truncate_path(path, 1) for path in formula.layers if path)
    polys = [(path, formula.inclusive(path, metric)) for path in layers]
    polys = sorted((item for item in polys if item[1].terms), key=lambda item: -item[1].at(top))
    return [("(model)", formula.total(metric)), *polys[: MAX_LINES - 1]]


def _sizes(low: int, high: int, step: int) -> list[int]:
    """About `SAMPLES` sizes spread evenly on a log scale, each a multiple of `step` (where the formula holds)."""
    first = -(-low // step) * step
    if first > high:
        return [low, high]
    sizes = {first, high - high % step}
    ratio = (high / first) ** (1 / SAMPLES)
    value = float(first)
    for _ in range(SAMPLES):
        value *= ratio
        sizes.add(max(first, min(high, round(value / step) * step)))
    return sorted(s for s in sizes if low <= s <= high)


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    low_log, high_log = math.log10(max(low, 1e-300)), math.log10(max(high, 1e-300))
    span = (high_log - low_log) or 1.0

    def place(value: float) -> float:
        return start + (math.log10(max(value, 1e-300)) - low_log) / span * (end - start)

    return place


def _decades(low: float, high: float) -> list[float]:
    """Powers of ten within [low, high] (both ends when none falls between)."""
    first, last = math.ceil(math.log10(max(low, 1e-300))), math.floor(math.log10(max(high, 1e-300)))
    decades = [10.0**k for k in range(first, last + 1)][:12]
    return decades or [low, high]
