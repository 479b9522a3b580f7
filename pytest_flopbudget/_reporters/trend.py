"""What the history exports record: one figure per counted model and metric, under a name that stays the same.

GitLab's metrics report (`metrics:PATH`), github-action-benchmark's JSON (`benchmark:PATH`), Bencher's BMF
(`bencher:PATH`) and the pytest JUnit properties each chart a model's cost over commits, outside this tool. They
get the same figures, chosen here once: every metric the model's count measured, whether or not its budget sets
it (the history is the point), an optional one (the memory metrics) only where its backend measured it (not
measured is no point, never a zero), integer ops only where the model has or had some or budgets them (as every
other output shows them). A model that could not be counted has no figure and is left out (every
other output reports it as an error).

Names come from pyproject keys and test ids, which nobody reviews: each is made one inert line
(`safe_text.one_line`) before a format escapes it further, and kept unique, since a chart is keyed by its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._safe_text import one_line

#: The unit symbol of the memory metrics (`B`), written out as the unit word the exports use.
BYTES_SYMBOL = "B"


@dataclass(frozen=True)
class Figure:
    """One model's figure for one metric, with its ceiling and its baseline's figure where there are any."""

    metric: Metric
    value: int
    limit: int | None
    baseline: int | None

    @property
    def over(self) -> bool:
        return self.limit is not None and self.value > self.limit


def figures(verdict: Verdict) -> list[Figure]:
    """Every metric the model's count measured, in the order outputs list metrics."""
    found = []
    for metric in METRICS:
        if not verdict.report.measures(metric) or (metric.omit_zero and not verdict.judges(metric)):
            continue  # integer ops of a model that has none, now or in its baseline, and no budget: no series
        limit = verdict.budget.limit(metric)
        ceiling = limit.value if limit is not None else None
        found.append(Figure(metric, verdict.value(metric), ceiling, verdict.baseline_value(metric)))
    return found


def named(verdicts: Sequence[Verdict], shown: Callable[[str], str] = one_line) -> list[tuple[str, Verdict]]:
    """Each verdict, ordered by name (then test id), with its name as an export writes it: `shown(name)`.

    A name already taken (two tests counting models of one name, or two names that read the same once made inert)
    gets its test id added, `name [tests/test_x.py::test_x]`, then a number: a chart keyed by name would merge
    them. The first keeps its plain name, so a pyproject model is named the same by both front ends.
    """
    taken: set[str] = set()
    out = []
    for verdict in sorted(verdicts, key=lambda v: (v.name, v.measurement.nodeid or "")):
        name = shown(verdict.name)
        if name in taken and verdict.measurement.nodeid:
            name = shown(f"{verdict.name} [{verdict.measurement.nodeid}]")
        base, number = name, 1
        while name in taken:
            number += 1
            name = f"{base} ({number})"
        taken.add(name)
        out.append((name, verdict))
    return out


def unit(metric: Metric) -> str:
    """The unit word of a metric's figures: `FLOPs`, `MACs`, `params`, `skipped op calls`, `bytes`."""
    if metric.symbol == BYTES_SYMBOL:
        return "bytes"
    if metric.symbol:
        return metric.symbol
    return f"{metric.word}s" if metric.whole else metric.word
