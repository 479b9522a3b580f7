"""`flopbudget check -j N` in real processes: the same bytes as `-j 1`, and a Ctrl-C that stops every process.

The project has models in two modules (so the pool cuts one module's models into parts and runs the other's
beside them), one over its budget and one whose factory raises: each must read exactly as without `-j`, in
the stdout, in the JSON report and in the baselines an update writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_helpers import clean_env, flopbudget

pytestmark = pytest.mark.slow

WIDE = """\
from torch import nn


def mlp(width=8):
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 2))


def broken():
    raise RuntimeError("no weights here")
"""

CONV = """\
from torch import nn


def net(channels=4):
    return nn.Sequential(nn.Conv2d(3, channels, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
"""

PYPROJECT = """\
[tool.flopbudget]
baseline-dir = "baselines"

[tool.flopbudget.models.mlp_a]
target = "wide:mlp"
inputs = [[1, 8]]
flops = "1k"

[tool.flopbudget.models.conv_a]
target = "conv:net"
inputs = [[1, 3, 8, 8]]
flops = "100k"

[tool.flopbudget.models.mlp_b]
target = "wide:mlp"
inputs = [[4, 8]]
flops = "1k"

[tool.flopbudget.models.broken]
target = "wide:broken"
inputs = [[1, 8]]
flops = "1k"

[tool.flopbudget.models.mlp_over]
target = "wide:mlp"
inputs = [[64, 8]]
flops = "1k"

[tool.flopbudget.models.conv_b]
target = "conv:net"
inputs = [[2, 3, 16, 16]]
flops = "1M"
"""


def baselines(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "baselines").glob("*"))}


def test_check_with_jobs_gives_the_same_bytes_as_one_at_a_time(tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_text(WIDE)
    (tmp_path / "conv.py").write_text(CONV)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    seen: dict[str, tuple[str, str, bytes, dict[str, bytes]]] = {}
    for jobs in ("1", "2", "3"):
        for stale in (tmp_path / "baselines").glob("*"):
            stale.unlink()
        update = flopbudget(tmp_path, "check", "--no-cache", "-j", jobs, "--update")
        assert update.returncode == 2, update.stderr  # `broken` cannot be counted: not even an update passes
        written = baselines(tmp_path)
        check = flopbudget(tmp_path, "check", "--no-cache", "-j", jobs, "--report", f"json:report-{jobs}.json")
        assert check.returncode == 2, check.stderr
        report = (tmp_path / f"report-{jobs}.json").read_bytes()
        seen[jobs] = (update.stdout, check.stdout, report, written)
    one = seen["1"]
    assert set(one[3]) == {f"{name}.json" for name in ("mlp_a", "conv_a", "mlp_b", "mlp_over", "conv_b")}
    assert "mlp_over" in one[1] and "broken" in one[1] and "no weights here" in one[1] + one[2].decode()
    for jobs in ("2", "3"):
        assert seen[jobs] == one, f"-j {jobs} differs from -j 1"


def test_check_with_jobs_and_the_cache_answers_as_one_at_a_time(tmp_path: Path) -> None:
    """Half the models answered from the cache, the other half counted in the pool: the same bytes again."""
    (tmp_path / "wide.py").write_text(WIDE)
    (tmp_path / "conv.py").write_text(CONV)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "FLOPBUDGET_NO_CACHE": ""}  # the suite turns it off
    plain = flopbudget(tmp_path, "check", "--no-cache", **env)
    assert flopbudget(tmp_path, "check", "-j", "2", **env).stdout == plain.stdout  # every model counted, recorded
    (tmp_path / "conv.py").write_text(CONV + "\n# edited: conv_a and conv_b are counted again\n")
    cached = flopbudget(tmp_path, "check", "-j", "2", **env)
    assert cached.stdout == plain.stdout
    assert "3 of 6 models unchanged since their cached count" in cached.stderr, cached.stderr


SLEEPY = """\
import os
import time
from pathlib import Path

from torch import nn


def build():
    (Path(__file__).parent / "started" / str(os.getpid())).touch()
    time.sleep(120)
    return nn.Linear(4, 4)
"""


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie nobody reaped yet has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="-j forks: Linux only")
@pytest.mark.parametrize("whom", ["the check", "its process group"])
def test_ctrl_c_stops_every_process_and_writes_no_baseline(tmp_path: Path, whom: str) -> None:
    """A SIGINT to `check -j 2 --update` while two models are counting (to the check alone, as `kill -INT` does,
    or to its whole process group, as a terminal's Ctrl-C does): it exits 130 within seconds, every model's
    process is gone, and no baseline (not even a partial one) was written."""
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    (tmp_path / "started").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "".join(
            f'[tool.flopbudget.models.s{i}]\ntarget = "sleepy:build"\ninputs = [[1, 4]]\nflops = "1k"\n\n'
            for i in range(4)
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_flopbudget", "check", "-j", "2", "--update", "--no-cache"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group: the test can always stop all of it
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240  # importing torch on a loaded machine
        while len(list((tmp_path / "started").iterdir())) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the two models never started"
            time.sleep(0.2)
        models = [int(p.name) for p in (tmp_path / "started").iterdir()]
        if whom == "the check":
            process.send_signal(signal.SIGINT)
        else:
            os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=30)  # the hang guard
        assert process.returncode == 130, err
        assert err.strip().splitlines()[-1] == "flopbudget: error: interrupted", err
        assert "Traceback" not in err
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in models) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in models if _alive(pid)], "a model's process outlived the check"
        assert not (tmp_path / "baselines").exists() and not (tmp_path / ".flopbudget").exists()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
