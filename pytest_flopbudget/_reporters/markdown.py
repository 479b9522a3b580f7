"""The Markdown job summary (`$GITHUB_STEP_SUMMARY`): every model in one table, then each failure's layer diff.

Annotations say *that* a budget broke and where it is declared; the summary is where a reviewer compares models
and sees *which layers* grew, without opening logs. GitHub rejects a step summary over 1 MiB (and shows none of
it), so the text is built in order of importance and cut at a byte budget with a note saying what was left out.
Every user-controlled string (model and layer names) is escaped: a name must not be able to break the table or
inject HTML.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import Path

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._front_ends import EITHER, FrontEnd
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import FindingKind, Verdict
from pytest_flopbudget._metrics import FLOPS, METRICS, Metric
from pytest_flopbudget._render.formatting import format_count, format_percent, metric_title, plural
from pytest_flopbudget._reporters import terminal
from pytest_flopbudget._reporters.annotations import relative_path
from pytest_flopbudget._reporters.curve_lines import curve_table
from pytest_flopbudget._reporters.layer_diff import changed_metrics, format_diff
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult, Unchecked
from pytest_flopbudget._safe_text import safe_text

#: GitHub's limit for one step's summary.
MAX_BYTES = 1024 * 1024
#: Kept free under the limit for the truncation note and for whatever else the step writes.
RESERVE = 4 * 1024
#: Below this much room a summary would be little more than its truncation note: better none.
MIN_ROOM = 2 * 1024
STATUS = {"fail": "❌", "warn": "⚠️", "ok": "✅"}
#: The budget-use bar: ten cells, each a tenth of the ceiling.
BAR_CELLS = 10
BAR_FULL = "█"
BAR_EMPTY = "░"
#: How many names the one line of unchanged models lists before `…` (the log has them all).
UNCHANGED_NAMES = 10
#: How many warnings the summary spells out before counting the rest (the log has them all).
WARNINGS_SHOWN = 10
HEADER = ("", "model", "metric", "budget", "baseline", "now", "delta", "budget use")

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: What GitHub turns into a mention (`@org/team` notifies the team) or a link to an issue (`#1`, `GH-1`): the point
#: after the `@` or `#`, or the `-`, where a zero-width space goes, so that a name reads the same and links nothing.
_REFERENCE = re.compile(r"(?<=@)(?!\u200b)|(?<=#)(?=\d)|(?<=\bgh-)(?=\d)", re.IGNORECASE)
#: The zero-width space (as Dependabot writes `@\u200buser` in release notes it quotes).
ZERO_WIDTH_SPACE = "\u200b"


def summary(
    verdicts: Sequence[Verdict],
    changes: Sequence[BudgetChange] = (),
    unchecked: Sequence[Unchecked] = (),
    *,
    front_end: FrontEnd = EITHER,
    workspace: str | os.PathLike[str] | None = None,
    max_bytes: int = MAX_BYTES - RESERVE,
    base_ref: str | None = None,
    notes: Sequence[str] = (),
    title: str | None = None,
) -> str:
    """The whole summary, at most `max_bytes` bytes of UTF-8 (see `truncate` for what goes first); with `title` (a
    project's section of a run over several) the headline is that section's, under the title.

    Locations are shown relative to `workspace` (default: the current directory); `base_ref` is the ref growth was
    measured against (`--base-ref`), for what to do about it. `notes` are lines under the headline (how many
    findings GitHub's annotation cap left out). The hints name `front_end`'s update command (default: both).
    """
    ordered = summary_order(verdicts)
    failed = [v for v in ordered if not v.passed]
    status = _status(verdicts, changes, unchecked)
    headline = f"### flopbudget: {status}" if title is None else f"#### {cell(title)}: {status}"
    head = [headline, "", *notes]
    if unchecked:
        head.extend(_unchecked_section(unchecked))
    if changes:
        head.extend(_changes_section(changes, workspace or os.getcwd()))
    warned = [v for v in ordered if v.passed and v.warnings]
    if warned:
        head.extend(_warnings_section(warned, workspace or os.getcwd()))
    names = [v.name for v in verdicts]
    duplicated = {name for name in names if names.count(name) > 1}
    unchanged = [v for v in ordered if _unchanged(v)]
    unchanged = unchanged if len(unchanged) > 1 else []  # one model keeps its row: a line would say no less
    collapsed = {id(v) for v in unchanged}  # by identity: comparing verdicts would compare whole reports
    rows = [row for v in ordered if id(v) not in collapsed for row in _rows(v, v.name in duplicated)]
    rows += [_unchanged_row(unchanged)] if unchanged else []
    table_head = [_row(HEADER), _row(("---",) * len(HEADER))] if rows else []
    blocks = [_details_block(v, front_end, os.fspath(workspace or os.getcwd()), base_ref) for v in failed]
    blocks += [_change_block(v) for v in ordered if v.passed and v.baseline is not None and changed_metrics(v)]
    blocks += [block for block in (_curve_block(v) for v in ordered) if block]
    return truncate(head, table_head, rows, blocks, max_bytes=max_bytes)


def summary_order(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The models in the order the summary lists them (and their per-layer diffs): failed, warned, then the rest,
    each by name."""
    return sorted(verdicts, key=lambda v: (_model_status(v) != "fail", _model_status(v) != "warn", v.name))


def truncate(
    head: Sequence[str], table_head: Sequence[str], rows: Sequence[str], blocks: Sequence[str], *, max_bytes: int
) -> str:
    """Join the parts in order (headline, table rows, failure details) while they fit in `max_bytes`.

    Rows come before details because the table covers every model; when rows or details are dropped, a last
    line counts them and points at the log, which has everything. Every part goes through the safe-text filter
    first (escape sequences, bell, bidi controls from model and layer names shown as `\x1b`, `\u202e`), as every
    other output does, and is measured as it will be written.
    """
    head, table_head, rows, blocks = ([safe_text(part) for part in parts] for parts in (head, table_head, rows, blocks))
    note_room = 300
    out: list[str] = []
    size = 0

    def fits(text: str) -> bool:
        return size + len(text.encode("utf-8")) + 1 + note_room <= max_bytes

    def add(text: str) -> None:
        nonlocal size
        out.append(text)
        size += len(text.encode("utf-8")) + 1

    for line in [*head, *table_head]:
        if fits(line):
            add(line)
    dropped_rows = 0
    for line in rows:
        if dropped_rows == 0 and fits(line):
            add(line)
        else:
            dropped_rows += 1
    if dropped_rows:
        add(_row(("", f"… {plural(dropped_rows, 'more row')}", "", "", "", "", "", "")))
    dropped_blocks = 0
    if blocks:
        add("")
    for block in blocks:
        if dropped_blocks == 0 and fits(block):
            add(block)
        else:
            dropped_blocks += 1
    if dropped_rows or dropped_blocks:
        out.append("\n" + cut_note(dropped_rows, dropped_blocks))
    return "\n".join(out).rstrip("\n") + "\n"


def cut_note(dropped_rows: int, dropped_blocks: int, limit: str = "GitHub's 1 MiB limit") -> str:
    """The last line of a cut summary: what was left out (at least one of the two counts is not zero), under
    which `limit`, and that the job log has it all. The pull-request comment says the same under its own limit."""
    what = []
    if dropped_rows:
        what.append(f"{plural(dropped_rows, 'table row')}")
    if dropped_blocks:
        what.append(f"{plural(dropped_blocks, 'failure detail')}")
    return f"_Summary cut to stay under {limit}: {' and '.join(what)} left out; the job log has them all._"


def room_left(path: str | os.PathLike[str]) -> int:
    """Bytes a summary may still take in the step summary file at `path`.

    A step may already have written to its summary (another tool, an earlier call), and GitHub's limit is per
    step, so what is there counts against it.
    """
    target = Path(path)
    used = target.stat().st_size if target.is_file() else 0
    return max(MAX_BYTES - RESERVE - used, 0)


def append_step_summary(path: str | os.PathLike[str], text: str) -> None:
    """Append `text` to the summary file at `path` (GitHub renders the file after the step)."""
    target = Path(path)
    with target.open("a", encoding="utf-8", newline="\n") as handle:
        if target.stat().st_size:
            handle.write("\n")
        handle.write(text)


def usage_bar(now: int, limit: int, cells: int = BAR_CELLS) -> str:
    """`█████████░`: how much of a ceiling is used, one cell per tenth, at a glance in the summary table.

    A cell fills only when its whole tenth is used (99.9% shows nine), so a full bar means the ceiling is reached;
    past it the bar stays full and the cell says `over`. Exact integer arithmetic: no float rounds 60% to 5 cells.
    """
    if now > limit:
        filled = cells
    elif limit == 0:
        filled = 0
    else:
        filled = cells * now // limit
    return BAR_FULL * filled + BAR_EMPTY * (cells - filled)


def cell(text: str) -> str:
    """A table cell: HTML-escaped, Markdown punctuation and `|` backslash-escaped, newlines as spaces, mentions and
    references inert (`inert`)."""
    flat = " ".join(str(text).splitlines())
    return inert(_MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(flat, quote=False)))


def inert(text: str) -> str:
    """`text` with no `@name` mention and no `#1` or `GH-1` reference for GitHub to act on: a zero-width space after
    each `@` and between `#` or `GH-` and a digit. For every name that reaches GitHub Markdown outside a code block
    (model and layer names, messages, headings): a layer named `@org/team` must not notify a team from a comment,
    nor `#1` link an issue. Code blocks and spans need none (GitHub links nothing there)."""
    return _REFERENCE.sub(ZERO_WIDTH_SPACE, text)


# -- parts -----------------------------------------------------------------------------------------------------------


def _headline(verdicts: Sequence[Verdict], changes: Sequence[BudgetChange], unchecked: Sequence[Unchecked]) -> str:
    return f"### flopbudget: {_status(verdicts, changes, unchecked)}"


def _status(verdicts: Sequence[Verdict], changes: Sequence[BudgetChange], unchecked: Sequence[Unchecked]) -> str:
    counted = len(verdicts)
    miscached = [v for v in verdicts if any(f.kind == FindingKind.CACHE_MISMATCH for f in v.violations)]
    failed = sum(1 for v in verdicts if any(f.kind != FindingKind.CACHE_MISMATCH for f in v.violations))
    warned = sum(1 for v in verdicts if v.passed and v.warnings)
    models = f"{plural(counted, 'model')}"
    if failed:
        text = f"{STATUS['fail']} {failed} of {models} over budget"
        if miscached:
            text += f", {len(miscached)} whose cached count differs from a fresh count"
    elif miscached:
        text = f"{STATUS['fail']} {len(miscached)} of {models} whose cached count differs from a fresh count"
    elif counted:
        text = f"{STATUS['ok']} {models} within budget"
    else:
        text = "no models counted"
    if unchecked:
        text = f"{STATUS['fail']} {len(unchecked)} not checked, " + text.replace(f"{STATUS['fail']} ", "").replace(
            f"{STATUS['ok']} ", ""
        )
    if warned:
        text += f", {warned} with warnings"
    if changes:
        text += f", {plural(len(changes), 'budget change')} to review"
    return text


def _changes_section(changes: Sequence[BudgetChange], workspace: str | os.PathLike[str]) -> list[str]:
    ref = changes[0].ref
    baselines = any(c.setting == "baseline" for c in changes)
    what = "Budgets and baselines changed" if baselines else "Budgets raised or removed"
    lines = [f"**{what} since {cell(ref)}** (check that this is intended):", ""]
    for change in changes:
        file = relative_path(change.source.file, workspace)
        where = f"{file}:{change.source.line}" if file and change.source.line else file
        lines.append(f"- {STATUS['warn']} {cell(change.message)}" + (f" ({cell(where)})" if where else ""))
    lines.append("")
    return lines


def _warnings_section(verdicts: Sequence[Verdict], workspace: str | os.PathLike[str]) -> list[str]:
    """What each warning says, where the reviewer reads first: a ⚠️ row says that a model warned, not why (growth
    over `warn-increase`, a missing baseline, a metric not measured), and the folded diff below says only where.
    At most `WARNINGS_SHOWN`, then a count: the table below them is what every reader needs."""
    lines = ["**Warnings** (the check passes; read them before merging):", ""]
    found = [(verdict, finding) for verdict in verdicts for finding in verdict.warnings]
    for verdict, finding in found[:WARNINGS_SHOWN]:
        file = relative_path(finding.source.file, workspace) if finding.source else ""
        where = f"{file}:{finding.source.line}" if file and finding.source and finding.source.line else file
        text = f"- {STATUS['warn']} {cell(verdict.name)}: {cell(' '.join(finding.message.splitlines()))}"
        lines.append(text + (f" ({cell(where)})" if where else ""))
    if len(found) > WARNINGS_SHOWN:
        lines.append(f"- … {plural(len(found) - WARNINGS_SHOWN, 'more warning')}: the job log has them all")
    lines.append("")
    return lines


def _unchecked_section(unchecked: Sequence[Unchecked]) -> list[str]:
    lines = ["**Not checked** (the model could not be counted, so its budget is unknown):", ""]
    lines.extend(f"- {STATUS['fail']} {cell(model.name)}: {cell(model.message)}" for model in unchecked)
    lines.append("")
    return lines


def _rows(verdict: Verdict, show_nodeid: bool = False) -> list[str]:
    """One row per metric the model is held to or flagged on (flops when it has no budget at all), and integer ops
    where it has some.

    `show_nodeid` tells apart tests that count a model of the same name.
    """
    metrics = _row_metrics(verdict)
    violated = {f.metric for f in verdict.violations}
    warned = {f.metric for f in verdict.warnings}
    rows = []
    for i, metric in enumerate(metrics):
        status = "fail" if metric in violated else "warn" if metric in warned else "ok"
        if i == 0 and not verdict.passed and not (violated & set(metrics)):
            status = "fail"  # a model-level problem (an unusable baseline file) still marks the model
        name = cell(verdict.name) if i == 0 else ""
        if i == 0 and show_nodeid and verdict.measurement.nodeid:
            name += f"<br><sub>{cell(verdict.measurement.nodeid)}</sub>"
        rows.append(_row((STATUS[status], name, *_figures(verdict, metric))))
    return rows


def _row_metrics(verdict: Verdict) -> list[Metric]:
    flagged = {f.metric for f in verdict.findings if f.metric}
    metrics: list[Metric] = [m for m in METRICS if verdict.budget.limit(m) is not None or m in flagged]
    if not metrics:
        metrics = [FLOPS]
    # integer ops wherever the model has some: integer work moved out of FLOPs must not read as gone
    metrics += [m for m in METRICS.omit_zero if m not in metrics and verdict.judges(m)]
    return metrics


def _figures(verdict: Verdict, metric: Metric) -> tuple[str, ...]:
    prefixes = metric.prefixes
    limit = verdict.budget.limit(metric)
    now = verdict.value(metric)
    old = verdict.baseline_value(metric)
    delta = verdict.delta(metric)
    usage = verdict.usage(metric)
    if delta is None:
        shown_delta = "-"
    elif delta == 0:
        shown_delta = "="
    else:
        signed = f"{'+' if delta > 0 else ''}{format_count(delta, prefixes=prefixes)}"
        shown_delta = f"{signed} ({format_percent(delta, old or 0)})"
    if usage is None or limit is None:
        shown_usage = "-"
    elif usage == float("inf"):
        shown_usage = f"{usage_bar(now, limit.value)} over (budget 0)"
    else:
        shown_usage = f"{usage_bar(now, limit.value)} {100.0 * usage:.1f}%" + (" over" if now > limit.value else "")
    return (
        metric_title(metric),
        format_count(limit.value, prefixes=prefixes) if limit is not None else "-",
        format_count(old, prefixes=prefixes) if old is not None else "-",
        format_count(now, prefixes=prefixes) if verdict.report.measures(metric) else "-",  # bytes of ONNX: none
        shown_delta,
        shown_usage,
    )


def _details_block(verdict: Verdict, front_end: FrontEnd, workspace: str, base_ref: str | None) -> str:
    """`<details>` with the one-line reason as summary and the terminal's per-layer diff as a code block."""
    text = terminal.details(verdict, front_end=front_end, start=workspace, base_ref=base_ref)
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    summary_line = inert(html.escape(" ".join(reason(verdict).splitlines()), quote=False))
    return "\n".join(
        ["<details>", f"<summary>{STATUS['fail']} {summary_line}</summary>", "", fence + "text", text, fence, "",
         "</details>", ""]
    )  # fmt: skip


def _change_block(verdict: Verdict) -> str:
    """`<details>` with a model's change in totals as summary and its per-layer diff (`flopbudget diff`'s text) as a
    code block: for a model that changed and passed, so that growth inside a budget shows where it is too."""
    totals, *tables = format_diff(verdict).splitlines()
    text = "\n".join(tables)
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    summary_line = inert(html.escape(" ".join(totals.splitlines()), quote=False))
    return "\n".join(
        ["<details>", f"<summary>{STATUS[_model_status(verdict)]} {summary_line}</summary>", "", fence + "text", text,
         fence, "", "</details>", ""]
    )  # fmt: skip


def _unchanged(verdict: Verdict) -> bool:
    """Whether the model's every row would read `=`: passed without warnings, the same figures as its baseline."""
    if not verdict.passed or verdict.warnings or verdict.baseline is None:
        return False
    return all(verdict.delta(metric) == 0 for metric in _row_metrics(verdict))


def _unchanged_row(verdicts: Sequence[Verdict]) -> str:
    """`12 models unchanged: a, b, c, …`: the rows of models that did not move, as one."""
    names = ", ".join(cell(v.name) for v in verdicts[:UNCHANGED_NAMES])
    more = ", …" if len(verdicts) > UNCHANGED_NAMES else ""
    return _row((STATUS["ok"], f"{plural(len(verdicts), 'model')} unchanged: {names}{more}", "", "", "", "", "", ""))


def _curve_block(verdict: Verdict) -> str:
    """`<details>` comparing the base and head curves of a model whose formula changed (failed or not), with both
    formulas: empty for every other model, so a project without curves gets the summary it always got."""
    table = curve_table(verdict)
    formula, base = verdict.measurement.formula, verdict.baseline_formula
    if not table or formula is None or base is None:
        return ""
    name = inert(html.escape(" ".join(safe_text(verdict.name).splitlines()), quote=False))
    dims = inert(html.escape(", ".join(formula.dims)))
    formulas = [
        f"- {cell(m.label)}: base `{base.total(m)}`, now `{formula.total(m)}`"
        for m in METRICS.growth
        if m in formula.totals and base.total(m) != formula.total(m) and verdict.judges(m)
    ]
    return "\n".join(
        ["<details>", f"<summary>\U0001f4c8 {name}: cost curve changed in {dims}</summary>", "",
         *table, "", *formulas, "", f"{formula.holds.describe()}", "", "</details>", ""]
    )  # fmt: skip


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _model_status(verdict: Verdict) -> str:
    if not verdict.passed:
        return "fail"
    return "warn" if verdict.warnings else "ok"


def _longest_backtick_run(text: str) -> int:
    runs = re.findall(r"`+", text)
    return max((len(run) for run in runs), default=0)


def summary_of(
    result: RunResult, *, workspace: str | os.PathLike[str] | None = None,
    max_bytes: int = MAX_BYTES - RESERVE, notes: Sequence[str] = (),
) -> str:  # fmt: skip
    """`summary` of one run's result. A summary is read on the web, whichever front end wrote it: its hints name
    both update commands, so the same run gives the same summary from either. A run over several projects has the
    headline of the whole run, then a section per project (its headline, changes, table and diffs), each in an
    equal share of the room."""
    if len(result.projects) > 1:
        root = os.fspath(workspace or os.getcwd())
        head = [safe_text(line) for line in (_headline(result.verdicts, result.changes, result.unchecked), "", *notes)]
        text = "\n".join(head).rstrip("\n") + "\n"
        room = max((max_bytes - len(text.encode("utf-8"))) // len(result.projects) - 2, 0)
        for project in result.projects:
            part = result.section(project)
            text += "\n" + summary(
                part.verdicts, part.changes, part.unchecked, front_end=EITHER, workspace=workspace, max_bytes=room,
                base_ref=part.base_ref, title=relative_path(project.pyproject, root) or project.pyproject,
            )  # fmt: skip
        return text
    return summary(
        result.verdicts, result.changes, result.unchecked, front_end=EITHER, workspace=workspace,
        max_bytes=max_bytes, base_ref=result.base_ref, notes=notes,
    )  # fmt: skip


class MarkdownOutput:
    """`markdown:PATH`: the job summary as a file."""

    workspace_variables = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        text = summary_of(findings.result, workspace=context.root)
        write_atomic(Path(path), text)
