"""pytest-xdist: the pyproject models counted in the controller's count server rather than in every worker.

Each xdist worker is a fresh interpreter that would import torch and warm the counting backend up before its first
model; the controller instead forks one server that does that once, while the workers start
(`cache/count_server.py`), and tells every worker where it listens through `workerinput`. Only the pyproject
models (`ModelItem`) go there: a marker test builds its model in the test, so it counts where it runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_flopbudget._cache.count_server import WORKERINPUT_KEY, CountServer, ServedCounter
from pytest_flopbudget._config.pyproject import Settings
from pytest_flopbudget._run import Counter

_PLUGIN_NAME = "flopbudget-count-server"


def starts_workers(config: pytest.Config) -> bool:
    """Whether this pytest is an xdist controller that will start workers (`-n N`, `--dist ...`), as xdist itself
    decides: a distribution mode and not `--collect-only`."""
    option = config.option
    return getattr(option, "dist", "no") != "no" and bool(getattr(option, "numprocesses", 0)) and not option.collectonly


class _CountServerPlugin:
    """Registered on the controller while its server runs: gives each worker the server's address."""

    def __init__(self, server: CountServer) -> None:
        self.server = server

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.server.address


def start_server(config: pytest.Config, settings: Settings, collect_models: bool) -> None:
    """On an xdist controller with pyproject models to count: fork the count server (in `pytest_configure`, before
    xdist starts a worker or a thread) and stop it when pytest ends."""
    if not (collect_models and settings.models and starts_workers(config)):
        return
    server = CountServer.start(settings.models, settings.root)
    if server is None:
        return
    config.add_cleanup(server.stop)
    config.pluginmanager.register(_CountServerPlugin(server), _PLUGIN_NAME)
    config.add_cleanup(lambda: _unregister(config))


def _unregister(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(_PLUGIN_NAME)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)


def worker_counter(config: pytest.Config, settings: Settings) -> Counter | None:
    """On a worker the controller gave a server's address: the counter that asks it; otherwise None (count here)."""
    address = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    return ServedCounter(str(address), settings.root) if address else None
