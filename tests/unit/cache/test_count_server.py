"""`_cache/count_server.py`: the cases of `count_server_cases.py`, run in a fresh interpreter.

The server refuses to fork from a process where jax's backend runs (`fork_safety`), and a worker of the suite may
have run a JAX test before this one; so the cases run in a pytest of their own, where nothing started jax, and each
must pass there (none may be skipped)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks")
CASES = Path(__file__).with_name("count_server_cases.py")


def test_every_count_server_case_passes_in_a_process_where_jax_never_ran(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COUNT_SERVER_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-rA", str(CASES)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard far above the expected time
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "7 passed" in report and "skipped" not in report, report
