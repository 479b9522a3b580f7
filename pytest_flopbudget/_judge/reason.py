"""The one-line failure reason of a verdict, phrased next to the verdict it phrases: the number formatter
(`render.formatting`) formats figures and knows nothing of verdicts."""

from __future__ import annotations

from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import format_value, metric_title


def reason(verdict: Verdict) -> str:
    """The one-line failure reason, the worst violation first and the others named, never repeated:
    `resnet50: 8.52 GFLOPs > budget 8.30 GFLOPs (+2.7%); baseline 8.18 GFLOPs (+1 more: MACs)`."""
    return f"{verdict.name}: {reason_clause(verdict)}"


def reason_clause(verdict: Verdict) -> str:
    """`reason` without the model's name in front, for a front end that names the model its own way (a marker
    test's failure line starts with the test's name)."""
    violations = verdict.violations
    if not violations:
        return "within budget"
    first = violations[0]
    text = first.message
    if first.kind == "ceiling" and first.baseline is not None and first.metric is not None:
        text += f"; baseline {format_value(first.baseline, first.metric)}"
    rest = violations[1:]
    if rest:
        names = ", ".join(dict.fromkeys(_clause_name(f.kind, f.metric) for f in rest))
        text += f" (+{len(rest)} more: {names})"
    return text


def _clause_name(kind: str, metric: Metric | None) -> str:
    """`FLOPs` for a ceiling, `FLOPs growth` for max-increase, `baseline` for an unreadable file."""
    if metric is None:
        return str(kind)
    if kind in ("degree", "point ceiling"):  # a budget on the curve: `MACs degree`, `FLOPs point ceiling`
        return f"{metric_title(metric)} {kind}"
    return f"{metric_title(metric)} growth" if kind == "increase" else metric_title(metric)
