"""`--output`, `--report` and the job summary aimed at devices and pipes, in real processes, as root.

A rename onto `/dev/null` succeeds for root and replaces the device node with a regular file, so each case asserts
the device is still a character device afterwards. A full device (`/dev/full`) or a full standard output is one
`flopbudget: error:` line naming what could not be written, exit status 2, never "internal error". The project
is ONNX-only, so no case imports torch.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from e2e_helpers import clean_env, flopbudget
from onnx_helpers import NET_PYPROJECT, write_onnx

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/null and /dev/full")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_onnx(tmp_path / "net.onnx")
    (tmp_path / "pyproject.toml").write_text(NET_PYPROJECT)
    return tmp_path


@pytest.fixture(autouse=True)
def devices_stay_devices():
    before = {path: os.stat(path) for path in ("/dev/null", "/dev/full")}
    yield
    for path, info in before.items():
        now = os.stat(path)
        assert stat.S_ISCHR(now.st_mode) and (now.st_ino, now.st_rdev) == (info.st_ino, info.st_rdev), path


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("flopbudget: error:")]
    assert len(lines) == 1, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return lines[0]


def test_output_to_dev_null_writes_in_place(project: Path) -> None:
    done = flopbudget(project, "count", "net", "--output", "/dev/null")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_output_to_dev_stdout_reaches_the_pipe(project: Path) -> None:
    done = flopbudget(project, "count", "net", "--format", "json", "--output", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert '"backend": "onnx"' in done.stdout


def test_output_to_dev_full_is_one_error_line(project: Path) -> None:
    done = flopbudget(project, "count", "net", "--output", "/dev/full")
    assert done.returncode == 2
    assert error_line(done.stderr) == "flopbudget: error: --output /dev/full: cannot write it: No space left on device"


def test_a_full_standard_output_is_one_error_line(project: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_flopbudget", "count", "net"], cwd=project, stdout=full,
            stderr=subprocess.PIPE, text=True, env=clean_env(), timeout=300,
        )  # fmt: skip
    assert done.returncode == 2
    assert error_line(done.stderr) == "flopbudget: error: cannot write to standard output: No space left on device"


@pytest.mark.parametrize("kind", ["json", "markdown", "gitlab"])
def test_reports_to_dev_null_and_dev_full(project: Path, kind: str) -> None:
    done = flopbudget(project, "check", "--no-cache", "--no-require-baseline", "--report", f"{kind}:/dev/null")
    assert done.returncode == 0, done.stderr
    done = flopbudget(project, "check", "--no-cache", "--no-require-baseline", "--report", f"{kind}:/dev/full")
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        f"flopbudget: error: cannot write the {kind} report {kind}:/dev/full: No space left on device"
    )


def test_job_summary_on_dev_full_is_one_error_line(project: Path) -> None:
    done = flopbudget(project, "check", "--no-cache", "--no-require-baseline", GITHUB_ACTIONS="true",
                      GITHUB_STEP_SUMMARY="/dev/full")  # fmt: skip
    assert done.returncode == 2
    assert "cannot write the github report github: No space left on device" in error_line(done.stderr)


def test_a_report_into_a_fifo_reaches_its_reader(project: Path) -> None:
    fifo = project / "results.pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    done = flopbudget(project, "check", "--no-cache", "--no-require-baseline", "--report", f"json:{fifo}")
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"format": "pytest-flopbudget/results/2"' in received[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
