"""An explanation as the HTML a notebook shows (`Explanation._repr_html_`): both totals, the itemised difference
as a table, and what each reason means; the text `flopbudget explain` prints (`explain/text.py`), its rows in
`<td>`s, in the fragment a Report's HTML uses (`render/notebook.py`: no script, every op and layer name escaped,
the table capped)."""

from __future__ import annotations

from pytest_flopbudget._explain.items import Explanation
from pytest_flopbudget._explain.text import NO_DIFFERENCE, heading, item_table, reason_lines, total_lines
from pytest_flopbudget._render.notebook import fragment, html_table, text_block


def explanation_html(explanation: Explanation) -> str:
    """The totals, the table by reason and op (its total row last), then the reasons' meanings."""
    parts = [text_block(total_lines(explanation))]
    if explanation.items:
        headings, *rows = item_table(explanation)
        parts += [html_table(headings, rows, kind="items"), text_block(reason_lines(explanation))]
    else:
        parts.append(text_block([NO_DIFFERENCE]))
    return fragment(heading(explanation), parts, kind="explanation")
