"""A curve's formula as the HTML a notebook shows (`Formula._repr_html_`): the lines `flopbudget count` prints for
it (`curve/text.py`) and its log-log picture (`curve/picture.py`) inline, in the fragment a Report's HTML uses
(`render/notebook.py`: no script, every layer name escaped, the lines capped)."""

from __future__ import annotations

from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.picture import render_svg
from pytest_flopbudget._curve.text import formula_text
from pytest_flopbudget._render.formatting import ROOT_LABEL
from pytest_flopbudget._render.notebook import fragment, text_block


def formula_html(formula: Formula) -> str:
    """The formulas in total and per layer (depth 2, FLOPs), then FLOPs against the first dim, log-log."""
    lines = formula_text(formula, depth=2).splitlines()
    parts = [text_block(lines[1:]), render_svg(formula, title=ROOT_LABEL).rstrip("\n")]
    return fragment(lines[0], parts, kind="curve")
