"""Per-layer differences between two Reports: which layers got more (or less) expensive, were added or removed.

A total alone says *that* a model grew; the per-layer diff says *where*, which is what a reviewer needs to decide
whether an overrun is a bug (a layer accidentally widened) or intended. Layers are compared on their exclusive
costs (`Report.layers`), so a change shows up on the module that did the work, not on all its ancestors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_flopbudget._metrics import FLOPS, METRICS, Metric
from pytest_flopbudget._report import Report

#: The metrics a per-layer diff is shown for: every one, in the registry's order.
DIFF_METRICS = METRICS


def metric_value(report: Report, metric: Metric) -> int:
    """The report's total for one metric (kept for callers; `Report.metric` is the accessor)."""
    return report.metric(metric)


@dataclass(frozen=True)
class LayerChange:
    """One layer whose cost changed; `baseline` is None for an added layer, `now` None for a removed one."""

    path: str
    baseline: int | None
    now: int | None

    @property
    def status(self) -> str:
        if self.baseline is None:
            return "added"
        if self.now is None:
            return "removed"
        return "changed"

    @property
    def delta(self) -> int:
        return (self.now or 0) - (self.baseline or 0)

    @property
    def percent(self) -> float | None:
        """Change relative to the baseline in percent; None when there is nothing to compare with."""
        if not self.baseline:
            return None
        return 100.0 * self.delta / self.baseline


@dataclass(frozen=True)
class LayerDiff:
    """Every changed layer for one metric, largest absolute change first, and the two totals."""

    metric: Metric
    changes: tuple[LayerChange, ...]
    baseline_total: int
    now_total: int

    @property
    def delta(self) -> int:
        return self.now_total - self.baseline_total

    @property
    def percent(self) -> float | None:
        return 100.0 * self.delta / self.baseline_total if self.baseline_total else None

    def top(self, n: int) -> tuple[Sequence[LayerChange], Sequence[LayerChange]]:
        """The `n` largest changes and the rest (which reporters collapse into a count)."""
        return self.changes[:n], self.changes[n:]

    def count(self, status: str) -> int:
        return sum(1 for change in self.changes if change.status == status)


def diff_layers(baseline: Report, now: Report, metric: Metric = FLOPS) -> LayerDiff:
    """Compare `now` with `baseline` layer by layer on `metric`; unchanged layers are left out."""
    old = baseline.layer_metric(metric)
    new = now.layer_metric(metric)
    changes = []
    for path in sorted(old.keys() | new.keys()):
        change = LayerChange(path, old.get(path), new.get(path))
        if change.delta != 0:
            changes.append(change)
    changes.sort(key=lambda c: (-abs(c.delta), c.path))
    return LayerDiff(metric, tuple(changes), baseline.metric(metric), now.metric(metric))


def top_layers(report: Report, metric: Metric = FLOPS, n: int = 15) -> list[tuple[str, int]]:
    """The `n` most expensive layers on `metric` (exclusive costs), for a failure with no baseline to diff."""
    values = [(path, value) for path, value in report.layer_metric(metric).items() if value]
    values.sort(key=lambda item: (-item[1], item[0]))
    return values[:n]
