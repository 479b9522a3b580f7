"""The lines `--convention NAME` adds under a count: the figure under each convention next to the exact one, and
the itemised difference (one line per part of the count and reason), which sums exactly to ours - theirs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_flopbudget._explain.items import REASONS, Explanation
from pytest_flopbudget._explain.text import item_table
from pytest_flopbudget._render.formatting import format_count


def conventions_text(explanations: Sequence[Explanation], tokens: int | None = None) -> str:
    """One block per convention; with `tokens`, each total per token as well."""
    return "".join(convention_text(explanation, tokens) for explanation in explanations)


def convention_text(explanation: Explanation, tokens: int | None = None) -> str:
    def per_token(value: int) -> str:
        return f"  ({value / tokens:,.6g} per token)" if tokens else ""

    # a peer that counts multiply-accumulates (fvcore, ptflops, thop) reports MACs, which it calls flops
    unit = "MACs" if explanation.unit == "macs" else "FLOPs"
    lines = [
        f"under the {explanation.peer} convention ({explanation.title}), {explanation.version}:",
        f"  exact          {explanation.ours:>22,} FLOPs  ({format_count(explanation.ours, 'FLOPs')})"
        f"{per_token(explanation.ours)}",
        f"  {explanation.peer:<14} {explanation.theirs:>22,} {unit:<5}  ({format_count(explanation.theirs, unit)})"
        f"{per_token(explanation.theirs)}",
        f"  exact - {explanation.peer}  {explanation.difference:+,}",
    ]
    if explanation.items:
        rows: list[tuple[str, ...]] = [("reason", "part", "exact", explanation.peer, "difference")]
        if any(item.layer is not None for item in explanation.items):  # a peer's: per layer, summed by reason and op
            rows += item_table(explanation)[1:-1]
        else:  # a stack's: one item per part of the count
            rows += [
                (item.reason, item.op or "", f"{item.ours:,}", f"{item.theirs:,}", f"{item.difference:+,}")
                for item in explanation.items
            ]
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for index, row in enumerate(rows):
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            cells += [cell.rjust(width) for cell, width in zip(row[2:], widths[2:])]
            lines.append("    " + "  ".join(cells).rstrip())
            if index == 0:
                lines.append("    " + "  ".join("-" * width for width in widths))
        for reason in explanation.by_reason():
            lines.append(f"    {reason}: {REASONS.get(reason, '').replace('the peer', explanation.peer)}")
    lines.extend(f"    note: {note}" for note in explanation.notes)
    return "\n".join(lines) + "\n\n"


def conventions_data(explanations: Sequence[Explanation]) -> dict[str, Any]:
    """`under_conventions` of a JSON document: each convention's explanation (ours, theirs, items), by name."""
    data = {}
    for explanation in explanations:
        entry = explanation.to_dict()
        entry.pop("format", None)
        entry["source"] = _source(explanation.peer)
        data[explanation.peer] = entry
    return data


def _source(name: str) -> str:
    from pytest_flopbudget._conventions.registry import profile_named

    return profile_named(name).source
