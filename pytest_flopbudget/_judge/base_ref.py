"""`flopbudget check --base-ref REF`: which budgets a change raised or removed compared with REF.

A budget only protects anything if a pull request cannot quietly lift its own limit: the model grows, the PR
bumps `flops = "8.3G"` to `"9G"` in the same diff, CI is green. This module reads `pyproject.toml` as it was at
REF (`git show REF:path`), parses it with the same validator as the current file, and lists every limit that is
higher now or gone, each tied to the line that now declares it (or the model table that lost it) so CI can
annotate that line. Lowered and new budgets are fine and not reported. Marker budgets live in test code and are
not compared.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pytest_flopbudget._config.budget import MAX_INCREASE, Budget, Limit
from pytest_flopbudget._config.location import LocatedError, Location, Origin
from pytest_flopbudget._config.pyproject import BUDGET_KEYS, ModelEntry, Settings, parse_settings
from pytest_flopbudget._errors import BaselineError, FlopBudgetError
from pytest_flopbudget._git import git_said, run_git
from pytest_flopbudget._judge.baseline import MAX_BYTES, BaselineSource, baseline_filename, parse_baseline
from pytest_flopbudget._judge.verdict import Kind, Measurement
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._render.formatting import format_percent
from pytest_flopbudget._report import Report


class ChangeKind(Kind):
    """How a pull request changed a budget, as `--base-ref` reports it."""

    RAISED = "raised"
    REMOVED = "removed"
    #: `[tool.flopbudget]` at the base ref does not validate, so nothing could be compared.
    UNREADABLE = "unreadable"
    #: The change rewrote the model's baseline file: the comparison uses the base's, so growth stays visible.
    BASELINE_CHANGED = "baseline changed"
    #: The change deleted the model's baseline file.
    BASELINE_DELETED = "baseline deleted"
    #: The model is new in this change: there is nothing at the base to compare it with.
    MODEL_ADDED = "added"


RAISED = ChangeKind.RAISED
REMOVED = ChangeKind.REMOVED
UNREADABLE = ChangeKind.UNREADABLE
BASELINE_CHANGED = ChangeKind.BASELINE_CHANGED
BASELINE_DELETED = ChangeKind.BASELINE_DELETED
MODEL_ADDED = ChangeKind.MODEL_ADDED

_FETCH_HINT = (
    "fetch it first (in GitHub Actions: actions/checkout with fetch-depth: 0; elsewhere: git fetch origin <branch>)"
)


class BaseRefError(FlopBudgetError):
    """The base ref cannot be read: not a git repository, an unknown ref, or git itself failed."""


@dataclass(frozen=True)
class BudgetChange:
    """One budget that is higher (`raised`) or gone (`removed`) compared with `ref`.

    `setting` is the pyproject key (`flops`, `max-increase`, ...), or "" when the whole model was removed.
    `kind` is a `ChangeKind`: `raised`, `removed`, `unreadable` (the budgets at `ref` do not validate; `before`
    says why), or for `setting == "baseline"` what the change did to the model's baseline file (`baseline
    changed`, `baseline deleted`) or that the model is new (`added`).
    `before` and `after` are the values as written; `source` is where the budget is declared now (for a removed
    budget: its model table, or the `[tool.flopbudget]` table when the model is gone).
    """

    model: str
    setting: str
    kind: str
    before: str | None
    after: str | None
    ref: str
    source: Location
    percent: str | None = None

    @property
    def message(self) -> str:
        """`resnet50: flops budget raised from 8.3G to 9G (+8.4%) since origin/main`."""
        what = f"{self.setting} budget" if self.setting and self.setting != MAX_INCREASE else self.setting
        if self.kind == RAISED:
            change = f" ({self.percent})" if self.percent else ""
            return f"{self.model}: {what} raised from {self.before} to {self.after}{change} since {self.ref}"
        if self.kind == UNREADABLE:
            return f"budgets at {self.ref} cannot be compared, check them by hand: {self.before}"
        if self.kind == BASELINE_CHANGED:
            return (
                f"{self.model}: baseline {self.after} changed since {self.ref}; compared with the baseline at "
                f"{self.ref} ({self.before})"
            )
        if self.kind == BASELINE_DELETED:
            return f"{self.model}: baseline {self.before} deleted since {self.ref}"
        if self.kind == MODEL_ADDED:
            return f"{self.model}: new since {self.ref}, no baseline there to compare with ({self.after})"
        if not self.setting:
            listed = f" (it had {self.before})" if self.before else ""
            return f"{self.model}: model and its budgets removed since {self.ref}{listed}"
        return f"{self.model}: {what} {self.before} removed since {self.ref}"

    def __str__(self) -> str:
        """The terminal line: `pyproject.toml:12: tool.flopbudget.models.resnet50.flops: warning: ...`."""
        where = self.source.where()
        return f"{where}: warning: {self.message}" if where else f"warning: {self.message}"


def budget_changes(settings: Settings, ref: str) -> list[BudgetChange]:
    """Budgets raised or removed in `settings` (the current, validated pyproject) compared with `ref`.

    Raises `BaseRefError` for a ref git does not know, a project outside a git repository, or no pyproject.
    A pyproject.toml that did not exist at `ref` has nothing to compare with: every budget is new.
    A `[tool.flopbudget]` at `ref` that does not validate cannot be compared either; that is reported as one
    `unreadable` change so the reviewer checks the budgets by hand rather than trusting a silent pass.
    """
    if settings.pyproject is None:
        raise BaseRefError(f"--base-ref {ref}: no pyproject.toml, so there are no budgets to compare")
    text = read_at_ref(settings.pyproject, ref)
    if text is None:
        return []
    try:
        base = parse_settings(text, settings.pyproject)
    except LocatedError as exc:
        first = str(exc.problems[0]) if exc.problems else str(exc)
        where = settings.source if settings.source.file else _pyproject_file(settings)
        return [BudgetChange("", "", UNREADABLE, first.splitlines()[0], None, ref, where)]
    return compare_budgets(base, settings, ref)


def compare_budgets(base: Settings, current: Settings, ref: str) -> list[BudgetChange]:
    """Every limit higher in `current` than in `base`, or present in `base` and absent now, model by model."""
    changes: list[BudgetChange] = []
    for name, old in base.models.items():
        new = current.models.get(name)
        if new is None:
            where = current.source if current.source.file else _pyproject_file(current)
            changes.append(BudgetChange(name, "", REMOVED, _budget_text(old.budget), None, ref, where))
            continue
        changes.extend(_compare_model(old, new, ref))
    return changes


def _pyproject_file(settings: Settings) -> Location:
    """The project's pyproject.toml as a whole: where a change without a line of its own is reported."""
    return Location(str(settings.pyproject or ""), origin=Origin.PYPROJECT)


def read_at_ref(pyproject: Path, ref: str) -> str | None:
    """The text of `pyproject` at `ref` (`git show REF:path`), or None when the file did not exist there."""
    return GitRevision(pyproject.resolve().parent, ref).read(pyproject)


class GitRevision:
    """Files as they are at one ref of the git repository holding `directory`, read with `git show`; nothing is
    ever checked out."""

    def __init__(self, directory: Path, ref: str) -> None:
        # git refs hold no whitespace or control characters: such a value (a newline, an escape) is refused
        # here, quoted on one line, rather than echoed into later messages where it would split or act on them
        if not ref or ref.startswith("-") or any(c.isspace() or not c.isprintable() for c in ref):
            raise BaseRefError(f"--base-ref {ref!r}: expected a branch, tag or commit such as origin/main")
        self.ref = ref
        found = _run(directory, "rev-parse", "--show-toplevel")
        if found.returncode != 0:
            if "not a git repository" in found.stderr or "No such file" in found.stderr:
                raise BaseRefError(f"--base-ref {ref}: {directory} is not inside a git repository")
            _raise(ref, f"cannot run git in {directory}", found)
        self.root = Path(found.stdout.strip()).resolve()
        resolved = _run(self.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if resolved.returncode != 0:
            _raise(ref, f"git does not know this ref; {_FETCH_HINT}", resolved)
        self.commit = resolved.stdout.strip()

    def relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            raise BaseRefError(
                f"--base-ref {self.ref}: {path} is not inside the git repository at {self.root}"
            ) from None

    def read(self, path: Path) -> str | None:
        """The file's text at the ref, None when it did not exist there."""
        relative = self.relative(path)
        size = _run(self.root, "cat-file", "-s", f"{self.commit}:{relative}")
        if size.returncode != 0:
            return None
        if int(size.stdout.strip() or 0) > MAX_BYTES:  # never pull a huge blob into memory to refuse it after
            raise BaselineError(f"{self.ref}:{relative}: {size.stdout.strip()} bytes, more than {MAX_BYTES} bytes")
        shown = _run(self.root, "show", f"{self.commit}:{relative}")
        if shown.returncode != 0:
            _raise(self.ref, f"cannot read {relative} there", shown)
        return shown.stdout


class BaseBaselines:
    """The baselines as they are at the base ref: what `--base-ref` compares with, so that a change that rewrites
    its own baseline cannot hide its growth. Read-only; implements `baseline.BaselineSource`."""

    def __init__(self, directory: Path, ref: str) -> None:
        self.directory = directory
        self.revision = GitRevision(directory if directory.is_dir() else directory.parent, ref)
        self._texts: dict[str, str | None] = {}

    def _path(self, name: str) -> Path:
        return self.directory / baseline_filename(name)

    def display(self, name: str) -> str:
        return f"{self.revision.ref}:{self.revision.relative(self._path(name))}"

    def text(self, name: str) -> str | None:
        if name not in self._texts:
            self._texts[name] = self.revision.read(self._path(name))
        return self._texts[name]

    def load(self, name: str) -> Report | None:
        text = self.text(name)
        return None if text is None else parse_baseline(text, self.display(name))


def baseline_changes(
    measurements: Sequence[Measurement], base: BaseBaselines, head: BaselineSource, base_models: set[str] | None
) -> list[BudgetChange]:
    """What the change did to the baselines of the models it counts: rewrote one (the comparison still uses the
    base's), deleted one, or added a model the base did not have (nothing to compare with)."""
    changes: list[BudgetChange] = []
    ref = base.revision.ref
    for measurement in measurements:
        name, where = measurement.name, measurement.origin
        try:
            before = base.text(name)
        except BaselineError:
            continue  # unreadable at the base (over the size cap): the model's verdict reports it
        after = head.text(name)
        if before is None:
            if base_models is not None and name not in base_models:
                changes.append(BudgetChange(name, "baseline", MODEL_ADDED, None, head.display(name), ref, where))
        elif after is None:
            changes.append(BudgetChange(name, "baseline", BASELINE_DELETED, base.display(name), None, ref, where))
        elif after != before:
            shown_before, shown_after = base.display(name), head.display(name)
            changes.append(BudgetChange(name, "baseline", BASELINE_CHANGED, shown_before, shown_after, ref, where))
    return changes


def base_model_names(settings: Settings, ref: str) -> set[str] | None:
    """The pyproject model names at `ref`; None when they cannot be read (then nothing is called new)."""
    if settings.pyproject is None:
        return None
    text = read_at_ref(settings.pyproject, ref)
    if text is None:
        return set()
    try:
        return set(parse_settings(text, settings.pyproject).models)
    except LocatedError:
        return None


def _compare_model(old: ModelEntry, new: ModelEntry, ref: str) -> list[BudgetChange]:
    changes = []
    for metric, before in old.budget.limits.items():
        after = new.budget.limit(metric)
        setting = _setting(after or before, metric)
        if after is None:
            changes.append(BudgetChange(new.name, setting, REMOVED, before.text, None, ref, new.source))
        elif after.value > before.value:
            percent = format_percent(after.value - before.value, before.value) if before.value else None
            changes.append(BudgetChange(new.name, setting, RAISED, before.text, after.text, ref, after.source, percent))
    before_increase, after_increase = old.budget.max_increase, new.budget.max_increase
    if before_increase is not None:
        if after_increase is None:
            changes.append(BudgetChange(new.name, MAX_INCREASE, REMOVED, before_increase.text, None, ref, new.source))
        elif after_increase.fraction > before_increase.fraction:
            changes.append(
                BudgetChange(
                    new.name, MAX_INCREASE, RAISED, before_increase.text, after_increase.text, ref,
                    after_increase.source,
                )
            )  # fmt: skip
    return changes + _curve_changes(old, new, ref) + _phase_changes(old, new, ref)


def _curve_changes(old: ModelEntry, new: ModelEntry, ref: str) -> list[BudgetChange]:
    """The budgets on the curve raised or removed: `max-degree.seq` (one change however many metrics one number
    caps) and each ceiling of `at`, matched by its point and metric."""
    changes: dict[tuple[str, str], BudgetChange] = {}
    degrees = {(d.metric, d.dim): d for d in new.budget.degrees}
    for before in old.budget.degrees:
        after = degrees.get((before.metric, before.dim))
        setting = ".".join(str(part) for part in (after or before).source.slot)  # max-degree.seq, as written
        if after is None:
            change = BudgetChange(new.name, setting, REMOVED, str(before.degree), None, ref, new.source)
        elif after.degree > before.degree:
            change = BudgetChange(new.name, setting, RAISED, str(before.degree), str(after.degree), ref, after.source)
        else:
            continue
        changes.setdefault((setting, change.kind), change)
    points = {tuple(sorted(p.point.items())): p for p in new.budget.at}
    for point in old.budget.at:
        now = points.get(tuple(sorted(point.point.items())))
        at = ", ".join(f"{dim}={size}" for dim, size in point.point.items())
        for metric, limit in point.limits.items():
            setting = f"at {at} {metric.key}"
            current = now.limits.get(metric) if now is not None else None
            if current is None:
                changes[(setting, REMOVED)] = BudgetChange(
                    new.name, setting, REMOVED, limit.text, None, ref, new.source
                )
            elif current.value > limit.value:
                percent = format_percent(current.value - limit.value, limit.value) if limit.value else None
                changes[(setting, RAISED)] = BudgetChange(
                    new.name, setting, RAISED, limit.text, current.text, ref, current.source, percent
                )
    return list(changes.values())


def _phase_changes(old: ModelEntry, new: ModelEntry, ref: str) -> list[BudgetChange]:
    """The ceilings per phase raised or removed (`phases.decode-mean.flops`), like any other budget: lifting the
    mean decode step's ceiling in the change that made each token costlier would otherwise pass unseen."""
    changes = []
    for phase, limits in old.budget.phases.items():
        for metric, before in limits.items():
            after = new.budget.phases.get(phase, {}).get(metric)
            setting = f"phases.{phase}.{_setting(after or before, metric)}"
            if after is None:
                changes.append(BudgetChange(new.name, setting, REMOVED, before.text, None, ref, new.source))
            elif after.value > before.value:
                percent = format_percent(after.value - before.value, before.value) if before.value else None
                changes.append(
                    BudgetChange(new.name, setting, RAISED, before.text, after.text, ref, after.source, percent)
                )
    return changes


def _setting(limit: Limit, metric: Metric) -> str:
    """The pyproject key as written (`flops` for `flops = "4 GMACs"`: the last part of its slot), else the usual key
    of `metric`."""
    key = str(limit.source.slot[-1]) if limit.source.slot else ""
    return key if key in BUDGET_KEYS else metric.key


def _budget_text(budget: Budget) -> str:
    """`flops 8.3G, params 25.6M, max-increase 2%`: what a removed model was held to."""
    parts = [f"{_setting(limit, metric)} {limit.text}" for metric, limit in budget.limits.items()]
    if budget.max_increase is not None:
        parts.append(f"max-increase {budget.max_increase.text}")
    parts += [
        f"phases.{phase}.{_setting(lim, m)} {lim.text}"
        for phase, limits in budget.phases.items()
        for m, lim in limits.items()
    ]
    return ", ".join(parts)


def _run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return run_git(directory, *args)
    except FileNotFoundError:
        raise BaseRefError("--base-ref needs git, and git is not installed or not on PATH") from None


def _raise(ref: str, what: str, result: subprocess.CompletedProcess[str]) -> NoReturn:
    """Raise `BaseRefError` with `what` and git's own first line, which often says why."""
    said = git_said(result)
    raise BaseRefError(f"--base-ref {ref}: {what}" + (f" (git: {said})" if said else ""))
