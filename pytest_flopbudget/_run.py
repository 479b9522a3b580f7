"""One check run, whichever front end started it: entries in, a `RunResult` out.

The pytest plugin and the `flopbudget` CLI used to keep their own count -> judge -> baseline -> report pipelines,
and they disagreed (a model whose target did not import was an error in one JSON report and missing from the
other). Both now feed one `Run`: the CLI counts its entries in a loop, pytest counts one entry per item (and the
fixture adds what marker tests count), xdist workers export what they recorded and the controller merges it. Each
measurement is judged once (when its test asks, else in `finish()`); `finish()` writes baselines on update and
returns the one `RunResult` every output reads, with the `FrontEnd` that started the run. Nothing here prints or
knows about pytest or argparse.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_flopbudget._config.location import Location, display_path
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._errors import BaselineError, FlopBudgetError
from pytest_flopbudget._front_ends import CLI, FrontEnd
from pytest_flopbudget._judge.base_ref import (
    BaseBaselines,
    BudgetChange,
    base_model_names,
    baseline_changes,
    budget_changes,
)
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.verdict import FindingKind, Measurement, Verdict, judge, missing_baseline
from pytest_flopbudget._report import Report
from pytest_flopbudget._shard import Shard

if TYPE_CHECKING:
    from pytest_flopbudget._curve.formula import Formula

EXIT_OK = 0
EXIT_OVER_BUDGET = 1
EXIT_ERROR = 2


class Counter(Protocol):
    """What `Run.count` and the CLI's loop need from whatever counts a model: `count_entry` in this process
    (`InProcessCounter`, the plugin's), or the count cache's counters (`cache/counter.py`: each model in a child of
    its own, answered from the cache on a hit). A front end asks the protocol, never a counter's class."""

    #: Held across each fork (the progress line's lock), so no child starts with a stream mid-write.
    fork_guard: contextlib.AbstractContextManager[Any]

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        """Count one model at its point."""
        ...

    def count_curve(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
        """Count a model with a `curve`: its Report at the entry's point and its formula."""
        ...

    def plan(self, entries: Sequence[ModelEntry], root: Path) -> None:
        """The models about to be counted, in order (so the counter can share work among them)."""
        ...

    def count_ahead(self, jobs: int) -> None:
        """Count the planned models now, up to `jobs` at a time (`flopbudget check -j`), for the calls that follow;
        a counter that cannot does nothing, and each model is then counted when it is asked for."""
        ...

    def mismatch_of(self, name: str) -> str | None:
        """How `name`'s cached count differs from its fresh count (`--cache=verify`), or None."""
        ...

    @property
    def mismatches(self) -> Sequence[tuple[str, str]]:
        """(model, difference) for every cached count that disagreed with a fresh one."""
        ...

    def notes(self, total: int) -> list[str]:
        """The lines the check prints about how `total` models were counted (cache hits, records not kept)."""
        ...


class InProcessCounter:
    """`count_entry` (and `curve.engine.count_curve`) in this process: the pytest plugin's counter, and the CLI's
    where there is no fork. No cache, no plan, nothing to say."""

    def __init__(self) -> None:
        self.fork_guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        from pytest_flopbudget._backends import count_entry

        return count_entry(entry, root)

    def count_curve(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
        from pytest_flopbudget._curve.engine import count_curve

        return count_curve(entry, root)

    def plan(self, entries: Sequence[ModelEntry], root: Path) -> None:
        pass

    def count_ahead(self, jobs: int) -> None:
        pass  # one process: the models are counted one after the other, when asked for

    def mismatch_of(self, name: str) -> str | None:
        return None

    @property
    def mismatches(self) -> Sequence[tuple[str, str]]:
        return ()

    def notes(self, total: int) -> list[str]:
        return []


@dataclass(frozen=True)
class Unchecked:
    """A model that could not be counted (its target does not import, its inputs are wrong, it raised): an error
    in every output, never a silently missing row. "Unchecked" is its one name, in code as in the outputs (the
    JSON `unchecked` list, the `unchecked` annotation kind, "not checked" in the terminal)."""

    name: str
    message: str
    origin: Location | None = None
    nodeid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        origin = self.origin.to_dict() if self.origin is not None else None
        return {"name": self.name, "message": self.message, "origin": origin, "nodeid": self.nodeid}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Unchecked:
        origin = Location.from_dict(data["origin"]) if data.get("origin") is not None else None
        return cls(str(data["name"]), str(data["message"]), origin, data.get("nodeid"))


@dataclass(frozen=True)
class Project:
    """One project of a run over several (a monorepo: `flopbudget check --pyproject a/pyproject.toml --pyproject
    b/pyproject.toml`): its pyproject.toml (absolute; its models' and budgets' places are in it) and its baseline
    directory as outputs show it. The summaries have a section per project."""

    pyproject: str
    baseline_dir: str
    #: Under update: the models whose baseline the update wrote, or found equal, in this project (names may repeat
    #: across projects, so the run's own lists cannot tell).
    written: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()


@dataclass
class RunResult:
    """Everything one run found: what every reporter (terminal, GitHub, GitLab, JSON, Markdown) reads."""

    verdicts: list[Verdict] = field(default_factory=list)
    unchecked: list[Unchecked] = field(default_factory=list)
    changes: list[BudgetChange] = field(default_factory=list)
    update: bool = False
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    update_errors: list[str] = field(default_factory=list)
    #: The CI outputs pytest could not write (`EmitResult.failures`), shown in its summary; the CLI prints its own.
    output_errors: list[str] = field(default_factory=list)
    baseline_dir: str = ""
    #: `--base-ref`: the ref whose baselines every model was compared with.
    base_ref: str | None = None
    #: Baseline files no model of this run uses (a renamed test, a removed entry), and those an update removed.
    stale: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: Why stale files were listed but not removed (the run could not see every model), if so.
    stale_note: str = ""
    #: Who started the run: the words of the update hint, and whether failures were shown with their tests.
    front_end: FrontEnd = CLI
    #: `--shard K/N`: this run is one part of a run across CI machines (its results document says so, for
    #: `flopbudget merge`); None for a whole run.
    shard: Shard | None = None
    #: The projects of a run over several, in the order given; empty for a run of one project.
    projects: list[Project] = field(default_factory=list)

    def section(self, project: Project) -> RunResult:
        """The part of this run that is `project`'s: its models, those not checked and its budget changes (each
        known by the file its place is in, the project's pyproject.toml), with its baseline directory."""

        def ours(location: Location | None) -> bool:
            return location is not None and location.file is not None and _same(location.file, project.pyproject)

        return dataclasses.replace(
            self,
            verdicts=[v for v in self.verdicts if ours(v.measurement.origin)],
            unchecked=[u for u in self.unchecked if ours(u.origin)],
            changes=[c for c in self.changes if ours(c.source)],
            written=list(project.written), unchanged=list(project.unchanged),
            removed=[], update_errors=[], output_errors=[],  # the run's errors are said once, for the whole run
            baseline_dir=project.baseline_dir,
            projects=[],
        )  # fmt: skip

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    @property
    def unreadable(self) -> list[Verdict]:
        """Models whose baseline file cannot be read: the check could not run for them (exit 2, not 1)."""
        return [v for v in self.verdicts if any(f.kind == FindingKind.BASELINE for f in v.violations)]

    @property
    def miscached(self) -> list[Verdict]:
        """Models whose cached count would have answered differently (`--cache=verify`): they fail an update too,
        since the cache, not the model, is what is wrong."""
        return [v for v in self.verdicts if any(f.kind == FindingKind.CACHE_MISMATCH for f in v.violations)]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.unchecked

    @property
    def updated(self) -> list[str]:
        """Models whose baseline this run recorded (written, or already equal)."""
        return self.written + self.unchanged

    @property
    def exit_code(self) -> int:
        """2 when something could not be checked (worse than an overrun: the answer is unknown), 1 on an overrun.

        An update records the current state, so an overrun does not fail it; a baseline it could not write does,
        and so does a cached count that disagreed with a fresh one (1, like an overrun).
        """
        if self.unchecked or self.update_errors or self.output_errors or self.unreadable:
            return EXIT_ERROR
        if (self.failed and not self.update) or self.miscached:
            return EXIT_OVER_BUDGET
        return EXIT_OK


class Run:
    """Collects the measurements and unchecked models of one run, from any number of places, then judges them once."""

    def __init__(
        self,
        store: BaselineStore,
        *,
        update: bool = False,
        changes: Sequence[BudgetChange] = (),
        base: BaseBaselines | None = None,
        base_models: set[str] | None = None,
        require_baseline: bool = False,
        front_end: FrontEnd = CLI,
    ) -> None:
        """`store` is the working tree's baseline directory (what an update writes). With `base` (`--base-ref`)
        every model is judged against the baseline at the base ref instead, and what the change did to the
        baselines is reported with the budget changes. `front_end` is who started the run, for its outputs."""
        self.store = store
        self.front_end = front_end
        self.update = update
        self.changes = list(changes)
        self.base = base
        self.base_models = base_models
        self.require_baseline = require_baseline
        self.measurements: list[Measurement] = []
        self.unchecked: list[Unchecked] = []
        self._verdicts: dict[int, Verdict] = {}
        self._stale: list[str] = []
        self._stale_complete = False
        self._stale_note = ""

    @property
    def base_ref(self) -> str | None:
        return self.base.revision.ref if self.base is not None else None

    def compare_with_base(self, settings: Settings, ref: str) -> None:
        """`--base-ref REF`: judge against the baselines at REF and report every budget and baseline the change
        raised, removed or rewrote. Raises `BaseRefError` when REF cannot be read."""
        self.changes.extend(budget_changes(settings, ref))
        self.base = BaseBaselines(settings.baseline_dir, ref)
        self.base_models = base_model_names(settings, ref)

    # -- what goes in -------------------------------------------------------------------------------------------

    def count(
        self,
        entry: ModelEntry,
        root: Path,
        nodeid: str | None = None,
        counter: Counter | None = None,
    ) -> Measurement:
        """Count one configured model (with `counter`, e.g. the count cache's, else `InProcessCounter`) and record
        it; a model that cannot be counted is recorded as `Unchecked` and its `FlopBudgetError` re-raised, so the
        caller can fail its own item too. A model with a `curve` is counted with its formula (the counter's
        `count_curve`: the CLI's counts it in a child process, never from the cache)."""
        if counter is None:
            counter = InProcessCounter()
        formula = None
        try:
            if entry.curve:
                report, formula = counter.count_curve(entry, root)
            else:
                report = counter(entry, root)
        except FlopBudgetError as exc:
            self.unchecked.append(Unchecked(entry.name, str(exc), entry.source, nodeid))
            raise
        measurement = Measurement(entry.name, report, entry.budget, entry.source, nodeid, formula=formula)
        self.measurements.append(measurement)
        return measurement

    def record(self, measurement: Measurement) -> None:
        self.measurements.append(measurement)

    def record_unchecked(self, error: Unchecked) -> None:
        self.unchecked.append(error)

    def judge(self, measurement: Measurement) -> Verdict:
        """The verdict on `measurement`, judged the first time it is asked for and kept: the test that counted it
        (which must fail where it ran) and `finish` (every output) read the same verdict, judged once. Judging
        waits for the first ask because the CLI's counter adds a cache mismatch to the measurement after counting."""
        verdict = self._verdicts.get(id(measurement))  # the verdict holds its measurement: the id stays unique
        if verdict is None:
            verdict = self._verdicts[id(measurement)] = self._judge(measurement)
        return verdict

    def _judge(self, measurement: Measurement) -> Verdict:
        verdict = judge(measurement, self.base if self.base is not None else self.store)
        if not self.update and not measurement.budget.is_empty and not self.store.exists(measurement.name):
            shown = self.store.display(measurement.name)
            verdict.findings.append(missing_baseline(measurement, shown, required=self.require_baseline))
        return verdict

    def fails(self, verdict: Verdict) -> bool:
        """Whether this verdict fails its test or hook: under update only an unusable baseline (it would not be
        replaced) or a cached count that disagreed with a fresh one does."""
        if self.update:
            kinds = (FindingKind.BASELINE, FindingKind.CACHE_MISMATCH)
            return any(f.kind in kinds for f in verdict.violations)
        return not verdict.passed

    # -- pytest-xdist: workers export what they recorded, the controller merges it --------------------------------

    def export(self) -> dict[str, Any]:
        return {
            "measurements": [m.to_dict() for m in self.measurements],
            "unchecked": [e.to_dict() for e in self.unchecked],
        }

    def merge(self, data: Mapping[str, Any]) -> None:
        self.measurements.extend(Measurement.from_dict(item) for item in data.get("measurements", []))
        self.unchecked.extend(Unchecked.from_dict(item) for item in data.get("unchecked", []))

    # -- what comes out ---------------------------------------------------------------------------------------------

    def find_stale(self, known: Sequence[str], *, complete: bool, note: str = "") -> None:
        """Baseline files that no model in `known` uses. `complete` says this run saw every model that owns a
        baseline (then an update removes the stale ones); otherwise they are only listed, with `note`."""
        from pytest_flopbudget._judge.baseline import baseline_filename

        used = {baseline_filename(name) for name in known}
        self._stale = [name for name in self.store.files() if name not in used]
        self._stale_complete = complete
        self._stale_note = note

    def finish(self) -> RunResult:
        """The verdict on every measurement (judged against the baselines as they were before this run, each once:
        a verdict a test already asked for is reused) and, on update, write the baselines; the result is sorted
        so every front end lists the same models in the same order."""
        measurements = sorted(self.measurements, key=lambda m: (m.name, m.nodeid or ""))
        changes = list(self.changes)
        if self.base is not None:
            changes.extend(baseline_changes(measurements, self.base, self.store, self.base_models))
        result = RunResult(
            verdicts=[self.judge(m) for m in measurements],
            unchecked=sorted(self.unchecked, key=lambda e: (e.name, e.nodeid or "")),
            changes=changes,
            update=self.update,
            baseline_dir=display_path(str(self.store.directory)),
            base_ref=self.base_ref,
            front_end=self.front_end,
        )
        if self.update:
            self._write_baselines(measurements, result)
        if self.update and self._stale_complete:
            for filename in self._stale:
                try:
                    self.store.remove(filename)
                except OSError as exc:
                    result.update_errors.append(f"stale baseline {filename} not removed: {exc}")
                else:
                    result.removed.append(filename)
        else:
            result.stale = list(self._stale)
            result.stale_note = self._stale_note
        return result

    def _write_baselines(self, measurements: Sequence[Measurement], result: RunResult) -> None:
        latest: dict[str, Measurement] = {}
        for measurement in measurements:
            previous = latest.get(measurement.name)
            if previous is not None and previous.report.to_dict() != measurement.report.to_dict():
                result.update_errors.append(
                    f"{previous.nodeid} and {measurement.nodeid} both count {measurement.name!r} with "
                    f"different results; the baseline keeps {measurement.nodeid}'s"
                )
            latest[measurement.name] = measurement
        for name, measurement in sorted(latest.items()):
            try:
                changed = self.store.save(name, measurement.report, measurement.formula)
            except (BaselineError, OSError) as exc:
                result.update_errors.append(f"baseline for {name!r} not written: {exc}")
                continue
            (result.written if changed else result.unchanged).append(name)


def _same(path: str, other: str) -> bool:
    return os.path.normpath(path) == os.path.normpath(other)


def require_baseline(setting: bool | None, env: Mapping[str, str]) -> bool:
    """`require-baseline` as configured, else on in CI (`CI` set, as GitHub, GitLab and most CI systems do): there
    a model without a committed baseline has no growth gate at all, while locally it is work in progress."""
    if setting is not None:
        return setting
    return bool(env.get("CI", "").strip()) and env.get("CI", "").strip().lower() not in ("0", "false", "no")


def entry_nodeid(entry: ModelEntry, root: Path) -> str:
    """The id pytest gives a pyproject model's item (`pyproject.toml::resnet50`), also used by the CLI so that
    both front ends write the same reports."""
    pyproject = Path(entry.source.file) if entry.source.file else root / "pyproject.toml"
    try:
        relative = pyproject.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        relative = pyproject.name
    from pytest_flopbudget._safe_text import one_line

    return f"{relative}::{one_line(entry.name)}"
