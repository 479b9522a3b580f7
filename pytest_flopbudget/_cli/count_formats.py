"""`flopbudget count --format`: one table of the formats a counted model is drawn in, each a registered renderer.

A format gets the whole count (`Counted`: the Report, with the formula where `--dim` gave a range, the roofline
with `--hardware`) and returns the text to print, ending in a newline. `FORMATS` is the table the command's
`--format` choices and its checks read; adding a format is one decorated function here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_flopbudget._metrics import FLOPS, PEAK_MEMORY, Metric
from pytest_flopbudget._safe_text import json_safe

if TYPE_CHECKING:
    from pytest_flopbudget._config.pyproject import ModelEntry
    from pytest_flopbudget._curve.formula import Formula
    from pytest_flopbudget._explain.items import Explanation
    from pytest_flopbudget._render.roofline_report import Roofline
    from pytest_flopbudget._report import Report


@dataclass(frozen=True)
class Counted:
    """One model as `flopbudget count` counted it, and how it was asked to show it."""

    report: Report
    entry: ModelEntry
    #: Every metric's formula of the named dims (`--dim NAME=LOW..HIGH`), None for a count at a point.
    formula: Formula | None = None
    roofline: Roofline | None = None
    depth: int | None = 2
    #: What the boxes of a picture show (flops by default).
    metric: Metric | None = None
    #: `--convention NAME`: the count under each named convention (`_conventions/`), itemised.
    conventions: tuple[Explanation, ...] = ()

    @property
    def title(self) -> str:
        from pytest_flopbudget._cli.inputs import describe_inputs

        mode = "training step (forward + backward)" if self.report.training else "inference"
        return f"{self.entry.name}: {describe_inputs(self.report.inputs)}; {mode}"


@dataclass(frozen=True)
class CountFormat:
    """A `--format` of `flopbudget count`: its renderer, and whether it draws a picture (which takes `--metric`
    and refuses `--hardware`)."""

    name: str
    render: Callable[[Counted], str]
    picture: bool = False


#: Every `--format` by name, in the order `--help` lists them.
FORMATS: dict[str, CountFormat] = {}


def count_format(name: str, *, picture: bool = False) -> Callable[[Callable[[Counted], str]], Callable[[Counted], str]]:
    """Register the decorated function as the renderer of `--format name`."""

    def register(render: Callable[[Counted], str]) -> Callable[[Counted], str]:
        FORMATS[name] = CountFormat(name, render, picture)
        return render

    return register


@count_format("table")
def table(counted: Counted) -> str:
    """The per-layer table; under it a generation's decode step as formulas of the context length, or with a
    range every metric's formula."""
    from pytest_flopbudget._render.table import format_layer_table

    report = counted.report
    text = format_layer_table(report, depth=counted.depth, title=counted.title, roofline=counted.roofline) + "\n"
    if report.phases:
        from pytest_flopbudget._curve.decode_step import decode_formula
        from pytest_flopbudget._curve.text import decode_formula_text

        decode = decode_formula(report)
        if decode is not None:
            text += "\n" + decode_formula_text(decode) + "\n"
    if counted.formula is not None:
        from pytest_flopbudget._curve.text import formula_text

        text += formula_text(counted.formula, depth=counted.depth) + "\n"
    if counted.conventions:
        from pytest_flopbudget._conventions.text import conventions_text

        text += "\n" + conventions_text(counted.conventions).rstrip("\n") + "\n"
    return text


@count_format("json")
def json_document(counted: Counted) -> str:
    """The Report's JSON with its derived figures (`render/count_json.py`), plus a generation's
    `"decode_formula"` or a range's `"formula"` and `"curve"`: built as one dict, dumped once."""
    from pytest_flopbudget._render.count_json import count_data

    data: dict[str, Any] = count_data(counted.report, counted.roofline)
    if counted.formula is not None:
        data.update(counted.formula.to_dict())
    elif counted.report.phases:
        from pytest_flopbudget._curve.decode_step import decode_formula

        decode = decode_formula(counted.report)
        if decode is not None:
            data["decode_formula"] = decode.to_dict()
    if counted.conventions:  # not `conventions`: the Report's own key says how it counts, and must read back
        from pytest_flopbudget._conventions.text import conventions_data

        data["under_conventions"] = conventions_data(counted.conventions)
    return json_safe(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=True) + "\n")


@count_format("svg", picture=True)
def svg(counted: Counted) -> str:
    """The icicle (or the memory chart), with a range's curves stacked under it."""
    at_point = _at_point(counted, html=False)
    if counted.formula is None:
        return at_point
    from pytest_flopbudget._render.flame import stack_svg

    return stack_svg([at_point, _curve(counted, counted.formula)])


@count_format("html", picture=True)
def html(counted: Counted) -> str:
    """`svg`'s pictures on one page."""
    if counted.formula is None:
        return _at_point(counted, html=True)
    from pytest_flopbudget._render.flame import html_page

    return html_page(_at_point(counted, html=False) + _curve(counted, counted.formula), counted.entry.name)


def _at_point(counted: Counted, *, html: bool) -> str:
    entry = counted.entry
    if counted.metric == PEAK_MEMORY:
        from pytest_flopbudget._render import memory_chart

        chart = memory_chart.render_html if html else memory_chart.render_svg
        return chart(counted.report, title=counted.title, budget=entry.budget)
    from pytest_flopbudget._render import flame

    draw = flame.render_html if html else flame.render_svg
    metric = counted.metric or FLOPS
    return draw(counted.report, metric=metric, title=counted.title, name=entry.name, budget=entry.budget)


def _curve(counted: Counted, formula: Formula) -> str:
    from pytest_flopbudget._curve import picture

    return picture.render_svg(formula, metric=counted.metric or FLOPS, title=counted.entry.name)


#: The formats that draw a picture.
PICTURES = tuple(name for name, spec in FORMATS.items() if spec.picture)
