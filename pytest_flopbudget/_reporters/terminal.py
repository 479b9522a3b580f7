"""Terminal text for verdicts: the failure details (per-layer diff) and the end-of-run summary table.

String building shared by the pytest plugin and the CLI, and `TerminalOutput`, the run's terminal text as an
`Output` like the CI files: each front end asks `reporters.ci` for it and says only where it goes. The layout
follows what a reviewer scans for: the layers that changed most, the totals, then how to act (how to create or
refresh a baseline). Tables are collapsed to the top rows so a large model never floods a CI log.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Iterable, Sequence

from pytest_flopbudget._config.budget import MAX_INCREASE
from pytest_flopbudget._config.location import Location, Origin, display_path
from pytest_flopbudget._config.pyproject import quote_key
from pytest_flopbudget._front_ends import PYTEST, FrontEnd
from pytest_flopbudget._judge.diff import LayerDiff, top_layers
from pytest_flopbudget._judge.diff_groups import group_changes
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Finding, FindingKind, Verdict
from pytest_flopbudget._judge.versions import version_note
from pytest_flopbudget._metrics import FLOPS, METRICS, SKIPPED, Metric, by_name
from pytest_flopbudget._render.formatting import (
    ROOT_LABEL,
    ceiling_above,
    format_count,
    format_figure,
    format_percent,
    layer_label,
    metric_title,
    plural,
)
from pytest_flopbudget._report import Report
from pytest_flopbudget._reporters import curve_lines
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult
from pytest_flopbudget._units import SI, PrefixSystem

TOP = 15

__all__ = [
    "ROOT_LABEL", "TOP", "TerminalOutput", "baseline_notes", "details", "diff_table", "reason", "run_summary",
    "run_text", "summary_lines", "top_layers_table",
]  # fmt: skip


class TerminalOutput:
    """The run's terminal text, as its front end shows it. The CLI prints every failure with its per-layer diff,
    the growth warnings and the summary to the stream, its errors to the error stream, then the `--base-ref`
    budget changes; pytest has shown each failure with its test, so it gets the summary alone (errors inline, and
    first the errors no test shows, such as an xdist worker's lost results), and nothing when there is nothing
    to say."""

    workspace_variables: tuple[str, ...] = ()

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        result = findings.result
        if result.front_end.shows_failures:
            lines = pytest_summary(result)
            if lines:
                context.stream.write("\n".join(lines) + "\n")
            return
        if len(result.projects) > 1:  # a section per project: its failures and its table
            for project in result.projects:
                context.stream.write(f"== {display_path(project.pyproject)} ==\n")
                context.stream.write(run_text(result.section(project)))
        else:
            context.stream.write(run_text(result))
        for line in error_lines(result):
            context.errors.write(f"flopbudget: error: {line}\n")
        for change in result.changes:
            context.stream.write(f"{change}\n")


def pytest_summary(result: RunResult) -> list[str]:
    """The end-of-session block under pytest: `run_summary` (errors inline) after the errors no test item shows,
    or nothing at all for a session without a counted model, an error or a baseline to mention."""
    if not (
        result.verdicts
        or result.update_errors
        or result.output_errors
        or result.unchecked
        or result.stale
        or result.removed
    ):
        return []
    lines = [f"error: {e.message}" for e in result.unchecked if e.nodeid is None]
    return lines + warn_increase_lines(result) + run_summary(result)


def warn_increase_lines(result: RunResult) -> list[str]:
    """`NAME: warning: ... more than warn-increase 1%`: the warnings a project asked for with warn-increase, which
    no test shows (the test passes); growth on models without one stays in the table's `vs baseline` column."""
    return [
        f"{v.name}: warning: {f.message}"
        for v in result.verdicts
        if v.passed and v.budget.warn_increase is not None
        for f in v.warnings
        if f.kind == FindingKind.GROWTH
    ]


def details(
    verdict: Verdict, *, front_end: FrontEnd, top: int = TOP, base_ref: str | None = None, start: str | None = None
) -> str:
    """Everything below the one-line reason: the per-layer diff (or top layers), skipped ops and notes, then what
    to do in `front_end`'s words; file names relative to `start` (default: the current directory)."""
    lines: list[str] = []
    failed = verdict.failed_metrics()
    metrics = [m for m in failed if m.counted] or ([] if failed else [FLOPS])
    baseline_shown = verdict.baseline_file or "the baseline file"
    for metric in metrics:
        diff = verdict.diff(metric)
        if diff is not None and diff.changes:
            lines.append(f"{metric_title(metric)} per layer, against {baseline_shown}:")
            lines.extend(diff_table(diff, top=top))
        elif diff is not None:  # same model, tighter budget: show where the cost is instead of an empty diff
            lines.append(f"no layer changed since {baseline_shown}; top layers by {metric_title(metric)}:")
            lines.extend(top_layers_table(verdict, metric, top=top))
        else:
            lines.append(f"top layers by {metric_title(metric)}:")
            lines.extend(top_layers_table(verdict, metric, top=top))
    lines.extend(phase_lines(verdict, metrics, baseline_shown))  # a generation or training: which phase moved
    lines.extend(curve_lines.formula_lines(verdict))  # a model with a curve: its formula (and the baseline's)
    if verdict.report.skipped_ops and (SKIPPED in verdict.failed_metrics() or lines):
        lines.extend(_skipped_lines(verdict))
    if verdict.baseline is None and not any(f.kind == FindingKind.BASELINE for f in verdict.violations):
        lines.append(f"no baseline for {verdict.name} yet ({baseline_shown}); run {front_end.update_hint} to create it")
    elif verdict.baseline is not None:
        lines.extend(baseline_notes(verdict))
    hint = accept_hint(verdict, front_end=front_end, base_ref=base_ref, start=start)
    if hint:
        lines.append(hint)
    return "\n".join(lines)


def phase_lines(verdict: Verdict, metrics: Sequence[Metric], against: str) -> list[str]:
    """The phases base vs now (render/phase_diff.py) where some moved, for a generation or a count whose budget
    sets phases; nothing for any other count (its text is unchanged)."""
    if verdict.baseline is None or not (verdict.report.phases or verdict.budget.phases):
        return []
    from pytest_flopbudget._render.phase_diff import phase_diffs

    per_op = [metric for metric in metrics if metric in METRICS.per_op]
    return phase_diffs(verdict.baseline, verdict.report, per_op, against)


#: What each kind of failure needs to be accepted: a new baseline only, or an edit of its budget too. A failure of
#: any other kind (a budget that cannot be checked: not measured, no formula) is not accepted by a new baseline, so
#: no hint offers one (the reason already says what to change); the hint never sends a user round in a loop.
_UPDATED_AWAY = {FindingKind.INCREASE, FindingKind.NO_BASELINE, FindingKind.GROWTH, FindingKind.FORMULA}
_EDITED = {FindingKind.CEILING, FindingKind.POINT_CEILING, FindingKind.DEGREE}


def accept_hint(verdict: Verdict, *, front_end: FrontEnd, base_ref: str | None = None, start: str | None = None) -> str:
    """What to do when the change is intended, as one complete instruction: each setting to edit with the value that
    would pass (a ceiling, a phase's or a point's: the count rounded up to 3 significant digits; a degree: the
    formula's; max-increase under `--base-ref`: the growth rounded up to 0.1%), then the command that records the
    new baseline, so that following it makes the next run clean (raising a ceiling alone would leave the growth
    over the old baseline reported on every run). Empty where no such instruction exists."""
    kinds = {f.kind for f in verdict.violations} - {FindingKind.CACHE_MISMATCH}  # the cache's fault: not to accept
    if not kinds or FindingKind.BASELINE in kinds or not kinds <= _UPDATED_AWAY | _EDITED:
        return ""
    edits: list[str] = []
    for finding in verdict.violations:
        edit = finding_edit(finding, start)
        if edit is not None:
            edits.append(edit)
    growth = [f for f in verdict.violations if f.kind == FindingKind.INCREASE and f.baseline is not None]
    if growth and base_ref:  # the base's baseline stays: the growth over it must be allowed
        edits.append(_increase_edit(verdict, growth, start))
    command = update_command(verdict, front_end)
    if not edits:
        return f"to accept: run {command} and commit the new baseline"
    return f"to accept: {'; '.join(dict.fromkeys(edits))}; then run {command} and commit both"


def finding_edit(finding: Finding, start: str | None = None) -> str | None:
    """The edit that accepts one finding over a ceiling (a model's, a phase's, at a point of the curve) or a
    degree; None for any other."""
    if finding.metric is None or finding.actual is None:
        return None
    if finding.kind == FindingKind.DEGREE:
        source = finding.source
        if finding.dim is not None and (source is None or not source.slot):  # no setting path: the dim names it
            source = dataclasses.replace(source or Location(), slot=("max-degree", finding.dim))
        return budget_edit(source, finding.metric, str(finding.actual), start, whole=True)
    if finding.kind in (FindingKind.CEILING, FindingKind.POINT_CEILING):
        exact = finding.metric.whole  # a number of op calls is written as it is
        value = str(finding.actual) if exact else ceiling_above(finding.actual, prefixes=finding.metric.prefixes)
        return budget_edit(finding.source, finding.metric, value, start)
    return None


def budget_edit(
    source: Location | None, metric: Metric | str, value: str, start: str | None = None, *, whole: bool = False
) -> str:
    """`set flops = "11.5M" at pyproject.toml:7 (tool.flopbudget.models.net)`, or for a marker budget
    `set flops="241" in the flop_budget marker at tests/test_net.py:5`: the setting to edit, where, and the value
    to write. A setting below a table names the table (`set flops = "2T" at pyproject.toml:9
    (tool.flopbudget.models.gpt.at[0])`), or in a marker the path to it (`set phases["forward"]["flops"]="1.2k"`).

    The slot is the one the budget was written in (`source.slot`; a MAC budget may sit in the `flops` slot: its
    value keeps the MAC unit), and a skipped-ops budget or a degree (`whole`) is a whole number. `metric` is a
    metric, or `max-increase`."""
    definition = METRICS.get(metric)
    slot: tuple[str | int, ...] = (
        source.slot if source is not None and source.slot else (definition.key if definition else str(metric),)
    )
    name = str(slot[-1])
    slot_metric = METRICS.by_argument(name) or METRICS.by_key(name)
    if whole or (definition is not None and definition.whole) or (slot_metric is not None and slot_metric.whole):
        written = value
    elif definition is not None and slot_metric is not None and slot_metric != definition:
        written = f'"{value} {definition.label}"'  # a MAC budget in the flops slot keeps its unit
    else:
        written = f'"{value}"'
    where = source.location(start) if source is not None else ""
    at = f" at {where}" if where else ""
    if source is not None and source.marker:
        path = str(slot[0]) + "".join(f"[{json.dumps(part)}]" for part in slot[1:])  # as Python writes it
        return f"set {path}={written} in the flop_budget marker{at}"
    table = _table_of(source, slot) if source is not None else ""
    return f"set {name} = {written}{at}" + (f" ({table})" if table else "")


def _table_of(source: Location, slot: tuple[str | int, ...]) -> str:
    """The TOML table that holds the setting `slot` names (`tool.flopbudget.models.gpt.at[0]`), from the fields
    of its location: the model's table is its key less the slot's own path."""
    written = ".".join(quote_key(str(part)) for part in slot)
    if not source.slot or not source.key.endswith("." + written):
        return ""
    table = source.key[: -len(written) - 1]
    return table + "".join(f"[{part}]" if isinstance(part, int) else f".{quote_key(part)}" for part in slot[:-1])


def _increase_edit(verdict: Verdict, growth: Sequence[Finding], start: str | None) -> str:
    """The least max-increase (in tenths of a percent, rounded up) that lets every metric's growth over the base's
    baseline pass, on the line that sets it."""
    increase = verdict.budget.max_increase
    source = increase.source if increase is not None else growth[0].source
    if any(not f.baseline for f in growth):
        where = source.location(start) if source is not None else ""
        return "remove max-increase" + (f" at {where}" if where else "") + " (any growth from a zero baseline fails it)"
    tenths = max(-((-((f.actual or 0) - (f.baseline or 0)) * 1000) // (f.baseline or 1)) for f in growth)
    percent = f"{tenths // 10}" + (f".{tenths % 10}" if tenths % 10 else "")
    return budget_edit(source, MAX_INCREASE, f"{percent}%", start)


def update_command(verdict: Verdict, front_end: FrontEnd) -> str:
    """The command that records this model's baseline and nothing else: `flopbudget check --update NAME` for a
    pyproject model (from either front end, so both print the same words), `pytest --flopbudget-update NODEID` for
    a test's model, which only pytest sees (the model's origin says which); under pytest, a model without a node id
    gets the plain `pytest --flopbudget-update`. In a run over several projects the command names the model's
    `--pyproject`."""
    measurement = verdict.measurement
    nodeid = measurement.nodeid
    if measurement.origin.origin is not Origin.PYPROJECT and nodeid:  # a test's model: only pytest counts it
        return f"`pytest --flopbudget-update {shlex.quote(nodeid)}`"
    if nodeid is None and front_end == PYTEST:
        return front_end.update_hint
    name = measurement.name
    project = f"--pyproject {shlex.quote(measurement.pyproject)} " if measurement.pyproject else ""
    return f"`flopbudget check {project}--update {'-- ' if name.startswith('-') else ''}{shlex.quote(name)}`"


def diff_table(diff: LayerDiff, *, top: int = TOP) -> list[str]:
    """`layer | baseline | now | delta` rows, largest |delta| first, then the rest collapsed, then the total.

    Repeated blocks that changed alike are one row (`layers.{0..31}.mlp.up x32`, figures summed: see
    `judge.diff_groups`); the rest line still counts layers."""
    groups = group_changes(diff.changes)
    shown, rest = groups[:top], [change for group in groups[top:] for change in group.changes]
    prefixes = by_name(diff.metric).prefixes
    rows = [("layer", "baseline", "now", "delta")]
    for change in shown:
        note = {"added": "added", "removed": "removed"}.get(change.status)
        if note is None:
            note = format_percent(change.delta, change.baseline or 0)
        rows.append(
            (
                change.label,
                _figure(change.baseline, prefixes),
                _figure(change.now, prefixes),
                f"{_signed(change.delta, prefixes)} ({note})",
            )
        )
    if not shown:
        rows.append(("(no layer changed)", "", "", ""))
    total = (
        "total",
        _figure(diff.baseline_total, prefixes),
        _figure(diff.now_total, prefixes),
        f"{_signed(diff.delta, prefixes)} ({format_percent(diff.delta, diff.baseline_total)})",
    )
    widths = _widths([*rows, total])
    lines = _table(rows, right=(1, 2, 3), widths=widths)
    if rest:
        delta = sum(change.delta for change in rest)
        lines.append(f"  ... {plural(len(rest), 'more changed layer')} ({_signed(delta, prefixes)})")
    lines.extend(_table([rows[0], total], right=(1, 2, 3), widths=widths)[1:])
    return lines


def top_layers_table(verdict: Verdict, metric: Metric, *, top: int = TOP) -> list[str]:
    """The most expensive layers, for a failure without a baseline to diff against."""
    total = verdict.report.metric(metric)
    entries = top_layers(verdict.report, metric, top)
    rows = [("layer", metric_title(metric), "share")]
    prefixes = by_name(metric).prefixes
    for path, value in entries:
        rows.append((layer_label(path), _figure(value, prefixes), f"{100.0 * value / total:.1f}%" if total else ""))
    rest = sum(1 for value in verdict.report.layer_metric(metric).values() if value) - len(entries)
    total_row = ("total", _figure(total, prefixes), "100.0%" if total else "")
    widths = _widths([*rows, total_row])
    lines = _table(rows, right=(1, 2), widths=widths)
    if rest > 0:
        lines.append(f"  ... {plural(rest, 'more layer')}")
    lines.extend(_table([rows[0], total_row], right=(1, 2), widths=widths)[1:])
    return lines


def run_summary(result: RunResult, *, errors_inline: bool = True) -> list[str]:
    """The end-of-run block both front ends print: the table, models not checked, baselines written, stale files.

    `errors_inline=False` leaves out the update errors, for a front end that prints errors to stderr."""
    lines: list[str] = []
    errors = [f"error: {line}" for line in result.update_errors]
    errors += [f"flopbudget: error: {line}" for line in result.output_errors]
    errors = errors if errors_inline else []
    if result.verdicts:
        lines = summary_lines(result.verdicts, updated=result.updated, update_errors=errors)
    elif errors:
        lines = list(errors)
    if result.unchecked:
        names = ", ".join(e.name for e in result.unchecked)
        lines.append(f"{plural(len(result.unchecked), 'model')} not checked: {names}")
    if result.update:
        removed = f", {len(result.removed)} stale removed" if result.removed else ""
        lines.append(
            f"baselines in {result.baseline_dir}: {len(result.written)} written, {len(result.unchanged)} unchanged"
            f"{removed}"
        )
    if result.stale:
        shown = ", ".join(result.stale[:10]) + (f", +{len(result.stale) - 10} more" if len(result.stale) > 10 else "")
        lines.append(
            f"{plural(len(result.stale), 'stale baseline')} in {result.baseline_dir} (no model of this run uses "
            f"them): {shown}; {result.stale_note or 'an update removes them'}"
        )
    return lines


def error_lines(result: RunResult) -> list[str]:
    """Every error of the run, one line each: models that could not be counted, baselines and outputs not written."""
    return [e.message for e in result.unchecked] + result.update_errors + result.output_errors


def run_text(result: RunResult) -> str:
    """The CLI's stdout for a run: each failure (reason line and per-layer diff, as pytest shows it), growth
    warnings, then `run_summary`; the errors (`error_lines`) go to stderr."""
    blocks: list[str] = []
    if not result.update:  # an update records the new state: its overruns are in the summary, not failures
        for verdict in result.failed:
            detail = details(verdict, front_end=result.front_end, base_ref=result.base_ref)
            blocks.append(reason(verdict) + ("\n" + detail if detail else ""))
    # Growth within the ceilings is worth a look; on a failed model the reason and the diff already say it all.
    warnings = [f"{v.name}: warning: {f.message}" for v in result.verdicts if v.passed for f in v.warnings]
    if warnings:
        blocks.append("\n".join(warnings))
    summary = run_summary(result, errors_inline=False)
    if summary:
        blocks.append("\n".join(summary))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def summary_lines(
    verdicts: Sequence[Verdict], *, updated: Iterable[str] = (), update_errors: Iterable[str] = ()
) -> list[str]:
    """One row per counted model: figures, budget use in percent and change against the baseline.

    `updated` names the models whose baseline file was (re)written in this run.
    """
    updated = set(updated)
    # an optional metric (bytes) gets a column only when some model in the run budgets it
    shown = [metric for metric in METRICS if any(verdict.judges(metric) for verdict in verdicts)]
    rows = [("model", "status", *(metric.column for metric in shown), "budget use", "vs baseline")]
    names = [v.name for v in verdicts]
    for verdict in sorted(verdicts, key=lambda v: (v.name, v.measurement.nodeid or "")):
        report = verdict.report
        label = verdict.name
        if names.count(label) > 1 and verdict.measurement.nodeid:
            label = f"{label} ({verdict.measurement.nodeid})"
        rows.append(
            (
                label,
                _status(verdict, verdict.name in updated),
                *(_figure_cell(report, metric) for metric in shown),
                _usage(verdict),
                _versus(verdict),
            )
        )
    figures = tuple(range(2, 2 + len(shown)))
    lines = [line.rstrip() for line in _table(rows, right=figures, indent="")]
    unreadable = sum(1 for v in verdicts if any(f.kind == FindingKind.BASELINE for f in v.violations))
    miscached = sum(1 for v in verdicts if any(f.kind == FindingKind.CACHE_MISMATCH for f in v.violations))
    only_miscached = sum(1 for v in verdicts if v.violations and _only_cache_mismatch(v))
    failed = sum(1 for v in verdicts if not v.passed) - unreadable - only_miscached
    counted = len(verdicts)
    tail = f"{plural(counted, 'model')} counted"
    if failed:
        tail += f", {failed} over budget"
    if unreadable:
        tail += f", {unreadable} with an unreadable baseline"
    if miscached:
        tail += f", {miscached} whose cached count differs from a fresh count"
    lines.append(tail)
    lines.extend(update_errors)
    return lines


# -- helpers ---------------------------------------------------------------------------------------------------


def _only_cache_mismatch(verdict: Verdict) -> bool:
    return all(f.kind == FindingKind.CACHE_MISMATCH for f in verdict.violations)


def _status(verdict: Verdict, updated: bool) -> str:
    """Honest in one word or two: an update judges against the new baseline, so growth over the old one is no
    failure any more; only a ceiling the count is still over is (and a cached count that was wrong, always)."""
    kinds = {f.kind for f in verdict.violations}
    if FindingKind.BASELINE in kinds:
        return "baseline unreadable"
    if FindingKind.CACHE_MISMATCH in kinds:
        return "FAIL"
    if updated:
        return "updated, over budget" if kinds & {FindingKind.CEILING} else "updated"
    if not verdict.passed:
        return "FAIL"
    if verdict.measurement.test_failed:
        return "test failed"
    if verdict.budget.is_empty:
        return "no budget"
    return "ok"


def _usage(verdict: Verdict) -> str:
    highest = verdict.highest_usage()
    if highest is None:
        return "-"
    metric, used = highest
    shown = "over" if used == float("inf") else f"{100.0 * used:.1f}%"
    convention = verdict.budget.convention
    return f"{shown} {metric}" + (f" ({convention})" if convention and metric == "flops" else "")


def _versus(verdict: Verdict) -> str:
    """`=` when nothing changed, else every metric that did: `+50.0% flops, +50.0% macs, +49.4% params`."""
    if verdict.baseline is None:
        return "no baseline"
    changed = []
    for metric in filter(verdict.judges, METRICS):
        delta = verdict.delta(metric) or 0
        if delta:
            changed.append(f"{format_percent(delta, verdict.baseline_value(metric) or 0)} {metric}")
    return ", ".join(changed) if changed else "="


def _figure_cell(report: Report, metric: Metric) -> str:
    """A metric's figure in the summary, `-` when the report has none (bytes of an ONNX model)."""
    return format_figure(metric.of_report(report), metric) if report.measures(metric) else "-"


def _skipped_lines(verdict: Verdict) -> list[str]:
    lines = ["skipped ops (counted as zero):"]
    for op, entry in sorted(verdict.report.skipped_ops.items()):
        layers = ", ".join(layer_label(p) for p in entry.layers[:5]) + (" ..." if len(entry.layers) > 5 else "")
        lines.append(f"  {op} x{entry.calls} in {layers} ({entry.reason})")
    return lines


def baseline_notes(verdict: Verdict) -> list[str]:
    """Say so when the baseline was counted differently: a diff across input shapes is not like for like, and a
    count that moved with torch (or another library) may owe the change to the library."""
    notes = []
    old, new = verdict.baseline, verdict.report
    assert old is not None
    if old.inputs != new.inputs:
        notes.append(f"note: the baseline was counted with inputs {_inputs(old.inputs)}, now {_inputs(new.inputs)}")
    if old.training != new.training:
        notes.append(f"note: the baseline was counted with training={old.training}, now training={new.training}")
    if old.train_mode != new.train_mode:
        modes = ("eval", "train")
        notes.append(
            f"note: the baseline was counted with the model in {modes[old.train_mode]} mode, now in "
            f"{modes[new.train_mode]} mode (batch-norm statistics and dropout show in the diff; forgot .eval()?)"
        )
    versions = version_note(old.versions, new.versions)
    if versions and any(verdict.judges(m) and verdict.delta(m) for m in METRICS):  # only a count that moved
        notes.append(f"note: {versions}")
    return notes


def _inputs(inputs: list) -> str:
    parts = []
    for item in inputs:
        if isinstance(item, dict) and "shape" in item:
            parts.append("x".join(str(d) for d in item["shape"]) + f" {item.get('dtype', '')}".rstrip())
        else:
            parts.append(repr(item))
    return "[" + ", ".join(parts) + "]"


def _figure(value: int | None, prefixes: PrefixSystem = SI) -> str:
    return "-" if value is None else format_count(value, prefixes=prefixes)


def _signed(value: int, prefixes: PrefixSystem = SI) -> str:
    return ("+" if value > 0 else "") + format_count(value, prefixes=prefixes)


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def _table(
    rows: Sequence[Sequence[str]], *, right: Sequence[int] = (), widths: Sequence[int] | None = None, indent: str = "  "
) -> list[str]:
    widths = widths or _widths(rows)
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines
