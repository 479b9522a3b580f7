"""The count server xdist workers ask: the same Report as counting in the worker, and the worker's own count
whenever the server cannot answer.

Run by `test_count_server.py` in an interpreter of their own: the server is not forked from a process where jax's
backend runs (`fork_safety`), and a worker of the suite may have run a JAX test before."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_flopbudget._backends import count_entry
from pytest_flopbudget._cache.count_server import CountServer, ServedCounter
from pytest_flopbudget._config.pyproject import Settings, parse_settings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks")
torch = pytest.importorskip("torch")  # imported here before the server forks, as in a warm process: no new import

MODEL = """\
import os

from torch import nn


def build():
    with open("pids.log", "a") as log:
        log.write(f"{os.getpid()}\\n")
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))


def broken():
    raise RuntimeError("no weights here")


def crash():
    if os.getpid() != int(os.environ["COUNT_SERVER_TEST_PID"]):  # in the server: the interpreter dies
        os._exit(3)
    return build()
"""

PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "served_model:build"
inputs = [[2, 8]]
flops = "1k"

[tool.flopbudget.models.broken]
target = "served_model:broken"
inputs = [[2, 8]]
flops = "1k"

[tool.flopbudget.models.crash]
target = "served_model:crash"
inputs = [[2, 8]]
flops = "1k"
"""


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """Count once here first: the server forked from this process then starts warm, as the controller's does
    once its warm-up is done (seconds on a loaded machine, paid once per module)."""
    from pytest_flopbudget._backends import count

    count(torch.nn.Linear(2, 2), torch.zeros(1, 2))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    (tmp_path / "served_model.py").write_text(MODEL)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield parse_settings(PYPROJECT, tmp_path / "pyproject.toml")
    sys.modules.pop("served_model", None)


def counted_in(root: Path) -> list[int]:
    return [int(line) for line in (root / "pids.log").read_text().split()]


def test_the_server_counts_in_a_process_of_its_own_and_answers_as_the_worker_would(project: Settings) -> None:
    server = CountServer.start(project.models, project.root)
    assert server is not None
    try:
        served = ServedCounter(server.address, project.root)
        report = served(project.models["mlp"], project.root)
        assert counted_in(project.root) != [os.getpid()]  # not in this process
        assert report.to_dict() == count_entry(project.models["mlp"], project.root).to_dict()
        with pytest.raises(Exception, match="no weights here"):  # a model error, as in the worker
            served(project.models["broken"], project.root)
    finally:
        server.stop()
    assert not Path(server.directory).exists()


def test_a_lane_counts_one_model_after_the_other_in_itself(project: Settings) -> None:
    """No fork per model: a lane counts each request in its own process, as a serial pytest does."""
    server = CountServer.start(project.models, project.root, lanes=1)
    assert server is not None
    try:
        served = ServedCounter(server.address, project.root)
        for _ in range(3):
            served(project.models["mlp"], project.root)
        lanes = set(counted_in(project.root))
        assert len(lanes) == 1 and os.getpid() not in lanes
    finally:
        server.stop()


def test_a_lane_a_model_crashed_is_replaced_and_its_worker_counts_that_model_itself(
    project: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNT_SERVER_TEST_PID", str(os.getpid()))
    server = CountServer.start(project.models, project.root, lanes=1)
    assert server is not None
    try:
        served = ServedCounter(server.address, project.root)
        report = served(project.models["crash"], project.root)  # the lane died: counted here
        assert counted_in(project.root) == [os.getpid()]
        assert report.flops == count_entry(project.models["mlp"], project.root).flops
        served(project.models["mlp"], project.root)  # the one lane was replaced: the server answers again
        assert counted_in(project.root)[-1] != os.getpid()
    finally:
        server.stop()


def test_a_model_the_server_does_not_know_as_the_worker_does_is_counted_in_the_worker(project: Settings) -> None:
    """The server read its pyproject at start-up; a worker whose entry differs (its table, or its name) counts it
    itself, so it is never answered for another model's table."""
    server = CountServer.start({"mlp": project.models["broken"]}, project.root)
    assert server is not None
    try:
        ServedCounter(server.address, project.root)(project.models["mlp"], project.root)
        assert counted_in(project.root) == [os.getpid()]
    finally:
        server.stop()


def test_a_formula_the_server_has_not_seen_leaves_the_worker_counting_itself(project: Settings) -> None:
    """A worker that registered a formula (its conftest.py) after the controller forked the server: the server
    would count without it, so the worker counts the model itself, with it."""
    from pytest_flopbudget import register_formula

    server = CountServer.start(project.models, project.root)
    assert server is not None
    try:
        with register_formula("mylib.never_called", lambda args, out: (0, 0), backend="torch"):
            ServedCounter(server.address, project.root)(project.models["mlp"], project.root)
        assert counted_in(project.root) == [os.getpid()]
    finally:
        server.stop()


def test_a_server_that_is_gone_leaves_the_worker_counting_itself(project: Settings, tmp_path: Path) -> None:
    served = ServedCounter(str(tmp_path / "nobody-listens.sock"), project.root)
    report = served(project.models["mlp"], project.root)
    assert counted_in(project.root) == [os.getpid()]
    assert report.to_dict() == count_entry(project.models["mlp"], project.root).to_dict()


def test_no_server_without_models(project: Settings) -> None:
    assert CountServer.start({}, project.root) is None
