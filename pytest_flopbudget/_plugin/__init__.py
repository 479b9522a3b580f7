"""pytest plugin (entry point `pytest11`): the `flop_budget` marker, the `flopbudget` fixture, pyproject model items.

Thin by design, as syrupy's hooks forward to its session: every hook forwards to one `run.Run` (the same one the
CLI uses). One module per job: options.py (command line and ini), marker.py (the marker's budget), fixture.py
(counting in a test), items.py (pyproject models as items), session.py (the hooks every process runs),
controller.py (what happens once per session: baselines and outputs, registered on the controller only),
xdist_transport.py (what an xdist worker sends the controller) and xdist_counting.py (the count server the
workers' pyproject models are counted in). This module only registers them.
"""

from __future__ import annotations

import pytest

from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._errors import ConfigError, FlopBudgetError, FlopBudgetWarning
from pytest_flopbudget._metrics import PLUGIN_PROBLEMS
from pytest_flopbudget._plugin import xdist_counting
from pytest_flopbudget._plugin.controller import FlopBudgetController
from pytest_flopbudget._plugin.fixture import FlopBudgetFixture, flopbudget
from pytest_flopbudget._plugin.marker import MARKER_HELP
from pytest_flopbudget._plugin.names import default_name
from pytest_flopbudget._plugin.options import find_pyproject, pytest_addoption
from pytest_flopbudget._plugin.session import FlopBudgetSession
from pytest_flopbudget._plugin.shard import ShardSelection
from pytest_flopbudget._plugin.state import SESSION
from pytest_flopbudget._plugin.xdist_transport import WorkerExport, is_worker

__all__ = [
    "FlopBudgetFixture", "FlopBudgetWarning", "default_name", "flopbudget", "pytest_addoption", "pytest_configure",
    "pytest_unconfigure",
]  # fmt: skip

#: The names the plugin's objects are registered under: the session's hooks, then the controller's or the worker's.
_REGISTERED = ("flopbudget-session", "flopbudget-shard", "flopbudget-controller", "flopbudget-worker")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    pyproject = find_pyproject(config)
    error: FlopBudgetError | None = None
    try:
        settings = load_settings(pyproject, config.rootpath)
    except FlopBudgetError as exc:
        error = exc
        settings = load_settings(None, pyproject.parent if pyproject else config.rootpath)
    if PLUGIN_PROBLEMS:  # a metric plugin that could not be added: its budgets would read as unknown keys
        error = ConfigError("\n".join(PLUGIN_PROBLEMS))
    session = FlopBudgetSession(config, settings, error)
    config.stash[SESSION] = session
    config.pluginmanager.register(session, "flopbudget-session")
    if session.shard_spec is not None and session.config_error is None:
        config.pluginmanager.register(ShardSelection(session, session.shard_spec), "flopbudget-shard")
    if is_worker(config):
        config.pluginmanager.register(WorkerExport(session), "flopbudget-worker")
        session.counter = xdist_counting.worker_counter(config, settings)
    else:
        config.pluginmanager.register(FlopBudgetController(session), "flopbudget-controller")
        if error is None:
            xdist_counting.start_server(config, settings, session.options.collect_models)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(SESSION, None) is None:
        return
    for name in _REGISTERED:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)
    del config.stash[SESSION]
