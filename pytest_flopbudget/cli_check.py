"""`flopbudget check` and `flopbudget diff`: every pyproject model against its budget and baseline.

Judging and formatting are the plugin's own (`check.judge`, `check.reason`, `reporters.terminal`), so a model fails
the pre-commit hook exactly when it fails `pytest`, with the same words. A check runs in two steps: `check_models`
counts and judges everything into a `CheckOutcome` (no output), then `print_outcome` writes it. Keeping the
verdicts as data lets other outputs (CI annotations, report files) be added next to the terminal text.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from .baseline import BaselineStore
from .cli_progress import Progress
from .config import ModelEntry, Settings
from .diff import metric_value
from .errors import BaselineError, FlopBudgetError
from .formatting import format_pair, format_percent, format_value, reason
from .report import Report
from .reporters import terminal
from .source import display_path
from .verdict import Measurement, Verdict, judge

EXIT_OK = 0
EXIT_OVER_BUDGET = 1
EXIT_ERROR = 2

UPDATE_HINT = "`flopbudget check --update`"
DIFF_METRICS = ("flops", "macs", "params", "skipped")
_TITLES = {"flops": "FLOPs", "macs": "MACs", "params": "params", "skipped": "skipped op calls"}


@dataclass
class ModelError:
    """A model that could not be counted (its target does not import, its inputs are wrong, it raised)."""

    name: str
    message: str


@dataclass
class CheckOutcome:
    """Everything one `flopbudget check` found, before any of it is printed."""

    verdicts: list[Verdict] = field(default_factory=list)
    errors: list[ModelError] = field(default_factory=list)
    update: bool = False
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    update_errors: list[str] = field(default_factory=list)
    baseline_dir: str = ""

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    @property
    def exit_code(self) -> int:
        """2 when something could not be checked (worse than an overrun: the answer is unknown), 1 on an overrun.

        `--update` records the current state, so an overrun does not fail it; a baseline it could not write does.
        """
        if self.errors or self.update_errors:
            return EXIT_ERROR
        if self.failed and not self.update:
            return EXIT_OVER_BUDGET
        return EXIT_OK


def count_models(
    entries: Sequence[ModelEntry], settings: Settings, err: TextIO | None = None
) -> tuple[list[Measurement], list[ModelError]]:
    """Count every entry; one broken model is reported and the others are still counted."""
    from .entries import count_entry

    measurements: list[Measurement] = []
    errors: list[ModelError] = []
    with Progress(len(entries), err or sys.stderr) as progress:
        for entry in entries:
            progress.start(entry.name)
            try:
                report = count_entry(entry, settings.root)
            except FlopBudgetError as exc:
                errors.append(ModelError(entry.name, str(exc)))
            else:
                measurements.append(Measurement(entry.name, report, entry.budget, entry.source))
            progress.advance()
    return measurements, errors


def check_models(
    entries: Sequence[ModelEntry], settings: Settings, *, update: bool = False, err: TextIO | None = None
) -> CheckOutcome:
    """Count, judge and (with `update`) write baselines; judged before writing, so the summary shows the change."""
    store = BaselineStore(settings.baseline_dir)
    measurements, errors = count_models(entries, settings, err)
    outcome = CheckOutcome(
        [judge(m, store) for m in measurements], errors, update, baseline_dir=display_path(str(store.directory))
    )
    if update:
        for measurement in measurements:
            try:
                changed = store.save(measurement.name, measurement.report)
            except (BaselineError, OSError) as exc:
                outcome.update_errors.append(f"baseline for {measurement.name!r} not written: {exc}")
                continue
            (outcome.written if changed else outcome.unchanged).append(measurement.name)
    return outcome


def print_outcome(outcome: CheckOutcome, out: TextIO) -> None:
    """Failures (reason line + per-layer diff, as in pytest), warnings, errors, then the summary table."""
    blocks: list[str] = []
    if not outcome.update:  # an update records the new state: its overruns are in the summary, not failures
        for verdict in outcome.failed:
            detail = terminal.details(verdict, update_hint=UPDATE_HINT)
            blocks.append(reason(verdict) + ("\n" + detail if detail else ""))
    # Growth within the ceilings is worth a look; on a failed model the reason and the diff already say it all.
    warnings = [f"{v.name}: warning: {f.message}" for v in outcome.verdicts if v.passed for f in v.warnings]
    if warnings:
        blocks.append("\n".join(warnings))
    if outcome.errors:
        blocks.append("\n".join(f"error: {e.message}" for e in outcome.errors))
    summary: list[str] = []
    if outcome.verdicts:
        updated = outcome.written + outcome.unchanged
        errors = [f"error: {message}" for message in outcome.update_errors]
        summary = terminal.summary_lines(outcome.verdicts, updated=updated, update_errors=errors)
    if outcome.errors:
        names = ", ".join(e.name for e in outcome.errors)
        summary.append(f"{len(outcome.errors)} model{'s' if len(outcome.errors) != 1 else ''} not checked: {names}")
    if outcome.update:
        summary.append(
            f"baselines in {outcome.baseline_dir}: {len(outcome.written)} written, {len(outcome.unchanged)} unchanged"
        )
    if summary:
        blocks.append("\n".join(summary))
    if blocks:
        out.write("\n\n".join(blocks) + "\n")


# -- flopbudget diff ---------------------------------------------------------------------------------------------


def diff_models(entries: Sequence[ModelEntry], settings: Settings, out: TextIO, err: TextIO | None = None) -> int:
    """Print the per-layer change of every metric against the baseline; no budget is looked at."""
    store = BaselineStore(settings.baseline_dir)
    measurements, errors = count_models(entries, settings, err)
    blocks: list[str] = []
    status = EXIT_OK
    for measurement in measurements:
        shown = display_path(str(store.path_for(measurement.name)))
        try:
            baseline = store.load(measurement.name)
        except BaselineError as exc:
            blocks.append(f"error: {exc}")
            status = EXIT_ERROR
            continue
        if baseline is None:
            blocks.append(
                f"error: {measurement.name}: no baseline yet ({shown}); "
                f"run `flopbudget check --update {measurement.name}` to create it"
            )
            status = EXIT_ERROR
            continue
        blocks.append(format_diff(Verdict(measurement, [], baseline, shown)))
    if errors:
        blocks.extend(f"error: {e.message}" for e in errors)
        status = EXIT_ERROR
    if blocks:
        out.write("\n\n".join(blocks) + "\n")
    return status


def format_diff(verdict: Verdict) -> str:
    """`resnet18: FLOPs 3.40G -> 3.64G (+7.1%), ...` then one per-layer table per metric that changed."""
    baseline = verdict.baseline
    assert baseline is not None
    shown = verdict.baseline_file
    changed = [m for m in DIFF_METRICS if (diff := verdict.diff(m)) is not None and diff.changes]
    if not changed:
        figures = ", ".join(_figure(verdict.report, m) for m in ("flops", "macs", "params"))
        lines = [f"{verdict.name}: no change since {shown} ({figures})"]
    else:
        totals = ", ".join(_change(verdict, m) for m in DIFF_METRICS if m in changed or m != "skipped")
        lines = [f"{verdict.name}: {totals}"]
        for metric in changed:
            diff = verdict.diff(metric)
            assert diff is not None
            lines.append(f"{_TITLES[metric]} per layer, against {shown}:")
            lines.extend(terminal.diff_table(diff))
    lines.extend(terminal._baseline_notes(verdict))  # the plugin's wording for a baseline counted differently
    return "\n".join(lines)


def _figure(report: Report, metric: str) -> str:
    return format_value(metric_value(report, metric), metric)


def _change(verdict: Verdict, metric: str) -> str:
    """`8.18 GFLOPs -> 8.52 GFLOPs (+4.2%)`, or `25.6M params (unchanged)`."""
    now, old = verdict.value(metric), verdict.baseline_value(metric) or 0
    if now == old:
        return f"{format_value(now, metric)} (unchanged)"
    shown_old, shown_now = format_pair(old, now, metric)
    return f"{shown_old} -> {shown_now} ({format_percent(now - old, old)})"
