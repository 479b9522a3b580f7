"""`to accept:` is one complete instruction: following it literally makes the next run clean.

Each test reads the hint a failing run printed, edits the line it names to the value it gives, runs the command it
gives, and checks that the next run passes with nothing left to say about the model (raising a ceiling alone used
to leave a permanent "+30.6% over baseline"). Through `flopbudget check` (pyproject models, with and without
`--base-ref`) and pytest (a marker on the function, and one on a `pytest.param`).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
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
