"""The installed `flopbudget` command in child processes: start-up without torch, `python -m`, one-line errors,
progress on a terminal, the same failure text as the pytest plugin, and this repository's own budgets.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from no_torch import BLOCK_TORCH
from onnx_helpers import NET_PYPROJECT, write_onnx

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("flopbudget")

#: Python run in a child: `import torch` raises, then `main()` runs for each argv in sys.argv[1] (a JSON list).
NO_TORCH = BLOCK_TORCH + textwrap.dedent(
    """
    from pytest_flopbudget._cli import main

    codes = []
    for argv in json.loads(sys.argv[1]):
        try:
            codes.append(main(argv))
        except SystemExit as exc:
            codes.append(exc.code)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "pytest", "onnx"})
    print(json.dumps({"codes": codes, "loaded": loaded}), file=sys.stderr)
    """
)


def child_env(**overrides: str) -> dict[str, str]:
    """The test's environment without anything that would change the CLI's behaviour (pre-commit, pytest)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PRE_COMMIT"))}
    env.update(overrides)
    return env


def flopbudget(*argv: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "pytest_flopbudget"]
    return subprocess.run(
        [*command, *argv], cwd=cwd, capture_output=True, text=True, timeout=300, env=child_env(), **kwargs
    )


def without_torch(argvs: list[list[str]], cwd: Path) -> tuple[list[int], list[str], str]:
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, json.dumps(argvs)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=child_env(),
    )  # fmt: skip
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    return summary["codes"], summary["loaded"], result.stdout


@pytest.fixture(scope="module")
def onnx_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx_project")
    write_onnx(root / "net.onnx")
    (root / "pyproject.toml").write_text(NET_PYPROJECT)
    return root


# -- start-up ----------------------------------------------------------------------------------------------------


def test_help_never_imports_torch(tmp_path):
    argvs = [["--help"], ["count", "--help"], ["check", "--help"], ["diff", "--help"], ["--version"]]
    codes, loaded, out = without_torch(argvs, tmp_path)
    assert codes == [0] * len(argvs)
    assert loaded == [], "--help must stay instant: no torch, no pytest, no onnx"
    assert out.count("examples:") == 4


def test_onnx_only_project_never_imports_torch(onnx_project):
    codes, loaded, out = without_torch(
        [["check", "--update"], ["check"], ["diff", "net"], ["count", "net"], ["count", "net.onnx", "-i", "1,3,8,8"]],
        onnx_project,
    )
    assert codes == [0, 0, 0, 0, 0], out
    assert loaded == ["onnx"]
    assert "net    ok" in out
    assert "net: no change since .flopbudget/net.json" in out
    assert "total: 28,160 FLOPs, 13,824 MACs, 108 params" in out


def test_python_m_pytest_flopbudget(onnx_project):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", "net"],
        cwd=onnx_project, capture_output=True, text=True, timeout=300, env=child_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1 model counted" in result.stdout
    result = subprocess.run([sys.executable, "-m", "pytest_flopbudget", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("flopbudget ")


# -- bad input: exit 2, one line, no traceback -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        ("", ["check"], "no pyproject.toml in"),
        ('[project]\nname = "x"\n', ["check"], "pyproject.toml has no [tool.flopbudget] table"),
        ("net", ["check", "nett"], "no model 'nett' in [tool.flopbudget.models]; did you mean 'net'?"),
        ("net", ["count", "net", "--input", "x=2;3"], "--input 'x=2;3' is not a shape"),
        ("net", ["count", "nowhere.models:build", "--input", "1,3"], "cannot import 'nowhere.models'"),
        (
            '[tool.flopbudget.models.x]\ntarget = "m:f"\ninputs = [[1]]\n',
            ["check"],
            "pyproject.toml:1: tool.flopbudget.models.x: declares no budget",
        ),
        # a digit int() refuses, or reads as another number, is no size; nor is one past the limit pyproject has
        ("net", ["count", "net", "--dim", "seq=\u00b2"], "--dim 'seq=\u00b2': write NAME=SIZE for a point"),
        ("net", ["count", "net", "--dim", "seq=\u0663"], "--dim 'seq=\u0663': write NAME=SIZE for a point"),
        ("net", ["count", "net", "--dim", f"seq={10**30}"], f"a size is at most 2**40 (1099511627776), got {10**30}"),
        ("net", ["count", "net", "--dim", "seq=8..1099511627777"], "a size is at most 2**40"),
        ("net", ["count", "net", "--input", "1099511627777,2"], "--input '1099511627777,2': a size is at most 2**40"),
        ("net", ["count", "net", "--input", "1\u00b2,2"], "--input '1\u00b2,2' is not a shape"),
        (
            '[tool.flopbudget.models.x]\ntarget = "m:f"\ninputs = [[1, "seq"]]\ndims = { seq = 9223372036854775807 }'
            '\nflops = "1"\n',
            ["check"],
            "pyproject.toml:4: tool.flopbudget.models.x.dims.seq: a size is at most 2**40 (1099511627776), got",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(tmp_path, onnx_project, setup, argv, message):
    if any((d / "pyproject.toml").exists() for d in tmp_path.parents):
        pytest.skip("a pyproject.toml above the temporary directory")
    cwd = onnx_project if setup == "net" else tmp_path
    if setup not in ("", "net"):
        (tmp_path / "pyproject.toml").write_text(setup)
    result = flopbudget(*argv, cwd=cwd)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("flopbudget: error: ") and message in lines[0]


# -- progress --------------------------------------------------------------------------------------------------------


def test_progress_on_a_terminal_and_nothing_in_a_pipe(onnx_project):
    piped = flopbudget("check", cwd=onnx_project)
    assert piped.returncode == 0 and piped.stderr == ""

    primary, secondary = pty.openpty()
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "pytest_flopbudget"]
    process = subprocess.Popen(
        [*command, "check"], cwd=onnx_project, stdout=subprocess.PIPE, stderr=secondary,
        env=child_env(TERM="xterm"),
    )  # fmt: skip
    os.close(secondary)
    terminal = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            terminal += chunk
        elif process.poll() is not None:
            break
    out = process.stdout.read().decode() if process.stdout else ""
    process.wait(timeout=60)
    os.close(primary)
    assert process.returncode == 0
    assert out == piped.stdout, "stdout is the same on a terminal and in a pipe"
    text = terminal.decode()
    assert "] 0/1 counting net" in text
    assert text.endswith("\r\x1b[K"), "the progress line is erased before the results"


# -- the pytest plugin and the CLI say the same thing -----------------------------------------------------------------

TORCH_MODELS = """\
from torch import nn

HIDDEN = 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, HIDDEN)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
"""


def test_same_failure_text_as_the_pytest_plugin(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "e2e_cli_models.py").write_text(TORCH_MODELS)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.mlp]\ntarget = "e2e_cli_models:MLP"\ninputs = [[2, 8]]\nflops = "200"\n'
    )
    assert flopbudget("check", "--update", cwd=tmp_path).returncode == 0
    models = tmp_path / "e2e_cli_models.py"
    models.write_text(models.read_text().replace("HIDDEN = 4", "HIDDEN = 8"))

    cli = flopbudget("check", cwd=tmp_path)
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=child_env(COLUMNS="200"),
    )  # fmt: skip
    assert cli.returncode == 1 and plugin.returncode == 1, plugin.stdout
    failure = cli.stdout.split("\n\n")[0].splitlines()
    assert failure[0] == "mlp: 356 FLOPs > budget 200 FLOPs (+78.0%); baseline 180 FLOPs"
    assert failure[1] == "FLOPs per layer, against .flopbudget/mlp.json:"
    plugin_lines = plugin.stdout.splitlines()
    for line in failure:
        assert line in plugin_lines, f"{line!r} is not in the plugin's output:\n{plugin.stdout}"


# -- this repository ---------------------------------------------------------------------------------------------------


def test_this_repositorys_examples_are_within_budget():
    """`flopbudget check` on the bundled examples: what the repository's own pre-commit hook runs."""
    pytest.importorskip("torch")
    baselines = {p.name: p.read_bytes() for p in (ROOT / ".flopbudget").glob("*.json")}
    started = time.perf_counter()
    result = flopbudget("check", cwd=ROOT)
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout and "no baseline" not in result.stdout
    assert {p.name: p.read_bytes() for p in (ROOT / ".flopbudget").glob("*.json")} == baselines
    print(f"flopbudget check on the bundled examples: {elapsed:.1f} s wall")


CHURN = """\
from pathlib import Path

from torch import nn


class Churn(nn.Module):
    def forward(self, x):
        Path("started").touch()
        for _ in range(100_000):  # about half a minute of small storages born and freed
            x = (x * 2 + 1).relu() - x.sigmoid()
        return x


def churn():
    return Churn()
"""


def test_ctrl_c_during_a_count_ends_it_every_time(tmp_path: Path) -> None:
    """A real SIGINT, at a few moments of the count: the command stops at once with 130 and one line (a signal
    landing in a weak-reference callback was ignored and the count ran on, one time in four)."""
    pytest.importorskip("torch")
    import signal

    (tmp_path / "churn.py").write_text(CHURN)
    for delay in (0.0, 0.13, 0.41, 0.77):
        (tmp_path / "started").unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest_flopbudget", "count", "churn:churn", "--input", "4,8"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = process.communicate(timeout=120)
        assert process.returncode == 130, err
        assert time.monotonic() - sent < 10, err  # the count alone runs for half a minute
        assert err.strip().splitlines()[-1] == "flopbudget: error: interrupted"
