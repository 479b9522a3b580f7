"""A `Formula` drawn: cost against one dim, log-log, one line for the model and one per top-level layer
(`flopbudget count --dim seq=64..8192 --format svg|html`).

On log-log axes a term `c * seq**k` is a straight line of slope k: a layer whose line is steeper than the others
grows faster, which is what a curve is for. The other dims sit at the entry's point. Safe like the flame picture:
every name is escaped (`render.flame.xml_text`), and the page loads nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.polynomial import Exponents, Polynomial, render
from pytest_flopbudget._metrics import FLOPS, Metric
from pytest_flopbudget._render.flame import CSP, xml_text
from pytest_flopbudget._render.formatting import format_pair, format_percent
from pytest_flopbudget._report import truncate_path

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 210, 40, 50
#: The most lines drawn: the model and its largest top-level layers at the top of the range.
MAX_LINES = 8
SAMPLES = 48
#: How much lower the plot of `render_change_svg` sits, under its two lines of what changed.
LIFT = 32
#: A changed term's line: (grew, shrank) pairs, as many terms as are drawn.
CHANGE_COLOURS = (("#d62728", "#1f77b4"), ("#ff7f0e", "#17becf"), ("#e377c2", "#2ca02c"), ("#8c564b", "#9467bd"))
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
    return _document(body, HEIGHT, heading)


def _document(body: list[str], height: int, heading: str) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">'
    )
    # a style element applies to the whole page it is in: scoped to this picture, so that the icicle drawn beside it
    # (`count --format html` of a curve model, the pictures page) keeps its own font sizes
    style = (
        ".curve text{font-family:monospace;font-size:11px;fill:#222}.curve .title{font-size:13px}"
        ".curve .note{fill:#555}.curve .tick{text-anchor:middle}.curve .ytick{text-anchor:end}"
        ".curve .frame{fill:none;stroke:#999}.curve .degree{font-weight:bold;fill:#b2182b}"
    )
    parts = [head, f"<title>{xml_text(heading)}</title>", f"<style>{style}</style>",
             f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>', *body, "</svg>"]  # fmt: skip
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class TermLine:
    """One term of the model's formula that changed: its exponents, its coefficient before and after."""

    exponents: Exponents
    base: Fraction
    now: Fraction

    def label(self, dims: tuple[str, ...]) -> str:
        """`+852*seq**2 (new, degree 2)`, `-4*seq (-0.11%)`, `-3 (removed)`: the change, signed."""
        delta = self.now - self.base
        text = render(Polynomial(dims, {self.exponents: delta}))
        text = text if text.startswith("-") else "+" + text
        if not self.base:
            how = f"new, degree {sum(self.exponents)}"
        elif not self.now:
            how = "removed"
        else:
            how = f"{100 * float(delta / self.base):+.2g}%"
        return f"{text} ({how})"


def changed_terms(base: Formula, now: Formula, metric: Metric) -> list[TermLine]:
    """The terms of the model's formula for `metric` whose coefficient changed, the highest degree first."""
    old, new = base.total(metric), now.total(metric)
    exponents = sorted({*old.terms, *new.terms}, key=lambda exps: (-sum(exps), tuple(-e for e in exps)))
    return [TermLine(e, old.term(e), new.term(e)) for e in exponents if old.term(e) != new.term(e)]


def render_change_svg(
    base: Formula, now: Formula, *, metric: Metric = FLOPS, title: str = "", notes: Sequence[str] = ()
) -> str:
    """The model's formula base vs now against the first dim, log-log (the other dims at the point): the base
    dashed, now solid, and each term that changed as a line of its own (its size, `|now - base| * seq**k`), red
    where it grew and blue where it shrank, so that a new `seq**2` term worth 0.1% at the point shows as the
    steeper line it is. Above the plot: the degree in the dim base → now and the model at the point and at the
    range's end; under it, `notes` (which layers carry the change: `judge.formula_diff`). The two formulas are
    in the same dims (`reporters.curve_lines.changed_curves`)."""
    dim = now.dims[0]
    low, high = now.holds.ranges[dim]
    sizes = _sizes(low, high, now.holds.step.get(dim, 1))
    point = dict(now.point)
    terms = changed_terms(base, now, metric)
    shown = terms[: len(CHANGE_COLOURS)]
    series: list[tuple[str, str, str, Polynomial]] = [
        ("base (dashed)", "#888888", ' stroke-dasharray="6 4"', base.total(metric)),
        ("now", "#222222", "", now.total(metric)),
    ]
    for i, term in enumerate(shown):
        colour = CHANGE_COLOURS[i][0 if term.now > term.base else 1]
        series.append(
            (term.label(now.dims), colour, "", Polynomial(now.dims, {term.exponents: abs(term.now - term.base)}))
        )
    values = [[(x, float(poly.at({**point, dim: x}))) for x in sizes] for _, _, _, poly in series]
    positive = [v for line in values for _, v in line if v > 0]
    y_low, y_high = (min(positive), max(positive)) if positive and high > low else (1.0, 10.0)
    if y_high <= y_low:
        y_low, y_high = y_low / 10, y_high * 10
    # the plot sits `LIFT` pixels lower than the count's picture: two lines of what changed head it
    top, bottom = TOP + LIFT, HEIGHT - BOTTOM + LIFT
    x_of = _scale(low, high, LEFT, WIDTH - RIGHT)
    y_of = _scale(y_low, y_high, bottom, top)
    others = ", ".join(f"{d}={point[d]}" for d in now.dims[1:] if d in point)
    heading = f"{title}: {metric.label} against {dim}, base vs now" + (f" ({others})" if others else "")
    was, grows = max(base.total(metric).degree(dim), 0), max(now.total(metric).degree(dim), 0)
    degree = f"degree in {dim}: base {was} → now {grows}" if was != grows else f"degree in {dim}: {grows} (unchanged)"
    at = [
        (f"{dim}={point[dim]} (the point)", {**point}) if dim in point else None,
        (f"{dim}={high}", {**point, dim: high}),
    ]
    figures = []
    for where, values_at in (item for item in at if item is not None):
        old, new = int(base.total(metric).at(values_at)), int(now.total(metric).at(values_at))
        shown_old, shown_new = format_pair(old, new, metric)
        figures.append(f"at {where}: {shown_old} → {shown_new} ({format_percent(new - old, old)})")
        if where.endswith("(the point)") and point[dim] == high:
            break
    body = [
        f'<text x="{LEFT}" y="22" class="title">{xml_text(heading)}</text>',
        f'<g class="change"><text x="{LEFT}" y="38" class="degree">{xml_text(degree)}</text>'
        f'<text x="{LEFT}" y="54">{xml_text("; ".join(figures))}</text></g>',
    ]
    body.append(f'<rect x="{LEFT}" y="{top}" width="{WIDTH - LEFT - RIGHT}" height="{bottom - top}" class="frame"/>')
    for x in sorted({low, high, *(d for d in _decades(low, high) if 1.5 * low < d < high / 1.5)}):
        body.append(f'<text x="{x_of(x):.1f}" y="{bottom + 16}" class="tick">{x:g}</text>')
    for y in _decades(y_low, y_high):
        label = xml_text(metric.format_value(int(y), digits=2))
        body.append(f'<text x="{LEFT - 6}" y="{y_of(y):.1f}" class="ytick">{label}</text>')
    for i, ((name, colour, dash, _), line) in enumerate(zip(series, values)):
        points = " ".join(f"{x_of(x):.1f},{y_of(v):.1f}" for x, v in line if v > 0)
        kind = "base" if i == 0 else "now" if i == 1 else "term"
        if points:
            body.append(
                f'<polyline class="{kind}" points="{points}" fill="none" stroke="{colour}" stroke-width="1.8"{dash}/>'
            )
        legend_y = top + 14 + 16 * i
        body.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>')
        short = name if len(name) <= 26 else name[:25] + "…"
        body.append(f'<text x="{WIDTH - RIGHT + 28}" y="{legend_y}" class="legend">{xml_text(short)}</text>')
    y = HEIGHT + LIFT - 12
    body.append(f'<text x="{LEFT}" y="{y}" class="note">{xml_text(now.holds.describe())}; log-log</text>')
    lines = [f"base: {base.total(metric)}", f"now: {now.total(metric)}", *notes]
    if len(terms) > len(shown):
        lines.append(f"and {len(terms) - len(shown)} more changed terms, not drawn")
    for text in lines:
        y += 16
        body.append(f'<text x="{LEFT}" y="{y}" class="term">{xml_text(text)}</text>')
    return _document(body, y + 14, heading)


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
