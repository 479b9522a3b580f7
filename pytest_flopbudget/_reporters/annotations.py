"""The CI findings every machine-readable reporter shares: one `Annotation` per thing a reviewer should see.

GitHub annotations and GitLab Code Quality issues carry the same facts (how bad, which model, which metric, what
happened, which line declares the limit) in different syntaxes. Deriving them once, here, from the core's
`Verdict`s (and from `--base-ref` budget changes) keeps the two reporters in agreement and lets each stay a thin
formatter. The order of importance is decided here too, because GitHub shows only the first ten of each level.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.diff_groups import ChangeGroup, group_changes
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import ERROR, WARNING, Finding, FindingKind, Verdict
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import (
    format_count,
    format_percent,
    format_value,
    metric_title,
    plural,
)
from pytest_flopbudget._run import Unchecked
from pytest_flopbudget._units import SI, PrefixSystem

#: Findings about growth, shown with the layers that grew most.
_LAYER_KINDS = (FindingKind.CEILING, FindingKind.INCREASE, FindingKind.GROWTH)

#: How many changed layers an annotation names; the job summary and the log have the full table.
HINT_LAYERS = 3


@dataclass(frozen=True)
class Annotation:
    """One finding, ready to be placed on a line of the user's files.

    `message` is the one-line statement (`resnet50: 8.52 GFLOPs > budget 8.30 GFLOPs (+2.7%); baseline ...`);
    `details` are extra lines (the layers that changed most). `rank` orders findings of one level, most important
    first. `source_file` and `source_line` are where the limit is declared (None when nothing declares it).
    """

    level: str
    kind: str
    model: str
    #: What it is about: a finding's metric (its name), a budget change's setting; None for a model not counted.
    subject: str | None
    title: str
    message: str
    details: tuple[str, ...] = ()
    source_file: str | None = None
    source_line: int | None = None
    rank: tuple[int, float] = (0, 0.0)
    nodeid: str | None = None

    @property
    def text(self) -> str:
        """The message and its details, one per line."""
        return "\n".join((self.message, *self.details))

    def sort_key(self) -> tuple[int, tuple[int, float], str, str, str]:
        return (0 if self.level == ERROR else 1, self.rank, self.model, self.subject or "", self.message)


def collect(
    verdicts: Iterable[Verdict], changes: Iterable[BudgetChange] = (), unchecked: Iterable[Unchecked] = ()
) -> list[Annotation]:
    """Every annotation for `verdicts`, `changes` and `unchecked` models, errors first, most important first."""
    found = [annotation for verdict in verdicts for annotation in from_verdict(verdict)]
    found.extend(from_change(change) for change in changes)
    found.extend(from_unchecked(model) for model in unchecked)
    return sorted(found, key=Annotation.sort_key)


def from_verdict(verdict: Verdict) -> list[Annotation]:
    """A failing model gets one error with all its violations (the worst one on the line that declares its
    limit); a passing one a warning per finding (growth, skipped ops). A model that failed gets no growth
    warnings on top: its error already says it grew."""
    violations = verdict.violations
    if not violations:
        # one warning per kind (growth in FLOPs and MACs is one growth warning), most important finding first
        by_kind: dict[str, list[Finding]] = {}
        for finding in sorted(verdict.warnings, key=lambda f: f.rank):
            by_kind.setdefault(str(finding.kind), []).append(finding)
        merged = []
        for findings in by_kind.values():
            first = _from_finding(verdict, findings[0])
            also = tuple(f"also: {verdict.name}: {finding.message}" for finding in findings[1:])
            merged.append(dataclasses.replace(first, details=(*first.details, *also)))
        return merged
    worst = _from_finding(verdict, violations[0])
    others = tuple(f"also: {verdict.name}: {finding.message}" for finding in violations[1:])
    return [dataclasses.replace(worst, message=reason(verdict), details=(*worst.details, *others))]


def from_change(change: BudgetChange) -> Annotation:
    """A budget raised or removed since the base ref: a warning on the line that now declares it."""
    source = change.source
    title = f"flopbudget: {change.model} budget {change.kind} since {change.ref}"
    if not change.model:
        title = f"flopbudget: budgets at {change.ref} cannot be compared"
    return Annotation(
        level=WARNING,
        kind=change.kind,
        model=change.model,
        subject=change.setting or None,
        title=title,
        message=change.message,
        source_file=source.file,
        source_line=source.line,
        rank=(0, 0.0),  # the point of --base-ref: a pull request must not quietly raise its own limit
    )


def from_unchecked(model: Unchecked) -> Annotation:
    """A model that could not be checked at all (its target does not import, it raised): an error first of all.

    Its cost is unknown, which is worse than an overrun, so it sorts before every overrun.
    """
    source = model.origin or Location()
    return Annotation(
        level=ERROR,
        kind="unchecked",
        model=model.name,
        subject=None,
        title=f"flopbudget: {model.name} not checked",
        message=f"{model.name}: not checked: {model.message}",
        source_file=source.file,
        source_line=source.line,
        rank=(-1, 0.0),
    )


def relative_path(file: str | None, root: str | os.PathLike[str]) -> str | None:
    """`file` relative to `root` with forward slashes, or None when it is not inside `root`.

    CI systems resolve annotation paths against the checkout; a path outside it would point nowhere.
    """
    if not file:
        return None
    try:
        for resolve in (os.path.abspath, os.path.realpath):  # realpath: /tmp vs /private/tmp and other symlinks
            base, absolute = resolve(os.fspath(root)), resolve(file)
            if os.path.commonpath([base, absolute]) == base:
                relative = os.path.relpath(absolute, base)
                return None if relative == "." else relative.replace(os.sep, "/")
    except ValueError:  # different drives on Windows
        pass
    return None


def signed_count(value: int, prefixes: PrefixSystem = SI) -> str:
    return ("+" if value > 0 else "") + format_count(value, prefixes=prefixes)


# -- helpers ---------------------------------------------------------------------------------------------------------


def _from_finding(verdict: Verdict, finding: Finding) -> Annotation:
    name, metric = verdict.name, finding.metric
    message = f"{name}: {finding.message}"
    if finding.kind == FindingKind.CEILING and finding.baseline is not None and metric is not None:
        message += f"; baseline {format_value(finding.baseline, metric)}"
    source = finding.source or verdict.measurement.origin
    details = _layer_hint(verdict, metric) if finding.kind in _LAYER_KINDS else ()
    return Annotation(
        level=finding.severity,
        kind=finding.kind,
        model=name,
        subject=metric,
        title=_title(name, finding, warned=verdict.budget.warn_increase is not None),
        message=message,
        details=details,
        source_file=source.file,
        source_line=source.line,
        rank=finding.rank,
        nodeid=verdict.measurement.nodeid,
    )


def _title(name: str, finding: Finding, *, warned: bool = False) -> str:
    """`warned`: the budget has a warn-increase, so growth is only reported over it."""
    unit = metric_title(finding.metric)
    if warned and finding.kind == FindingKind.GROWTH:
        return f"flopbudget: {name} {unit} grew more than warn-increase"
    titles = {
        "ceiling": f"over the {unit} budget",
        "increase": f"{unit} grew more than max-increase",
        "baseline": "baseline file unusable",
        "growth": f"{unit} grew over the baseline",
        "skipped": "ops not counted",
        "cache mismatch": "cached count differs from a fresh count",
        "degree": f"{unit} grow faster than max-degree",
        "point ceiling": f"over a {unit} ceiling on the curve",
        "no formula": "budget on the curve cannot be checked",
        "formula": f"{unit} formula changed",
    }
    return f"flopbudget: {name} {titles.get(finding.kind, finding.kind)}"


def _layer_hint(verdict: Verdict, metric: Metric | None) -> tuple[str, ...]:
    """`largest layer changes: layer4.2.conv2 +231M (+100.0%), fc +4.10M (added); 3 more`, or nothing.

    Repeated blocks that changed alike are one entry (`blocks.{0..3}.up x4 +4.10k (+12.5%)`), as in the job
    summary: otherwise the three entries a line has room for would say one thing three times."""
    if metric is None or not metric.counted:
        return ()
    diff = verdict.diff(metric)
    if diff is None or not diff.changes:
        return ()
    groups = group_changes(diff.changes)
    shown, rest = groups[:HINT_LAYERS], [change for group in groups[HINT_LAYERS:] for change in group.changes]
    parts = [f"{group.label} {signed_count(group.delta, metric.prefixes)} ({_change_note(group)})" for group in shown]
    line = f"largest {metric_title(metric)} changes by layer: " + ", ".join(parts)
    if rest:
        line += f"; {plural(len(rest), 'more changed layer')}"
    return (line,)


def _change_note(change: ChangeGroup) -> str:
    if change.status != "changed":
        return change.status
    return format_percent(change.delta, change.baseline or 0)
