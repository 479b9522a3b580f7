"""The table `flopbudget explain` prints: both totals, then the difference by reason and op, each line the sum of
its items over the layers it names (`--per-layer`: one line per item), then what each reason means.

Figures are exact integers with thousands separators (the point is that they add up), the headline ones also
with a prefix; the peer's figures are in its own unit, and the `MACs vs FLOPs` lines carry the factor.
"""

from __future__ import annotations

from pytest_flopbudget._explain.items import REASONS, Explanation, Item
from pytest_flopbudget._render.formatting import format_count, layer_label, plural


def explanation_text(explanation: Explanation, model: str, per_layer: bool = False) -> str:
    unit = "MACs" if explanation.unit == "macs" else "FLOPs"
    lines = [
        f"{model}: ours against {explanation.title} {explanation.version}",
        f"  ours     {explanation.ours:>20,} FLOPs  ({format_count(explanation.ours, 'FLOPs')})",
        f"  theirs   {explanation.theirs:>20,} {unit:<5}  ({format_count(explanation.theirs, unit)})"
        + (f'  ({explanation.peer} calls them "flops")' if explanation.unit == "macs" else ""),
        f"  ours - theirs {explanation.difference:>+15,}",
        "",
    ]
    if not explanation.items:
        lines.append("  no difference: every layer's figures agree")
        return "\n".join(lines) + "\n"
    rows = _rows(explanation.items, per_layer)
    headers = ("reason", "layer" if per_layer else "op", "ours", "theirs", "ours - theirs")
    table = [headers, *rows, ("total", "", "", "", f"{sum(item.difference for item in explanation.items):+,}")]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
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
    for reason in explanation.by_reason():
        lines.append(f"  {reason}: {REASONS.get(reason, '').replace('the peer', explanation.peer)}")
    lines.extend(f"  note: {note}" for note in explanation.notes)
    return "\n".join(lines) + "\n"


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
