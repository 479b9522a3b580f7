"""The table `flopbudget explain` prints: both totals, then the difference by reason and op, each line the sum of
its items over the layers it names (`--per-layer`: one line per item), then what each reason means.

Figures are exact integers with thousands separators (the point is that they add up), the headline ones also
with a prefix; the peer's figures are in its own unit, and the `MACs vs FLOPs` lines carry the factor.
"""

from __future__ import annotations

from pytest_flopbudget._explain.items import REASONS, Explanation, Item
from pytest_flopbudget._render.formatting import format_count, layer_label, plural


def explanation_text(explanation: Explanation, model: str, per_layer: bool = False) -> str:
    lines = [f"{model}: {heading(explanation)}", *(f"  {line}" for line in total_lines(explanation)), ""]
    if not explanation.items:
        lines.append(f"  {NO_DIFFERENCE}")
        return "\n".join(lines) + "\n"
    table = item_table(explanation, per_layer)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for index, row in enumerate(table):
        cells = [
            row[0].ljust(widths[0]),
            row[1].ljust(widths[1]),
            *(cell.rjust(w) for cell, w in zip(row[2:], widths[2:])),
        ]
        lines.append("  " + "  ".join(cells).rstrip())
        if index == 0 or index == len(table) - 2:
            lines.append("  " + "  ".join("-" * width for width in widths))
    lines.append("")
    lines.extend(f"  {line}" for line in reason_lines(explanation))
    return "\n".join(lines) + "\n"


#: What the table shows when the two counts agree layer by layer.
NO_DIFFERENCE = "no difference: every layer's figures agree"


def heading(explanation: Explanation) -> str:
    """`ours against fvcore 0.1.5`."""
    return f"ours against {explanation.title} {explanation.version}"


def total_lines(explanation: Explanation) -> list[str]:
    """Both totals, each in its unit, and their difference, aligned."""
    unit = "MACs" if explanation.unit == "macs" else "FLOPs"
    return [
        f"ours     {explanation.ours:>20,} FLOPs  ({format_count(explanation.ours, 'FLOPs')})",
        f"theirs   {explanation.theirs:>20,} {unit:<5}  ({format_count(explanation.theirs, unit)})"
        + (f'  ({explanation.peer} calls them "flops")' if explanation.unit == "macs" else ""),
        f"ours - theirs {explanation.difference:>+15,}",
    ]


def item_table(explanation: Explanation, per_layer: bool = False) -> list[tuple[str, ...]]:
    """The headings, a row per reason and op (`per_layer`: per item), then the total row."""
    headers = ("reason", "layer" if per_layer else "op", "ours", "theirs", "ours - theirs")
    total = ("total", "", "", "", f"{sum(item.difference for item in explanation.items):+,}")
    return [headers, *_rows(explanation.items, per_layer), total]


def reason_lines(explanation: Explanation) -> list[str]:
    """What each reason the items give means, with the peer's name, then the peer's notes."""
    lines = [
        f"{reason}: {REASONS.get(reason, '').replace('the peer', explanation.peer)}"
        for reason in explanation.by_reason()
    ]
    lines.extend(f"note: {note}" for note in explanation.notes)
    return lines


def _rows(items: tuple[Item, ...], per_layer: bool) -> list[tuple[str, ...]]:
    if per_layer:
        ordered = sorted(items, key=lambda item: (-abs(item.difference), item.layer or "", item.op or ""))
        return [
            (item.reason, _where(item), f"{item.ours:,}", f"{item.theirs:,}", f"{item.difference:+,}")
            for item in ordered
        ]
    groups: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        groups.setdefault((item.reason, item.op or item.their_op or "(layer)"), []).append(item)
    rows: list[tuple[str, ...]] = []
    for (reason, op), grouped in sorted(groups.items(), key=lambda pair: -abs(sum(i.difference for i in pair[1]))):
        layers = {item.layer for item in grouped}
        label = f"{op} ({plural(len(layers), 'layer')})" if len(layers) > 1 else f"{op} in {_layer(grouped[0])}"
        rows.append(
            (
                reason,
                label,
                f"{sum(i.ours for i in grouped):,}",
                f"{sum(i.theirs for i in grouped):,}",
                f"{sum(i.difference for i in grouped):+,}",
            )
        )
    return rows


def _where(item: Item) -> str:
    op = item.op or item.their_op or ""
    return f"{_layer(item)} {op}".strip()


def _layer(item: Item) -> str:
    return "(outside any layer)" if item.layer is None else layer_label(item.layer)
