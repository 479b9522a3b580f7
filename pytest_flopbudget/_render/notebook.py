"""A Report as the HTML a Jupyter notebook shows inline (`Report._repr_html_`), and the parts an explanation's and a
curve's HTML share with it (`_explain/notebook.py`, `_curve/notebook.py`).

Jupyter puts the fragment `_repr_html_` returns into its page, so it is a `<div>`, not a page, and it keeps the
promises the pictures keep (`render/flame.py`), each tested by rendering it in headless Chromium:

* **self-contained**: no script, no external font, stylesheet or image; the pictures are inline SVG, the styling one
  `<style>` scoped to the fragment's class, so a notebook saved with its outputs shows them offline;
* **safe**: every name from a model (layer and op names) passes `flame.xml_text`, so `<script>` in a layer's name
  is text, not markup;
* **bounded**: a table shows at most `MAX_ROWS` rows, at the depth `print(report)` prints (2), and says how many
  it left out; the icicle draws only boxes wide enough to see (`flame.MIN_WIDTH`), so a model of 100,000 layers
  gives a page a browser opens;
* **the same figures**: the cells are `table.layer_table`'s, the lines under them its notes, the icicle
  `flame.render_svg`'s: nothing here formats a figure.

It reads the Report only, so a count from any backend displays, and no framework is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_flopbudget._render.flame import render_svg, xml_text
from pytest_flopbudget._render.formatting import plural
from pytest_flopbudget._render.table import layer_table, report_title
from pytest_flopbudget._report import Report

#: The most rows a table shows; `report.table()` (or `flopbudget count`) prints them all.
MAX_ROWS = 200
#: The class every fragment's `<div>` carries, which scopes its style to it.
CLASS = "flopbudget"
#: Monospace figures, right-aligned after the first column; wide pictures shrink to the output's width.
STYLE = "".join(
    f".{CLASS} {rule}"
    for rule in (
        "{font-family:monospace;font-size:12px;color:#222;background:#fff}",
        "table{border-collapse:collapse;margin:4px 0}",
        "th,.flopbudget td{padding:1px 8px;text-align:right;white-space:pre;font-family:monospace}",
        "th:first-child,.flopbudget td:first-child{text-align:left}",
        "thead th{border-bottom:1px solid #999}",
        # the explanation's op (or layer) column is text, as the reason before it
        "table.items td:nth-child(2),.flopbudget table.items th:nth-child(2){text-align:left}",
        "pre{margin:4px 0;white-space:pre;overflow-x:auto}",
        "svg{max-width:100%;height:auto}",
    )
)


def report_html(report: Report) -> str:
    """The layer table at depth 2 (as `print(report)`), the lines under it, then the icicle of FLOPs."""
    table = layer_table(report, depth=2)
    headings = ["layer", *(heading for heading, _ in table.columns)]
    rows = [[row.label, *row.cells] for row in table.rows]
    parts = [
        html_table(headings, rows, kind="layers", hint="report.table() prints them all"),
        text_block(table.notes),
        render_svg(report).rstrip("\n"),
    ]
    return fragment(report_title(report), parts, kind="report")


def fragment(title: str, parts: Sequence[str], kind: str) -> str:
    """`parts` (already HTML) under a bold `title`, in one `<div class="flopbudget {kind}">` with its style."""
    return "\n".join(
        [
            f'<div class="{CLASS} {kind}">',
            f"<style>{STYLE}</style>",
            f"<p><strong>{xml_text(title)}</strong></p>",
            *parts,
            "</div>",
        ]
    )


def html_table(
    headings: Sequence[str], rows: Sequence[Sequence[str]], kind: str, limit: int = MAX_ROWS, hint: str = ""
) -> str:
    """A `<table class="{kind}">` of text cells, escaped; past `limit` rows, one last row says how many were left
    out, and `hint` where to see them all."""
    lines = [f'<table class="{kind}">', "<thead><tr>" + "".join(f"<th>{xml_text(h)}</th>" for h in headings)]
    lines.append("</tr></thead><tbody>")
    lines.extend("<tr>" + "".join(f"<td>{xml_text(cell)}</td>" for cell in row) + "</tr>" for row in rows[:limit])
    if len(rows) > limit:
        more = f"… {plural(len(rows) - limit, 'more row')} not shown" + (f" ({hint})" if hint else "")
        lines.append(f'<tr class="more"><td colspan="{len(headings)}">{xml_text(more)}</td></tr>')
    lines.append("</tbody></table>")
    return "\n".join(lines)


def text_block(lines: Sequence[str], limit: int = MAX_ROWS) -> str:
    """Lines of text as they are printed, in a `<pre>`, each escaped; past `limit`, one line says how many were
    left out."""
    shown = [xml_text(line) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(xml_text(f"… {plural(len(lines) - limit, 'more line')} not shown"))
    return "<pre>" + "\n".join(shown) + "</pre>"
