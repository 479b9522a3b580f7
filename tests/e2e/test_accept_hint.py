"""`to accept:` is one complete instruction: following it literally makes the next run clean.

Each test reads the hint a failing run printed, edits the line it names to the value it gives, runs the command it
gives, and checks that the next run passes with nothing left to say about the model (raising a ceiling alone used
to leave a permanent "+30.6% over baseline"). Through `flopbudget check` (pyproject models, with and without
`--base-ref`) and pytest (a marker on the function, and one on a `pytest.param`).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from e2e_helpers import MODELS, ProjectTemplate, clean_env, flopbudget, git, init_repo

pytest.importorskip("torch")

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = "100"
max-increase = "5%"
"""

HINT = re.compile(r"^to accept: (?P<edits>.*); then run `(?P<command>[^`]*)` and commit both$", re.MULTILINE)
TOML_EDIT = re.compile(r'^set (?P<key>[\w-]+) = (?P<value>"[^"]*"|\d+) at (?P<file>[^:]+):(?P<line>\d+) \(')
MARKER_EDIT = re.compile(
    r'^set (?P<key>\w+)=(?P<value>"[^"]*"|\d+) in the flop_budget marker at (?P<file>[^:]+):(?P<line>\d+)$'
)


def follow(project: Path, output: str) -> subprocess.CompletedProcess[str]:
    """Do what the printed hint says, literally: edit each named line, then run the named command."""
    match = HINT.search(output)
    assert match, output
    for edit in match["edits"].split("; "):
        toml, marker = TOML_EDIT.match(edit), MARKER_EDIT.match(edit)
        found = toml or marker
        assert found, edit
        path = project / found["file"]
        lines = path.read_text().splitlines(keepends=True)
        number = int(found["line"]) - 1
        if toml:  # the key's line becomes `key = value`
            assert lines[number].startswith(f"{found['key']} = "), lines[number]
            lines[number] = f"{found['key']} = {found['value']}\n"
        else:  # the marker's argument on that line gets the value
            pattern = rf"\b{found['key']}=(\"[^\"]*\"|[^,)]+)"
            assert re.search(pattern, lines[number]), lines[number]
            lines[number] = re.sub(pattern, f"{found['key']}={found['value']}", lines[number])
        path.write_text("".join(lines))
    words = shlex.split(match["command"])
    program = {"flopbudget": [sys.executable, "-m", "pytest_flopbudget"], "pytest": [sys.executable, "-m", "pytest"]}
    done = subprocess.run(
        [*program[words[0]], *words[1:]], cwd=project, capture_output=True, text=True, env=clean_env(), timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def pytest_in(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args],
        cwd=project, capture_output=True, text=True, env=clean_env(COLUMNS="300"), timeout=300,
    )  # fmt: skip


def build_project(root: Path) -> None:
    (root / "models.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    assert flopbudget(root, "check", "--update").returncode == 0


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> ProjectTemplate:
    return ProjectTemplate(tmp_path_factory.mktemp("accept-template"), build_project)


@pytest.fixture
def project(template: ProjectTemplate, tmp_path: Path) -> Path:
    return template.copy_to(tmp_path)


def test_following_the_cli_hint_for_a_ceiling_makes_the_next_check_clean(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("models:small", "models:wide"))
    failed = flopbudget(project, "check")
    assert failed.returncode == 1
    # nn.Linear(8, 64) on one row: 8*64 = 512 MACs, over 100 and +3100% over the baseline's 8*2 = 16
    assert (
        'to accept: set macs = "512" at pyproject.toml:4 (tool.flopbudget.models.small); '
        "then run `flopbudget check --update small` and commit both"
    ) in failed.stdout
    follow(project, failed.stdout)
    clean = flopbudget(project, "check")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "warning" not in clean.stdout + clean.stderr and "over baseline" not in clean.stdout
    assert re.search(r"^small\s+ok\s.*\s=$", clean.stdout, re.MULTILINE), clean.stdout


def test_following_the_hint_under_base_ref_raises_max_increase_and_the_gate_passes(project: Path) -> None:
    init_repo(project)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    git(project, "update-ref", "refs/remotes/origin/main", "main")
    pyproject = project / "pyproject.toml"
    models = project / "models.py"
    models.write_text(models.read_text().replace("nn.Linear(8, 2)", "nn.Linear(8, 3)"))
    failed = flopbudget(project, "check", "--base-ref", "origin/main")
    assert failed.returncode == 1
    # 8*3 = 24 MACs over the base's 16: +50%, so max-increase "50%" is the least that passes
    assert (
        'to accept: set max-increase = "50%" at pyproject.toml:5 (tool.flopbudget.models.small); '
        "then run `flopbudget check --update small` and commit both"
    ) in failed.stdout
    follow(project, failed.stdout)
    assert 'max-increase = "50%"' in pyproject.read_text()
    passed = flopbudget(project, "check", "--base-ref", "origin/main")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    # what remains is for the reviewer: the raise and the growth, both warnings
    assert "small: max-increase raised from 5% to 50% since origin/main" in passed.stdout
    assert flopbudget(project, "check").stdout.count("warning") == 0  # and locally the next run is clean


TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget(macs="20")
def test_plain(flopbudget):
    flopbudget.count(nn.Linear(8, WIDTH), torch.zeros(1, 8))


@pytest.mark.parametrize(
    "width",
    [
        pytest.param(2, id="narrow"),
        pytest.param(WIDTH, id="wide", marks=pytest.mark.flop_budget(macs="30")),
    ],
)
@pytest.mark.flop_budget(macs="1k")
def test_param(flopbudget, width):
    flopbudget.count(nn.Linear(8, width), torch.zeros(1, 8))
"""


@pytest.mark.slow
def test_following_the_pytest_hints_for_markers_makes_the_next_run_clean(tmp_path: Path) -> None:
    tests = tmp_path / "test_budgets.py"
    tests.write_text("WIDTH = 2\n" + TESTS)
    recorded = pytest_in(tmp_path, "--flopbudget-update")
    assert recorded.returncode == 0, recorded.stdout
    tests.write_text(tests.read_text().replace("WIDTH = 2", "WIDTH = 5"))
    failed = pytest_in(tmp_path, "-rA")
    assert failed.returncode == 1, failed.stdout
    # 8*5 = 40 MACs: over the function's 20, and over the wide parameter's own 30 (its marker, not the 1k one)
    hints = HINT.findall(failed.stdout)
    assert (
        'set macs="40" in the flop_budget marker at test_budgets.py:7',
        "pytest --flopbudget-update test_budgets.py::test_plain",
    ) in hints
    assert (
        'set macs="40" in the flop_budget marker at test_budgets.py:16',
        "pytest --flopbudget-update 'test_budgets.py::test_param[wide]'",
    ) in hints
    assert len(hints) == 2, failed.stdout  # the narrow parameter passes under the function's 1k
    for block in failed.stdout.split("to accept: ")[1:]:
        follow(tmp_path, "to accept: " + block.splitlines()[0])
    clean = pytest_in(tmp_path)
    assert clean.returncode == 0, clean.stdout
    assert "warning" not in clean.stdout.lower() and "over baseline" not in clean.stdout
    assert clean.stdout.count(" ok ") == 3 and "stale" not in clean.stdout


# -- every budget kind, in pyproject.toml and in the marker ----------------------------------------------------------
#
# Each model starts under budgets it breaks (ceilings of 1), so the first hints set every ceiling to the count; then
# the models grow (WIDTH 2 -> 5: a wider layer and buffer, more rfft calls that have no formula, a seq**2 term), and
# the second hints raise each setting again. Both rounds are followed literally and must end in a clean run.

GROWING_MODELS = """\
import torch
from torch import nn

WIDTH = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, WIDTH)
        self.register_buffer("scale", torch.ones(WIDTH))

    def forward(self, x):
        y = self.proj(x) * self.scale
        for _ in range(WIDTH):
            y = y + torch.fft.rfft(y, dim=-1).real.sum(-1, keepdim=True)
        if WIDTH > 2:
            y = y + (x @ x.transpose(-1, -2)).sum(-1, keepdim=True)
        return y


class Quantized(nn.Module):
    def forward(self, a, b):
        return torch._int_mm(a, torch.cat([b] * WIDTH, dim=1))


def net():
    return Net()


def plain():
    return nn.Linear(8, WIDTH)


def quantized():
    return Quantized()
"""

SEQ = 'inputs = [[1, "seq", 8]]\ndims = { seq = 16 }\ncurve = { seq = [4, 64] }\n'

EVERY_KIND_PYPROJECT = f"""\
[tool.flopbudget.models.ceilings]
target = "models:net"
inputs = [[1, 16, 8]]
flops = "1"
macs = "1"
params = "1"
max-skipped-ops = 0
bytes = "1"
param-bytes = "1"
buffer-bytes = "1"
peak-memory = "1"

[tool.flopbudget.models.mac-slot]
target = "models:plain"
inputs = [[1, 8]]
flops = "1 MACs"
max-increase = "5%"
warn-increase = "1%"

[tool.flopbudget.models.int]
target = "models:quantized"
inputs = [{{ shape = [32, 64], dtype = "int8" }}, {{ shape = [64, 8], dtype = "int8" }}]
int-ops = "1"

[tool.flopbudget.models.phases]
target = "models:plain"
inputs = [[1, 8]]
training = true
phases = {{ forward = {{ flops = "1" }}, backward = {{ macs = "1", bytes = "1" }} }}

[tool.flopbudget.models.curve]
target = "models:net"
{SEQ}max-degree = {{ seq = 1, bytes = {{ seq = 1 }} }}
at = [{{ seq = 64, flops = "1" }}, {{ seq = 32, macs = "1", bytes = "1" }}]

[tool.flopbudget.models.points]
target = "models:net"
{SEQ}
[[tool.flopbudget.models.points.at]]
seq = 64
flops = "1"
bytes = "1"
"""

# each marker on one line, as the hint's edit names one line (the decorator's)
CEILINGS = 'flops="1", macs="1", params="1", max_skipped_ops=0, bytes="1", param_bytes="1", buffer_bytes="1", '
CEILINGS += 'peak_memory="1"'
ON_THE_CURVE = 'max_degree={"seq": 1, "bytes": {"seq": 1}}, '
ON_THE_CURVE += 'at=[{"seq": 64, "flops": "1"}, {"seq": 32, "macs": "1", "bytes": "1"}]'
EVERY_KIND_TESTS = """\
import pytest
import torch
from torch import nn

from models import Net, Quantized, plain


@pytest.mark.flop_budget(CEILINGS)
def test_ceilings(flopbudget):
    flopbudget.count(Net(), torch.zeros(1, 16, 8))


@pytest.mark.flop_budget(flops="1 MACs", max_increase="5%", warn_increase="1%")
def test_mac_slot(flopbudget):
    flopbudget.count(plain(), torch.zeros(1, 8))


@pytest.mark.flop_budget(int_ops="1")
def test_int(flopbudget):
    flopbudget.count(Quantized(), torch.zeros(32, 64, dtype=torch.int8), torch.zeros(64, 8, dtype=torch.int8))


@pytest.mark.flop_budget(phases={"forward": {"flops": "1"}, "backward": {"macs": "1", "bytes": "1"}})
def test_phases(flopbudget):
    flopbudget.count(plain(), torch.zeros(1, 8), training=True)


@pytest.mark.flop_budget(ON_THE_CURVE)
def test_curve(flopbudget):
    flopbudget.count_curve(Net(), [1, "seq", 8], dims={"seq": 16}, curve={"seq": (4, 64)})
""".replace("CEILINGS", CEILINGS).replace("ON_THE_CURVE", ON_THE_CURVE)

PYPROJECT_EDIT = re.compile(
    r'^set (?P<key>[\w-]+) = (?P<value>"[^"]*"|\d+) at (?P<file>[^:]+):(?P<line>\d+)(?: \((?P<table>[^)]*)\))?$'
)
MARKER_PATH_EDIT = re.compile(
    r'^set (?P<path>\w+(?:\[[^\]]+\])*)=(?P<value>"[^"]*"|\d+) in the flop_budget marker '
    r"at (?P<file>[^:]+):(?P<line>\d+)$"
)


def toml_inline(value: object) -> str:
    """`value` written back as a TOML inline value (the few types a budget holds)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {toml_inline(item)}" for key, item in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(item) for item in value) + "]"
    return json.dumps(value)


def set_in_toml_line(line: str, table: str, key: str, value: str) -> str:
    """Set `key` in the inline table `table` names, on a line such as `at = [{ seq = 64, flops = "1" }]`."""
    model_table = re.match(r"tool\.flopbudget\.models\.[\w-]+", table)
    assert model_table, table
    path: list[str | int] = [
        int(part[1:-1]) if part.startswith("[") else part
        for part in re.findall(r"\[\d+\]|[\w-]+", table[model_table.end() :])
    ]
    ((first, data),) = tomllib.loads(line).items()
    assert first == path[0], (line, table)
    holder = data
    for part in path[1:]:
        holder = holder[part]
    holder[key] = tomllib.loads(f"v = {value}")["v"]
    return f"{first} = {toml_inline(data)}\n"


def set_in_marker_line(line: str, path: str, value: str) -> str:
    """Set the marker argument `path` (`phases["forward"]["flops"]`) on a line holding `flop_budget(...)`."""
    start = line.index("flop_budget(")
    call = ast.parse(line[start:].strip().rstrip(",")).body[0].value  # type: ignore[attr-defined]
    arguments = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    name, *subscripts = re.findall(r"^\w+|\[[^\]]+\]", path)
    new = ast.literal_eval(value)
    if subscripts:
        holder = arguments[name]
        *walk, last = [ast.literal_eval(s[1:-1]) for s in subscripts]
        for part in walk:
            holder = holder[part]
        holder[last] = new
    else:
        arguments[name] = new
    written = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    return line[:start] + f"flop_budget({written})" + line[start + len(ast.unparse(call)) :]


PROGRAM = {"flopbudget": [sys.executable, "-m", "pytest_flopbudget"], "pytest": [sys.executable, "-m", "pytest"]}


def follow_every(project: Path, output: str) -> int:
    """Follow each `to accept:` hint `output` holds, literally; the number followed."""
    hints = HINT.findall(output)
    for edits, command in hints:
        for edit in edits.split("; "):
            toml, marker = PYPROJECT_EDIT.match(edit), MARKER_PATH_EDIT.match(edit)
            found = toml or marker
            assert found, edit
            path = project / found["file"]
            lines = path.read_text().splitlines(keepends=True)
            number = int(found["line"]) - 1
            if toml and lines[number].startswith(f"{found['key']} = "):
                lines[number] = f"{found['key']} = {found['value']}\n"
            elif toml:
                lines[number] = set_in_toml_line(lines[number], found["table"], found["key"], found["value"])
            else:
                lines[number] = set_in_marker_line(lines[number], found["path"], found["value"])
            path.write_text("".join(lines))
        words = shlex.split(command)
        program = {
            "flopbudget": [sys.executable, "-m", "pytest_flopbudget"],
            "pytest": [sys.executable, "-m", "pytest"],
        }
        done = subprocess.run(
            [*program[words[0]], *words[1:]], cwd=project, capture_output=True, text=True, env=clean_env(), timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return len(hints)


def grow(project: Path) -> None:
    models = project / "models.py"
    models.write_text(models.read_text().replace("WIDTH = 2", "WIDTH = 5"))


@pytest.mark.slow
def test_every_budget_kind_in_pyproject_is_accepted_by_following_its_hint(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(GROWING_MODELS)
    (tmp_path / "pyproject.toml").write_text(EVERY_KIND_PYPROJECT)
    flopbudget(tmp_path, "check", "--update")
    for grown in (False, True):
        if grown:
            grow(tmp_path)
        failed = flopbudget(tmp_path, "check")
        assert failed.returncode == 1, failed.stdout + failed.stderr
        # every model fails, and each has a hint that edits its settings (the mac slot keeps its unit)
        assert follow_every(tmp_path, failed.stdout) == 6, failed.stdout
        assert 'set flops = "' in failed.stdout and ' MACs" at pyproject.toml:16' in failed.stdout
        assert "(tool.flopbudget.models.curve.at[1])" in failed.stdout
        assert "(tool.flopbudget.models.phases.phases.backward)" in failed.stdout
        clean = flopbudget(tmp_path, "check")
        assert clean.returncode == 0, failed.stdout + "\n-- after following --\n" + clean.stdout + clean.stderr
        assert "to accept" not in clean.stdout and "over baseline" not in clean.stdout
    # the seq**2 term the growth added: the degree was raised to what the formula has
    assert "max-degree = { seq = 2, bytes = { seq = 2 } }" in (tmp_path / "pyproject.toml").read_text()


@pytest.mark.slow
def test_every_budget_kind_in_a_marker_is_accepted_by_following_its_hint(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(GROWING_MODELS)
    tests = tmp_path / "test_budgets.py"
    tests.write_text(EVERY_KIND_TESTS)
    pytest_in(tmp_path, "--flopbudget-update")
    for grown in (False, True):
        if grown:
            grow(tmp_path)
        failed = pytest_in(tmp_path, "-rA")
        assert failed.returncode == 1, failed.stdout
        assert follow_every(tmp_path, failed.stdout) == 5, failed.stdout
        assert 'set phases["backward"]["macs"]="' in failed.stdout
        assert 'set at[1]["bytes"]="' in failed.stdout
        compile(tests.read_text(), str(tests), "exec")  # the edited markers are still Python
        clean = pytest_in(tmp_path, "-rA")
        assert clean.returncode == 0, failed.stdout + "\n-- after following --\n" + clean.stdout
        assert "to accept" not in clean.stdout and "over baseline" not in clean.stdout
    assert "max_degree={'seq': 2, 'bytes': {'seq': 2}}" in tests.read_text()
