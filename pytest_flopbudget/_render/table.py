"""The per-layer table: what `flopbudget count` prints and what the examples job shows.

Rows are modules in tree order, rolled up to a depth (a ResNet at depth 1 is stem, four stages and the head), with
the cost of each module's whole subtree and its share of the model's FLOPs, so the table answers "where does the
compute go" at the granularity the reader picked. Siblings appear in the order the forward first reached them
(conv1, bn1, ..., layer4, fc), which is how a model is read; a Report read back from JSON has lost that order and
falls back to natural name order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_flopbudget._metrics import BYTES, INT_OPS, METRICS, PARAM_BYTES, PEAK_MEMORY
from pytest_flopbudget._render.formatting import ROOT_LABEL, format_count, format_figure, format_value, layer_label
from pytest_flopbudget._render.phase_table import format_phases
from pytest_flopbudget._render.roofline import Estimate, format_seconds, intensity, intensity_figure
from pytest_flopbudget._render.roofline_report import Roofline, layer_intensity
from pytest_flopbudget._report import ROOT, LayerCost, Report, ancestors
from pytest_flopbudget._safe_text import safe_text


def layer_sort_key(path: str) -> list[tuple[int, int | str]]:
    """Natural order of dotted paths: `layer1.2` before `layer1.10`, a parent before its children."""
    return [(0, int(part)) if part.isascii() and part.isdigit() else (1, part) for part in path.split(".") if path]


def tree_order(paths: Iterable[str]) -> dict[str, int]:
    """Every path and ancestor -> its row index: depth-first, children in order of first appearance in `paths`.

    A parent always comes before its children, and a subtree is never split by another module's rows. Paths in
    sorted order are a Report read back from JSON (`Report.to_dict` sorts its layers), whose forward order is
    lost: they are put in natural order (`layer_sort_key`: `h.2` before `h.10`), not left as `h.0, h.1, h.10`.
    """
    paths = list(paths)
    if all(first < second for first, second in zip(paths, paths[1:])):
        paths.sort(key=layer_sort_key)
    # Siblings are dict keys (insertion-ordered sets): a list's `in` made 100,000 siblings quadratic.
    children: dict[str, dict[str, None]] = {}
    seen: set[str] = {ROOT}
    for path in paths:
        if path in seen:
            continue
        parent = ROOT
        for node in ancestors(path):
            if node == ROOT:
                continue
            if node not in seen:
                seen.add(node)
                children.setdefault(parent, {})[node] = None
            parent = node
    order: dict[str, int] = {}
    stack = [ROOT]
    while stack:
        node = stack.pop()
        order[node] = len(order)
        stack.extend(reversed(children.get(node, {}).keys()))
    return order


def report_text(report: Report, depth: int | None = 2, title: str | None = None) -> str:
    """`report.table()` and `str(report)`: the table `flopbudget count` prints (depth 2) under a title naming the
    model, backend and mode; names from the model pass `safe_text` as every other output does."""
    return safe_text(format_layer_table(report, depth=depth, title=report_title(report) if title is None else title))


def report_title(report: Report) -> str:
    """`Net (torch, inference)`: the model, its backend and mode, heading the table wherever it is shown."""
    mode = "training step (forward + backward)" if report.training else "inference"
    return f"{report.model or 'model'} ({report.backend}, {mode})"


def format_layer_table(report: Report, depth: int | None = 2, title: str = "", roofline: Roofline | None = None) -> str:
    """The table: a row per module to `depth`; where the report measures bytes moved, their column and the
    arithmetic intensity (FLOPs per byte), and with a `roofline` each row's estimated time and bound."""
    table = layer_table(report, depth, roofline)
    lines = [title] if title else []
    width = max([len(ROOT_LABEL)] + [len(row.label) for row in table.rows])
    header = f"{'layer':<{width}}" + "".join(f"  {heading:>{size}}" for heading, size in table.columns)
    lines += [header, "-" * len(header)]
    for row in table.rows:
        lines.append(
            f"{row.label:<{width}}" + "".join(f"  {cell:>{size}}" for cell, (_, size) in zip(row.cells, table.columns))
        )
    lines.append("-" * len(header))
    lines.extend(table.notes)
    return "\n".join(lines)


@dataclass(frozen=True)
class Row:
    """One module's row: its path, its label (indented by depth, cut to `MAX_LABEL`) and its figure cells."""

    path: str
    label: str
    cells: list[str]


@dataclass(frozen=True)
class LayerTable:
    """The table before it is laid out: the figure columns (heading, width in text), the rows in tree order, and
    the lines under it (totals, memory, skipped ops, phases). The text table pads it, the notebook's HTML
    (`render/notebook.py`) puts it in `<td>`s, so both show the same figures."""

    columns: list[tuple[str, int]]
    rows: list[Row]
    notes: list[str]


def layer_table(report: Report, depth: int | None = 2, roofline: Roofline | None = None) -> LayerTable:
    """The rows of `format_layer_table`: one per module to `depth` (None: every layer), in tree order."""
    inclusive = report.inclusive()
    paths = [path for path in inclusive if path == ROOT or depth is None or path.count(".") < depth]
    order = tree_order(report.layers)
    paths.sort(key=lambda path: order[path])
    total_flops = report.flops or 1
    # integer ops get a column only in a model that has some (quantized): others print as they always did
    integer = bool(report.int_ops)
    moved = report.measures(BYTES)
    estimates = roofline.estimates(report) if roofline is not None else None
    columns = [("FLOPs", 9), ("MACs", 9), *([("int ops", 9)] if integer else []), ("params", 9), ("share", 6)]
    if moved:
        columns += [(BYTES.column, 11), ("FLOPs/B", 8)]
        if estimates is not None:
            columns += [("est. time", 9), ("bound", 7)]
    rows = []
    for path in paths:
        cost = inclusive[path]
        estimate = None if estimates is None else estimates[path]
        cells = _cells(cost, total_flops, integer) + (_memory_cells(cost, estimate) if moved else [])
        rows.append(Row(path, _label(path), cells))
    notes = [_totals(report), *format_memory(report), *format_plugin_metrics(report)]
    if roofline is not None:
        notes.extend(roofline.notes())
    notes.extend(format_skipped(report))
    notes.extend(format_phases(report))
    return LayerTable(columns, rows, notes)


#: The longest layer name a row shows whole; a longer one (a 700 KB ONNX node name) keeps its start and end
#: around an ellipsis, so one name cannot widen every row of the table to its length.
MAX_LABEL = 160


def _label(path: str) -> str:
    """The row's label: indented by the layer's depth in the tree (`ancestors`), its name cut to `MAX_LABEL`."""
    if path == ROOT:
        return ROOT_LABEL
    depth = sum(1 for _ in ancestors(path)) - 1
    name = path if len(path) <= MAX_LABEL else path[: MAX_LABEL // 2] + "…" + path[-(MAX_LABEL // 2 - 1) :]
    return "  " * depth + name


def _cells(cost: LayerCost, total_flops: int, integer: bool = False) -> list[str]:
    share = 100 * cost.flops / total_flops  # int / int: exact and correctly rounded, whatever the magnitudes
    int_ops = [format_count(cost.int_ops)] if integer else []
    return [format_count(cost.flops), format_count(cost.macs), *int_ops, format_count(cost.params), f"{share:.1f}%"]


def _memory_cells(cost: LayerCost, estimate: Estimate | None) -> list[str]:
    """The cells after `share`, where the report measures bytes: bytes moved and FLOPs per byte (`-` for a row
    that moves none: its intensity is absent, not 0 or infinite), then with a roofline estimate the row's
    estimated time and the roof that bounds it (`-` when idle)."""
    ratio = layer_intensity(cost)
    cells = [format_figure(cost.get(BYTES), BYTES), "-" if ratio is None else intensity_figure(ratio)]
    if estimate is not None and estimate.bound == "idle":
        cells += ["-", "-"]
    elif estimate is not None:
        cells += [format_seconds(estimate.seconds, labelled=False), estimate.bound]
    return cells


def format_memory(report: Report) -> list[str]:
    """The memory figures the report measures, under the totals: bytes moved with the model's arithmetic intensity
    and its parameter bytes, and the peak of live tensor bytes with the layer it is reached in."""
    lines = []
    if report.measures(BYTES):
        moved = report.metric(BYTES)
        text = f"memory: {moved:,} bytes moved ({format_value(moved, BYTES)})"
        ratio = intensity(report.flops, moved)
        if ratio is not None:
            text += f", {intensity_figure(ratio)} FLOPs/byte"
        if report.measures(PARAM_BYTES):
            stored = report.metric(PARAM_BYTES)
            text += f"; {stored:,} param bytes ({format_value(stored, PARAM_BYTES)})"
        lines.append(text)
    if report.measures(PEAK_MEMORY):
        peak = format_value(report.peak_memory, PEAK_MEMORY)
        lines.append(f"peak memory {peak} at {layer_label(report.peak_layer)}")
    return lines


def format_plugin_metrics(report: Report) -> list[str]:
    """One line per metric another package added (none without one, so the table reads as it always did):
    `matmul-flops: 360 matmul FLOPs (360 FLOPs)`."""
    lines = []
    for metric in METRICS.plugins:
        value = report.metric(metric)
        lines.append(f"{metric}: {value:,} {metric.label} ({metric.format_value(value)})")
    return lines


def _totals(report: Report) -> str:
    int_ops = f", {report.int_ops:,} int ops" if report.int_ops else ""
    shown_int_ops = f", {format_value(report.int_ops, INT_OPS)}" if report.int_ops else ""
    text = (
        f"total: {report.flops:,} FLOPs, {report.macs:,} MACs{int_ops}, {report.params:,} params"
        f" ({format_count(report.flops, 'FLOPs')}, {format_count(report.macs, 'MACs')}{shown_int_ops})"
    )
    if report.training:
        text += (
            f"; forward {format_count(report.forward.flops, 'FLOPs')},"
            f" backward {format_count(report.backward.flops, 'FLOPs')}"
        )
    return text


def format_skipped(report: Report) -> list[str]:
    """Every op that was not counted, loudly: a count with skipped ops is a lower bound."""
    if not report.skipped_ops:
        return ["skipped ops: none (the count is exact under the documented conventions)"]
    lines = [f"skipped ops: {report.skipped_calls} call(s) not counted, the totals are a lower bound:"]
    for name, op in sorted(report.skipped_ops.items()):
        where = ", ".join(sorted(p or ROOT_LABEL for p in op.layers)[:5])
        more = f" (+{len(op.layers) - 5} more)" if len(op.layers) > 5 else ""
        lines.append(f"  {name} x{op.calls} ({op.reason}) in {where}{more}")
    return lines
