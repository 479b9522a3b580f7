"""The session's hooks on every process, controller and xdist worker alike: configuration errors, collection of
the pyproject models, marker tests checked when they end, and what the run saw of the suite.

Every check forwards to one `run.Run` (the same one the CLI uses). A test is judged where it ran, so that it fails
there; what happens once per session (baselines, outputs) is the controller's (plugin/controller.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.pyproject import Settings
from pytest_flopbudget._errors import FlopBudgetError, FlopBudgetWarning
from pytest_flopbudget._front_ends import PYTEST
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.reason import reason, reason_clause
from pytest_flopbudget._judge.verdict import Measurement, Verdict
from pytest_flopbudget._plugin.failures import Failure, fail
from pytest_flopbudget._plugin.items import ModelItem, ModelsFile
from pytest_flopbudget._plugin.junit_properties import properties, record, unchecked_properties
from pytest_flopbudget._plugin.marker import marker_budget, owned_model
from pytest_flopbudget._plugin.marker_source import closest_marker
from pytest_flopbudget._plugin.names import default_name, item_location
from pytest_flopbudget._plugin.options import Options, explicit_args, read_options
from pytest_flopbudget._plugin.shard import shard_spec
from pytest_flopbudget._plugin.state import ITEM, ItemState
from pytest_flopbudget._plugin.xdist_transport import is_worker
from pytest_flopbudget._reporters import ci, terminal
from pytest_flopbudget._run import Counter, Run
from pytest_flopbudget._shard import Shard, ShardSpec


class FlopBudgetSession:
    """Per-session state and the hooks every process runs: registered in `pytest_configure`, reachable through
    `config.stash[SESSION]`."""

    def __init__(self, config: pytest.Config, settings: Settings, error: FlopBudgetError | None) -> None:
        self.config = config
        self.settings = settings
        self.config_error = error
        self.options: Options = read_options(config, settings)
        self.update = self.options.update
        self.store = BaselineStore(self.options.baseline_dir)
        self.is_worker = is_worker(config)
        self.run = Run(self.store, update=self.update, require_baseline=self.options.require_baseline, front_end=PYTEST)
        self.deselected = 0
        self.collect_errors = 0
        #: Models the collected tests own (under xdist: every worker's), and whether a worker's results were lost.
        self.owners: set[str] = set()
        self.lost_worker = False
        #: How pyproject models are counted: in this process (None), or, on an xdist worker, by the controller's
        #: count server (`xdist_counting`).
        self.counter: Counter | None = None
        if self.options.base_ref and error is None:
            try:
                self.run.compare_with_base(settings, self.options.base_ref)
            except FlopBudgetError as exc:
                self.config_error = exc
        #: `--flopbudget-shard`: the plan computed at collection (plugin/shard.py), or a worker's, received.
        self.shard: Shard | None = None
        self.shard_spec: ShardSpec | None = None
        try:
            # a shard leaves the GitHub output (annotations, job summary) to the merge
            self.report_specs = ci.resolve_specs([*self.options.reports, *(["none"] if self.options.shard else [])])
            self.shard_spec = shard_spec(self.options, self.report_specs)
        except FlopBudgetError as exc:
            self.report_specs = []
            self.config_error = self.config_error or exc

    # -- configuration errors stop the run before anything is collected (and before xdist starts workers) --------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.config_error is not None:
            lines = str(self.config_error).splitlines() or [repr(self.config_error)]
            raise pytest.UsageError(*lines)

    # -- collection: pyproject models become items ---------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        pyproject = self.settings.pyproject
        if (
            pyproject is not None
            and file_path.name == pyproject.name
            and self.options.collect_models
            and self.settings.models
            and file_path.resolve() == pyproject
        ):
            return ModelsFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        """Add the pyproject models to a plain `pytest` run (testpaths rarely include pyproject.toml)."""
        pyproject = self.settings.pyproject
        if not self.options.collect_models or not self.settings.models or pyproject is None:
            return
        # pytest may build the pyproject collector and then drop it (pytest 9 walks the rootdir, then keeps only
        # what the arguments select): what counts is whether its items made it into the run.
        if any(isinstance(item, ModelItem) for item in items):
            return
        if explicit_args(config):
            return
        items.extend(session.genitems(ModelsFile.from_parent(session, path=pyproject)))

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a test file that did not import: its tests' baselines are not stale, only unseen
            self.collect_errors += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The models every collected test owns, whether or not the test then counts: a skipped test, or one that
        failed before counting, still owns its baseline."""
        for item in session.items:
            if isinstance(item, ModelItem):
                continue
            owner = owned_model(item)
            if owner is not None:
                self.owners.add(owner)

    # -- marker tests --------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if isinstance(item, ModelItem):
            return
        marker = closest_marker(item)
        if ITEM in item.stash:  # a rerun (e.g. pytest-rerunfailures) starts with a clean slate
            del item.stash[ITEM]
        if marker is None:
            return
        origin = item_location(item)
        name, budget = marker_budget(item, marker, origin, self.settings.models)
        if "flopbudget" not in getattr(item, "fixturenames", ()):
            raise Failure(
                f"{origin.where()}: @pytest.mark.flop_budget needs the flopbudget fixture to count the model: "
                f"add a `flopbudget` argument and call flopbudget.count(model, *inputs)"
            )
        item.stash[ITEM] = ItemState(name, origin, budget)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if call.excinfo is not None and isinstance(call.excinfo.value, Failure):
            fail(report, call.excinfo.value.reason, call.excinfo.value.details)
            return
        if call.when != "call" or isinstance(item, ModelItem):
            return
        state = item.stash.get(ITEM, None)
        if state is not None:
            self._finish_test(item, state, report)

    def _finish_test(self, item: pytest.Item, state: ItemState, report: pytest.TestReport) -> None:
        if state.report is None:
            if state.budget is not None and report.passed:
                fail(
                    report,
                    f"{state.origin.where()}: @pytest.mark.flop_budget is set but the test never called "
                    f"flopbudget.count(model, *inputs), so there is nothing to check",
                )
            return
        entry = self.settings.models.get(state.name)
        if entry is not None and not entry.training and state.report.train_mode and report.passed:
            # the shared baseline is the pyproject model's, counted in eval mode: a train-mode count (batch-norm
            # statistics, dropout) must neither pass as it nor replace it
            fail(
                report,
                f"{item.name} ({state.name}): the model was counted in train mode, but [tool.flopbudget.models."
                f"{state.name}] counts it in eval mode; call model.eval() before flopbudget.count(...)",
            )
            return
        measurement = Measurement(
            state.name,
            state.report,
            state.budget or Budget(),
            state.origin,
            item.nodeid,
            test_failed=report.failed,
            formula=state.formula,
        )
        verdict = self.run.judge(measurement)
        self.run.record(measurement)
        record(item, properties(verdict))
        if state.budget is None:
            item.warn(
                FlopBudgetWarning(
                    f"{item.name} counted a model with the flopbudget fixture but has no "
                    f"@pytest.mark.flop_budget: nothing was checked"
                )
            )
        if report.passed and self.run.fails(verdict):
            fail(report, _test_reason(item, verdict), self._details(verdict))

    # -- pyproject models ----------------------------------------------------------------------------------------

    def run_model(self, item: ModelItem) -> None:
        try:
            measurement = self.run.count(item.entry, self.settings.root, item.nodeid, self.counter)
        except FlopBudgetError as exc:  # recorded in the run: an error in every output, not a missing row
            record(item, unchecked_properties(item.entry.name))
            raise Failure(str(exc)) from None
        verdict = self.run.judge(measurement)
        record(item, properties(verdict))
        if self.run.fails(verdict):
            raise Failure(reason(verdict), self._details(verdict))

    def _details(self, verdict: Verdict) -> str:
        """A failed test's report section: the per-layer diff and what to do, in the run's words."""
        return terminal.details(verdict, front_end=self.run.front_end, base_ref=self.run.base_ref)

    # -- what this process saw of the suite ------------------------------------------------------------------------

    def narrowed(self, session: pytest.Session) -> str:
        """Why this run did not see every test that may own a baseline, or "" when it did."""
        option = self.config.option
        # an xdist worker gets the controller's arguments resolved into paths: the controller judges the options
        options = not self.is_worker
        reasons: dict[str, object] = {
            "-k": options and bool(getattr(option, "keyword", "")),
            "-m": options and bool(getattr(option, "markexpr", "")),
            "paths or node ids": options and explicit_args(self.config),
            "--deselect": options and bool(getattr(option, "deselect", None)),
            "--ignore": options and bool(getattr(option, "ignore", None) or getattr(option, "ignore_glob", None)),
            "--lf": options and bool(getattr(option, "lf", False)),
            "--sw": options and bool(getattr(option, "stepwise", False) or getattr(option, "stepwise_skip", False)),
            "--collect-only": options and bool(getattr(option, "collectonly", False)),
            "deselected tests": self.deselected,
            "collection errors": self.collect_errors,
            "a stopped run": session.shouldstop or session.shouldfail
            or session.exitstatus == pytest.ExitCode.INTERRUPTED,
            "an xdist worker's lost results": self.lost_worker,
            "a configuration error": self.config_error is not None,
        }  # fmt: skip
        return ", ".join(reason for reason, present in reasons.items() if present)


def _test_reason(item: pytest.Item, verdict: Verdict) -> str:
    """A marker test's failure line starts with the test's own name (and the model's, when `name=` shares a
    pyproject model), so that pytest's short summary says which test and which model at a glance."""
    rest = reason_clause(verdict)
    label = item.name if verdict.name == default_name(item.nodeid) else f"{item.name} ({verdict.name})"
    return f"{label}: {rest}"
