"""Under pytest-xdist the pyproject models are counted by the controller's count server: the workers never import
torch for them, the results are those of a serial run, and a worker that cannot reach the server counts itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import clean_env

pytest.importorskip("torch")
pytest.importorskip("xdist")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server forks"),
]

MODELS = """\
from torch import nn


def mlp(width=8):
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 2))


def broken():
    raise RuntimeError("no weights here")
"""

PYPROJECT = """\
[tool.flopbudget.models.a]
target = "models:mlp"
inputs = [[1, 8]]
flops = "1k"

[tool.flopbudget.models.b]
target = "models:mlp"
inputs = [[4, 8]]
flops = "1k"

[tool.flopbudget.models.over]
target = "models:mlp"
inputs = [[64, 8]]
flops = "1k"

[tool.flopbudget.models.broken]
target = "models:broken"
inputs = [[1, 8]]
flops = "1k"
"""

#: Each process says at its end whether it imported torch; BOGUS_SERVER points the workers at no server.
CONFTEST = """\
import os
import sys

import pytest


def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(f"torch-{worker}.txt", "w") as out:
        out.write(str("torch" in sys.modules))


@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_configure_node(node):
    if os.environ.get("BOGUS_SERVER"):
        node.workerinput["flopbudget_count_server"] = os.environ["BOGUS_SERVER"]
"""


def run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    for old in root.glob("torch-*.txt"):
        old.unlink()
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly",
         "--flopbudget-report=json:r.json", *args],
        cwd=root, env=clean_env(COLUMNS="200", **env), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def results(root: Path) -> dict[str, object]:
    data = json.loads((root / "r.json").read_text())
    data.pop("duration", None)
    return data


def imported_torch(root: Path) -> dict[str, bool]:
    return {path.stem.removeprefix("torch-"): path.read_text() == "True" for path in sorted(root.glob("torch-*"))}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    return tmp_path


def test_workers_ask_the_server_and_report_what_a_serial_run_reports(project: Path) -> None:
    serial = run(project, "-p", "no:xdist")
    assert serial.returncode == 1, serial.stdout[-2000:]
    expected = results(project)
    parallel = run(project, "-n", "2")
    assert parallel.returncode == 1, parallel.stdout[-2000:]
    assert results(project) == expected
    assert "2 failed, 2 passed" in parallel.stdout and "no weights here" in parallel.stdout
    assert imported_torch(project) == {"controller": False, "gw0": False, "gw1": False}


def test_a_worker_that_cannot_reach_the_server_counts_itself(project: Path, tmp_path: Path) -> None:
    serial = run(project, "-p", "no:xdist")
    expected = results(project)
    parallel = run(project, "-n", "2", BOGUS_SERVER=str(tmp_path / "nobody-listens.sock"))
    assert parallel.returncode == serial.returncode == 1, parallel.stdout[-2000:]
    assert results(project) == expected
    assert imported_torch(project) == {"controller": False, "gw0": True, "gw1": True}
