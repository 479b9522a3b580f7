"""What happens once per session, on the controller only (the one process without xdist, the controller with it):
merge the workers' runs, find stale baselines, judge the run, write baselines, and produce every output.

Registered only where pytest is not an xdist worker, as pytest's own junitxml registers its writer, so parallel
workers never race on a file or print a summary of their share.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_flopbudget._plugin import xdist_transport
from pytest_flopbudget._plugin.session import FlopBudgetSession
from pytest_flopbudget._reporters import ci
from pytest_flopbudget._run import RunResult
from pytest_flopbudget._safe_text import SafeStream, safe_text


class FlopBudgetController:
    """The session's end on the controller: baselines written, CI outputs, the terminal summary."""

    def __init__(self, session: FlopBudgetSession) -> None:
        self.session = session
        self.result: RunResult | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: merge what a worker recorded."""
        xdist_transport.receive(self.session, node, error)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.session
        self._find_stale(session)
        result = self.result = state.run.finish()
        result.shard = state.shard  # --flopbudget-shard: the plan, in the JSON results for the merge
        if not state.update and state.config_error is None:
            # CI outputs (annotations, job summary, GitLab/JSON files): once, from the controller only
            # the same words as the CLI, every line through safe_text but our own escaped commands
            emitted = ci.emit(result, state.report_specs, stream=SafeStream(sys.stdout))
            result.output_errors.extend(emitted.failures)
        failed = result.update_errors or result.output_errors or result.unchecked
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _find_stale(self, session: pytest.Session) -> None:
        """Baseline files no model or test of this session owns. Only a run that saw every test (nothing selected
        by -k, -m, paths, node ids, --lf or deselection, no collection error, not stopped early, every xdist
        worker heard from) can tell: a partial run says nothing about them, and only a complete update removes
        them."""
        state = self.session
        if state.narrowed(session):
            return
        run = state.run
        known = [m.name for m in run.measurements] + [e.name for e in run.unchecked]
        known += list(state.settings.models) + sorted(state.owners)
        run.find_stale(known, complete=True, note="a whole-suite `pytest --flopbudget-update` removes them")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.result is not None:
            ci.emit(self.result, [ci.TERMINAL], stream=_SummarySection(terminalreporter))


class _SummarySection:
    """The terminal output's stream under pytest: a `flopbudget` rule before the first text (no text, no rule), and
    every line made inert (a model's name may hold a newline or a control character)."""

    def __init__(self, terminalreporter: Any) -> None:
        self._reporter = terminalreporter
        self._started = False

    def write(self, text: str) -> None:
        if not text:
            return
        if not self._started:
            self._reporter.write_sep("-", "flopbudget")
            self._started = True
        for line in safe_text(text.removesuffix("\n")).split("\n"):
            self._reporter.write_line(line)
