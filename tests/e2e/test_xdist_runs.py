"""Under pytest-xdist, a worker whose results cannot reach the controller fails the run loudly, in every output.

The conftest makes one worker's export fail as a 4,300-digit integer would (`int` -> `str` refuses it), so that
worker's measurements cannot be sent. Before, the run said `2 passed`, exit 0, no baselines, JSON `passed: true`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import MODELS, clean_env

pytest.importorskip("torch")
pytest.importorskip("xdist")

PYPROJECT = """\
[tool.flopbudget.models.a]
target = "models:small"
inputs = [[1, 8]]
macs = "1k"

[tool.flopbudget.models.b]
target = "models:wide"
inputs = [[1, 8]]
macs = "1k"
"""

CONFTEST = """\
import os
from pytest_flopbudget import _run as run

_export = run.Run.export

def export(self):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1" and self.measurements:
        return {"measurements": [{"too_long": 10 ** 5000}]}  # json.dumps refuses it: int -> str limit
    return _export(self)

run.Run.export = export
"""


@pytest.mark.slow
def test_a_worker_that_cannot_send_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-n", "2",
         "--dist", "each", "pyproject.toml", "--flopbudget-report=json:r.json"],
        cwd=tmp_path, env=clean_env(COLUMNS="400"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout[-2000:]
    assert "xdist worker gw1 could not send its results: ValueError" in done.stdout
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["passed"] is False
    assert [u["name"] for u in results["unchecked"]] == ["xdist worker gw1"]
