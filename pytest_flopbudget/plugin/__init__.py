"""pytest plugin (entry point `pytest11`): the `flop_budget` marker, the `flopbudget` fixture, pyproject model items.

Thin by design, as syrupy's hooks forward to its session: every hook forwards to one `run.Run` (the same one the
CLI uses), which counts pyproject models, records what marker tests count and the models that could not be
counted, judges, writes baselines and returns the `RunResult` every reporter reads. Under pytest-xdist the
workers count and judge (a test must fail on the worker that ran it) and export their run through `workeroutput`;
only the controller merges, writes baselines and prints, so parallel workers never race on a file.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget.config.budget import Budget, parse_budget
from pytest_flopbudget.config.location import Location
from pytest_flopbudget.config.pyproject import ModelEntry, Settings, load_settings
from pytest_flopbudget.errors import FlopBudgetError
from pytest_flopbudget.judge.baseline import BaselineStore
from pytest_flopbudget.judge.reason import reason
from pytest_flopbudget.judge.verdict import Measurement, Verdict
from pytest_flopbudget.metrics import METRICS
from pytest_flopbudget.plugin.marker_source import closest_marker, marker_line
from pytest_flopbudget.render.formatting import PYTEST_UPDATE_HINT
from pytest_flopbudget.report import Report
from pytest_flopbudget.reporters import ci, terminal
from pytest_flopbudget.run import ModelError, Run, RunResult, require_baseline
from pytest_flopbudget.safe_text import SafeStream, one_line, safe_text

UPDATE_HINT = PYTEST_UPDATE_HINT
SECTION = "flopbudget per-layer diff"
_WORKER_KEY = "flopbudget_run"
_COLLECTION_KEY = "collection"


def flop_budget(
    flops: Any = None,
    *,
    macs: Any = None,
    params: Any = None,
    max_skipped_ops: Any = None,
    max_increase: Any = None,
    name: str | None = None,
) -> None:
    """fail the test when the model it counts with the `flopbudget` fixture exceeds these inclusive ceilings
    ('4.1G', '300 MMACs', '25.6M', max_increase='2%'); name= reuses [tool.flopbudget.models.NAME]."""


_SIGNATURE = inspect.signature(flop_budget)
#: `(flops=None, *, macs=None, ...)` without annotations: what users write, for the help line and for errors.
_MARKER_SIGNATURE = _SIGNATURE.replace(
    parameters=[p.replace(annotation=inspect.Parameter.empty) for p in _SIGNATURE.parameters.values()],
    return_annotation=inspect.Signature.empty,
)
#: marker argument -> budget slot (see `budget.parse_budget`): each metric's `argument`, then max_increase.
_MARKER_SLOTS = {**{metric.argument: str(metric) for metric in METRICS}, "max_increase": "max_increase"}
MARKER_HELP = f"flop_budget{_MARKER_SIGNATURE}: {' '.join((flop_budget.__doc__ or '').split())}"


class FlopBudgetWarning(pytest.PytestWarning):
    """A budget that cannot be checked as written (e.g. a model counted in a test with no budget)."""


class _Failure(Exception):
    """A clean, traceback-free failure: `reason` is the one-line report, `details` goes into a report section."""

    def __init__(self, reason: str, details: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


@dataclass
class _TestState:
    """What one test counts and is held to; `budget` is None when the test has no marker."""

    name: str
    origin: Location
    budget: Budget | None = None
    report: Report | None = None


_PLUGIN = pytest.StashKey["FlopBudgetPlugin"]()
_STATE = pytest.StashKey[_TestState]()


# -- registration --------------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flopbudget", "compute budgets (pytest-flopbudget)")
    group.addoption(
        "--flopbudget-update",
        action="store_true",
        default=False,
        help="write the baseline of every counted model (baseline-dir/<name>.json) and do not fail on budgets",
    )
    group.addoption(
        "--flopbudget-no-models",
        action="store_false",
        dest="flopbudget_models",
        default=None,
        help="do not collect the models of [tool.flopbudget.models] as test items (overrides collect-models)",
    )
    group.addoption(
        "--flopbudget-models",
        action="store_true",
        dest="flopbudget_models",
        default=None,
        help="collect the models of [tool.flopbudget.models] as test items even if collect-models = false",
    )
    group.addoption(
        "--flopbudget-baseline-dir",
        default=None,
        metavar="DIR",
        help="directory of baseline files (overrides baseline-dir; relative to the current directory)",
    )
    group.addoption("--flopbudget-report", action="append", default=[], metavar="SPEC", help=ci.SPEC_HELP)
    group.addoption(
        "--flopbudget-require-baseline",
        action="store_true",
        default=None,
        help="fail a budgeted model that has no committed baseline (default: require-baseline in pyproject, else "
        "on when the CI environment variable is set)",
    )
    group.addoption(
        "--flopbudget-base-ref",
        default=None,
        metavar="REF",
        help="compare every model with its baseline at the git ref REF (e.g. origin/main) and report every budget "
        "or baseline the change raised, removed or rewrote",
    )
    parser.addini("flopbudget_report", ci.SPEC_HELP, type="args", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    pyproject = _pyproject(config)
    error: FlopBudgetError | None = None
    try:
        settings = load_settings(pyproject, config.rootpath)
    except FlopBudgetError as exc:
        error = exc
        settings = load_settings(None, pyproject.parent if pyproject else config.rootpath)
    plugin = FlopBudgetPlugin(config, settings, error)
    config.stash[_PLUGIN] = plugin
    config.pluginmanager.register(plugin, "flopbudget-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_PLUGIN, None)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)
        del config.stash[_PLUGIN]


@pytest.fixture
def flopbudget(request: pytest.FixtureRequest) -> FlopBudgetFixture:
    """Count a model for this test: `flopbudget.count(model, *inputs, **kw)` returns the Report.

    The test's `@pytest.mark.flop_budget(...)` is checked when the test finishes; the count is listed in the
    summary and written as a baseline by `--flopbudget-update`.
    """
    return FlopBudgetFixture(request.node, request.config.stash[_PLUGIN])


class FlopBudgetFixture:
    """The `flopbudget` fixture: one count per test, checked against the test's marker when it finishes."""

    def __init__(self, item: pytest.Item, plugin: FlopBudgetPlugin) -> None:
        self._item = item
        self._plugin = plugin

    @property
    def name(self) -> str:
        """The model's name: the marker's `name=`, else derived from the test id; it names the baseline file."""
        return self._state.name

    @property
    def budget(self) -> Budget | None:
        return self._state.budget

    @property
    def report(self) -> Report | None:
        return self._state.report

    @property
    def baseline(self) -> Report | None:
        """The saved baseline for this model, if any (raises `BaselineError` for a corrupt file)."""
        return self._plugin.store.load(self.name)

    def count(self, model: Any, *inputs: Any, **kwargs: Any) -> Report:
        """`pytest_flopbudget.count(model, *inputs, **kwargs)`, recorded for this test."""
        __tracebackhide__ = True
        state = self._state
        if state.report is not None:
            raise FlopBudgetError(
                f"flopbudget.count() was already called in {self._item.name}; a test checks one model: "
                f"split it into one test per model or parametrize it"
            )
        from pytest_flopbudget.backends import count

        try:
            report = count(model, *inputs, **kwargs)
        except FlopBudgetError as exc:
            raise exc.with_traceback(None) from None
        state.report = report
        return report

    @property
    def _state(self) -> _TestState:
        state = self._item.stash.get(_STATE, None)
        if state is None:
            state = _TestState(default_name(self._item.nodeid), _item_source(self._item))
            self._item.stash[_STATE] = state
        return state


# -- the session plugin ----------------------------------------------------------------------------------------------


class FlopBudgetPlugin:
    """Per-session state and hooks: registered in `pytest_configure`, reachable through `config.stash`."""

    def __init__(self, config: pytest.Config, settings: Settings, error: FlopBudgetError | None) -> None:
        self.config = config
        self.settings = settings
        self.config_error = error
        self.update: bool = config.getoption("flopbudget_update")
        option = config.getoption("flopbudget_models")
        self.collect_models: bool = settings.collect_models if option is None else option
        directory = config.getoption("flopbudget_baseline_dir")
        base = config.invocation_params.dir / directory if directory else settings.baseline_dir
        self.store = BaselineStore(base)
        self.is_worker = hasattr(config, "workerinput")
        option_required = config.getoption("flopbudget_require_baseline")
        setting = settings.require_baseline if option_required is None else option_required
        self.run = Run(self.store, update=self.update, require_baseline=require_baseline(setting, os.environ))
        self.deselected = 0
        self.collect_errors = 0
        #: Models the collected tests own (under xdist: every worker's), and whether a worker's results were lost.
        self.owners: set[str] = set()
        self.lost_worker = False
        self.result: RunResult | None = None
        base_ref = config.getoption("flopbudget_base_ref")
        if base_ref and error is None:
            try:
                self.run.compare_with_base(settings, base_ref)
            except FlopBudgetError as exc:
                self.config_error = exc
        try:
            specs = config.getoption("flopbudget_report") or config.getini("flopbudget_report")
            self.report_specs = ci.resolve_specs(specs)
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
            and self.collect_models
            and self.settings.models
            and file_path.resolve() == pyproject
        ):
            return ModelsFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        """Add the pyproject models to a plain `pytest` run (testpaths rarely include pyproject.toml)."""
        pyproject = self.settings.pyproject
        if not self.collect_models or not self.settings.models or pyproject is None:
            return
        # pytest may build the pyproject collector and then drop it (pytest 9 walks the rootdir, then keeps only
        # what the arguments select): what counts is whether its items made it into the run.
        if any(isinstance(item, ModelItem) for item in items):
            return
        if _explicit_args(config):
            return
        items.extend(session.genitems(ModelsFile.from_parent(session, path=pyproject)))

    # -- marker tests --------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if isinstance(item, ModelItem):
            return
        marker = closest_marker(item)
        if _STATE in item.stash:  # a rerun (e.g. pytest-rerunfailures) starts with a clean slate
            del item.stash[_STATE]
        if marker is None:
            return
        origin = _item_source(item)
        name, budget = self._marker_budget(item, marker, origin)
        if "flopbudget" not in getattr(item, "fixturenames", ()):
            raise _Failure(
                f"{origin.where()}: @pytest.mark.flop_budget needs the flopbudget fixture to count the model: "
                f"add a `flopbudget` argument and call flopbudget.count(model, *inputs)"
            )
        item.stash[_STATE] = _TestState(name, origin, budget)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if call.excinfo is not None and isinstance(call.excinfo.value, _Failure):
            _fail(report, call.excinfo.value.reason, call.excinfo.value.details)
            return
        if call.when != "call" or isinstance(item, ModelItem):
            return
        state = item.stash.get(_STATE, None)
        if state is not None:
            self._finish_test(item, state, report)

    def _finish_test(self, item: pytest.Item, state: _TestState, report: pytest.TestReport) -> None:
        if state.report is None:
            if state.budget is not None and report.passed:
                _fail(
                    report,
                    f"{state.origin.where()}: @pytest.mark.flop_budget is set but the test never called "
                    f"flopbudget.count(model, *inputs), so there is nothing to check",
                )
            return
        entry = self.settings.models.get(state.name)
        if entry is not None and not entry.training and state.report.train_mode and report.passed:
            # the shared baseline is the pyproject model's, counted in eval mode: a train-mode count (batch-norm
            # statistics, dropout) must neither pass as it nor replace it
            _fail(
                report,
                f"{item.name} ({state.name}): the model was counted in train mode, but [tool.flopbudget.models."
                f"{state.name}] counts it in eval mode; call model.eval() before flopbudget.count(...)",
            )
            return
        measurement = Measurement(
            state.name, state.report, state.budget or Budget(), state.origin, item.nodeid, test_failed=report.failed
        )
        verdict = self.run.judge(measurement)
        self.run.record(measurement)
        if state.budget is None:
            item.warn(
                FlopBudgetWarning(
                    f"{item.name} counted a model with the flopbudget fixture but has no "
                    f"@pytest.mark.flop_budget: nothing was checked"
                )
            )
        if report.passed and self.run.fails(verdict):
            details = terminal.details(verdict, update_hint=UPDATE_HINT, base_ref=self.run.base_ref)
            _fail(report, _test_reason(item, verdict), details)

    def _marker_budget(self, item: pytest.Item, marker: pytest.Mark, origin: Location) -> tuple[str, Budget]:
        try:
            bound = _MARKER_SIGNATURE.bind(*marker.args, **marker.kwargs)
        except TypeError as exc:
            takes = f"the marker takes flop_budget{_MARKER_SIGNATURE}"
            raise _Failure(f"{origin.where()}: flop_budget: {exc}; {takes}") from None
        arguments = dict(bound.arguments)
        name = arguments.pop("name", None)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise _Failure(f"{origin.where()}: flop_budget(name={name!r}): expected a non-empty model name")
        values = {_MARKER_SLOTS[key]: value for key, value in arguments.items()}
        line = marker_line(origin.file, origin.line, marker) or origin.line  # the decorator or pytest.param to edit
        sources = {
            _MARKER_SLOTS[key]: Location(origin.file, line, f"{item.name}: flop_budget({key}=...)") for key in arguments
        }
        try:
            budget = parse_budget(values, sources, Location(origin.file, line, origin.key))
        except FlopBudgetError as exc:
            raise _Failure(str(exc)) from None
        entry = self.settings.models.get(name) if name else None
        if entry is not None:
            budget = entry.budget.override(budget)
        if budget.is_empty:
            known = ", ".join(sorted(self.settings.models)) or "none"
            hint = f"; name={name!r} is not in [tool.flopbudget.models] (known: {known})" if name else ""
            raise _Failure(
                f"{origin.where()}: flop_budget sets no limit{hint}; give "
                f"{', '.join(metric.argument for metric in METRICS)} "
                f"or max_increase, or name= a model of [tool.flopbudget.models]"
            )
        return name or default_name(item.nodeid), budget

    # -- pyproject models ----------------------------------------------------------------------------------------

    def run_model(self, item: ModelItem) -> None:
        try:
            measurement = self.run.count(item.entry, self.settings.root, item.nodeid)
        except FlopBudgetError as exc:  # recorded in the run: an error in every output, not a missing row
            raise _Failure(str(exc)) from None
        verdict = self.run.judge(measurement)
        if self.run.fails(verdict):
            details = terminal.details(verdict, update_hint=UPDATE_HINT, base_ref=self.run.base_ref)
            raise _Failure(reason(verdict), details)

    # -- end of session: workers send, the controller writes baselines and reports --------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: merge what a worker recorded. A worker whose results did not arrive is an error in
        every output (never a silently smaller run): its models' verdicts are unknown."""
        worker = str(getattr(node, "workerinput", {}).get("workerid", "?"))
        data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        problem = None
        if data is None:
            problem = f"sent no results{f' ({error})' if error else ''}"
        else:
            try:
                payload = json.loads(data)
                if "transport_error" in payload:
                    problem = f"could not send its results: {payload['transport_error']}"
                else:
                    self.run.merge(payload)
                    collection = payload.get(_COLLECTION_KEY) or {}
                    self.owners.update(str(name) for name in collection.get("owners", []))
                    if collection.get("narrowed", "unknown"):
                        self.deselected += 1  # the worker saw part of the suite: nothing is judged stale
            except (ValueError, KeyError, TypeError) as exc:
                problem = f"sent results that cannot be read: {type(exc).__name__}: {str(exc)[:200]}"
        if problem is not None:
            self.lost_worker = True
            message = f"xdist worker {worker} {problem}; the models it counted are not checked"
            self.run.record_error(ModelError(f"xdist worker {worker}", message))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            try:
                collection = {"owners": sorted(self.owners), "narrowed": self._narrowed(session)}
                payload = json.dumps({**self.run.export(), _COLLECTION_KEY: collection})
            except (ValueError, TypeError, OverflowError) as exc:  # e.g. an integer too long to write
                payload = json.dumps({"transport_error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            self.config.workeroutput[_WORKER_KEY] = payload  # type: ignore[attr-defined]
            return
        self._find_stale(session)
        result = self.result = self.run.finish()
        if not self.update and self.config_error is None:
            # CI outputs (annotations, job summary, GitLab/JSON files): once, from the controller only
            # the same words as the CLI, every line through safe_text but our own escaped commands
            emitted = ci.emit(result, self.report_specs, stream=SafeStream(sys.stdout))
            result.update_errors.extend(emitted.errors)
        if (result.update_errors or result.errors) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a test file that did not import: its tests' baselines are not stale, only unseen
            self.collect_errors += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The models every collected test owns (a marker's `name=`, else the name from the test id), whether or
        not the test then counts: a skipped test, or one that failed before counting, still owns its baseline."""
        for item in session.items:
            if isinstance(item, ModelItem):
                continue
            marker = closest_marker(item)
            if marker is None and "flopbudget" not in getattr(item, "fixturenames", ()):
                continue
            name = marker.kwargs.get("name") if marker is not None else None
            self.owners.add(name if isinstance(name, str) and name.strip() else default_name(item.nodeid))

    def _narrowed(self, session: pytest.Session) -> str:
        """Why this run did not see every test that may own a baseline, or "" when it did."""
        option = self.config.option
        # an xdist worker gets the controller's arguments resolved into paths: the controller judges the options
        options = not self.is_worker
        reasons: dict[str, object] = {
            "-k": options and bool(getattr(option, "keyword", "")),
            "-m": options and bool(getattr(option, "markexpr", "")),
            "paths or node ids": options and _explicit_args(self.config),
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

    def _find_stale(self, session: pytest.Session) -> None:
        """Baseline files no model or test of this session owns. Only a run that saw every test (nothing selected
        by -k, -m, paths, node ids, --lf or deselection, no collection error, not stopped early, every xdist
        worker heard from) can tell: a partial run says nothing about them, and only a complete update removes
        them."""
        if self._narrowed(session):
            return
        known = [m.name for m in self.run.measurements] + [e.name for e in self.run.errors]
        known += list(self.settings.models) + sorted(self.owners)
        self.run.find_stale(known, complete=True, note="a whole-suite `pytest --flopbudget-update` removes them")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        result = self.result
        if self.is_worker or result is None:
            return
        lines = terminal.run_summary(result)
        # errors no test item shows (an xdist worker whose results were lost) are printed here
        lines = [f"error: {e.message}" for e in result.errors if e.nodeid is None] + lines
        if not (result.verdicts or result.update_errors or result.errors or result.stale or result.removed):
            return
        terminalreporter.write_sep("-", "flopbudget")
        for line in lines:  # a name may hold a newline: every resulting line is made inert
            for part in safe_text(line).split("\n"):
                terminalreporter.write_line(part)


# -- pyproject items -------------------------------------------------------------------------------------------------


class ModelsFile(pytest.File):
    """pyproject.toml as a collector: one item per `[tool.flopbudget.models.NAME]`."""

    def collect(self) -> Any:
        plugin = self.config.stash[_PLUGIN]
        for name, entry in plugin.settings.models.items():
            # control characters in a pyproject key would reach every line pytest prints with the node id
            yield ModelItem.from_parent(self, name=one_line(name), entry=entry)


class ModelItem(pytest.Item):
    """Counts one pyproject model and checks its budget, like any other test."""

    def __init__(self, *, entry: ModelEntry, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.extra_keyword_matches.add("flopbudget")

    def runtest(self) -> None:
        self.config.stash[_PLUGIN].run_model(self)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, _Failure):
            return safe_text(excinfo.value.reason)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.entry.source.line
        return self.path, (line - 1 if line else None), f"flopbudget model {self.name}"


# -- helpers ---------------------------------------------------------------------------------------------------------


def default_name(nodeid: str) -> str:
    """`tests/test_m.py::TestA::test_b[x]` -> `tests.test_m.TestA.test_b[x]`: stable, readable, file-name safe."""
    path, _, rest = nodeid.partition("::")
    if path.endswith(".py"):
        path = path[:-3]
    parts = [path.replace("/", ".").replace("\\", "."), *[p for p in rest.split("::") if p]]
    return ".".join(p for p in parts if p)


def _test_reason(item: pytest.Item, verdict: Verdict) -> str:
    """A marker test's failure line starts with the test's own name (and the model's, when `name=` shares a
    pyproject model), so that pytest's short summary says which test and which model at a glance."""
    text = reason(verdict)
    rest = text[len(verdict.name) + 2 :] if text.startswith(f"{verdict.name}: ") else text
    label = item.name if verdict.name == default_name(item.nodeid) else f"{item.name} ({verdict.name})"
    return f"{label}: {rest}"


def _fail(report: pytest.TestReport, text: str, details: str = "") -> None:
    report.outcome = "failed"
    report.longrepr = safe_text(text)
    if details:
        report.sections.append((SECTION, safe_text(details)))


def _item_source(item: pytest.Item) -> Location:
    """The test function (its first decorator line, where the marker usually is) as a Location."""
    path, line, _ = item.reportinfo()
    return Location(os.path.abspath(str(path)), line + 1 if isinstance(line, int) else None, item.name)


def _pyproject(config: pytest.Config) -> Path | None:
    inipath = config.inipath
    if inipath is not None and inipath.name == "pyproject.toml":
        return inipath.resolve()
    candidate = config.rootpath / "pyproject.toml"
    return candidate.resolve() if candidate.is_file() else None


def _explicit_args(config: pytest.Config) -> bool:
    """True when the command line names what to run (then pyproject models join only if pyproject.toml is named)."""
    source = getattr(config, "args_source", None)
    args_source = getattr(pytest.Config, "ArgsSource", None)
    return source is not None and args_source is not None and source == args_source.ARGS
