"""`flopbudget diff` as an output: the per-layer change of every metric since the baseline, without judging.

The run judges as always (the verdict holds the baseline, its file name and the per-layer diffs); this output
reads only the figures, never the findings, so no budget decides what it prints. A model without a readable
baseline, or that could not be counted, is an `error:` block.
"""

from __future__ import annotations

from pytest_flopbudget._judge.diff import DIFF_METRICS
from pytest_flopbudget._judge.verdict import FindingKind, Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._render.formatting import format_pair, format_percent, format_value, metric_title
from pytest_flopbudget._report import Report
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._reporters.terminal import baseline_notes, diff_table, phase_lines
from pytest_flopbudget._run import RunResult


class LayerDiffOutput:
    """One block per model, in the order of the result, then the models that could not be counted."""

    workspace_variables: tuple[str, ...] = ()

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        blocks = diff_blocks(findings.result)
        if blocks:
            context.stream.write("\n\n".join(blocks) + "\n")


def diff_blocks(result: RunResult) -> list[str]:
    blocks = [_block(verdict) for verdict in result.verdicts]
    blocks.extend(f"error: {e.message}" for e in result.unchecked)
    return blocks


def has_errors(result: RunResult) -> bool:
    """Whether some model could not be diffed: not counted, or no readable baseline to diff against."""
    return bool(result.unchecked) or any(v.baseline is None for v in result.verdicts)


def _block(verdict: Verdict) -> str:
    unreadable = [f.message for f in verdict.violations if f.kind == FindingKind.BASELINE]
    if unreadable:
        return f"error: {unreadable[0]}"
    if verdict.baseline is None:
        return (
            f"error: {verdict.name}: no baseline yet ({verdict.baseline_file}); "
            f"run `flopbudget check --update {verdict.name}` to create it"
        )
    return format_diff(verdict)


def format_diff(verdict: Verdict) -> str:
    """`resnet18: FLOPs 3.40G -> 3.64G (+7.1%), ...` then one per-layer table per metric that changed."""
    baseline = verdict.baseline
    assert baseline is not None
    shown = verdict.baseline_file
    changed = changed_metrics(verdict)
    if not changed:
        figures = ", ".join(_figure(verdict.report, m) for m in METRICS.counted if verdict.judges(m))
        lines = [f"{verdict.name}: no change since {shown} ({figures})"]
    else:
        totals = ", ".join(
            _change(verdict, m) for m in DIFF_METRICS if m in changed or (m.counted and verdict.judges(m))
        )
        lines = [f"{verdict.name}: {totals}"]
        for metric in changed:
            diff = verdict.diff(metric)
            assert diff is not None
            lines.append(f"{metric_title(metric)} per layer, against {shown}:")
            lines.extend(diff_table(diff))
    lines.extend(phase_lines(verdict, [m for m in METRICS.per_op if verdict.judges(m)], shown or "the baseline"))
    lines.extend(baseline_notes(verdict))  # the same words as a failure's details for a baseline counted differently
    return "\n".join(lines)


def changed_metrics(verdict: Verdict) -> list[Metric]:
    """The metrics shown for `verdict` whose per-layer diff against the baseline is not empty."""
    return [m for m in DIFF_METRICS if verdict.judges(m) and (diff := verdict.diff(m)) is not None and diff.changes]


def _figure(report: Report, metric: Metric) -> str:
    return format_value(report.metric(metric), metric)


def _change(verdict: Verdict, metric: Metric) -> str:
    """`8.18 GFLOPs -> 8.52 GFLOPs (+4.2%)`, or `25.6M params (unchanged)`."""
    now, old = verdict.value(metric), verdict.baseline_value(metric) or 0
    if now == old:
        return f"{format_value(now, metric)} (unchanged)"
    shown_old, shown_now = format_pair(old, now, metric)
    return f"{shown_old} -> {shown_now} ({format_percent(now - old, old)})"
