"""Stale baselines are reported only by a run that can judge them, and removed only by an update that saw everything.

A baseline file no model of the run uses is stale only if no model or test of the project could own it. The CLI
never sees marker tests, so it judges none (a marker test's baseline is not warned about on every commit). A pytest
run judges only when nothing narrowed it: no -k, -m, paths or node ids, --deselect, --lf, collection errors or
early stop, every xdist worker heard from. And a test that owns a baseline owns it even when it was skipped or
failed before it counted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import MODELS, ProjectTemplate, clean_env, flopbudget

pytest.importorskip("torch")

PYPROJECT = '[tool.flopbudget.models.small]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = "1k"\n'

TEST_A = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget(macs="100")
def test_counted(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.zeros(1, 8))
"""

TEST_B = """\
import pytest
import torch
from torch import nn


@pytest.mark.skip(reason="needs a GPU")
@pytest.mark.flop_budget(macs="100")
def test_skipped(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.zeros(1, 8))


@pytest.mark.flop_budget(macs="100", name="shared")
def test_fails_first(flopbudget):
    raise RuntimeError("fails before it counts")


def test_fixture_only(flopbudget):
    pytest.skip("counts only on a GPU")
"""

OWNED = [
    "shared.json", "small.json", "tests.test_a.test_counted.json", "tests.test_b.test_fixture_only.json",
    "tests.test_b.test_skipped.json",
]  # fmt: skip
STALE = "1 stale baseline in .flopbudget (no model of this run uses them): renamed_away.json"


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:hypothesispytest", "-rA", *args],
        cwd=root, env=clean_env(COLUMNS="300"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def build_project(root: Path) -> None:
    (root / "models.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT + '\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text(TEST_A)
    (root / "tests" / "test_b.py").write_text(TEST_B)
    assert flopbudget(root, "check", "--update").returncode == 0
    baselines = root / ".flopbudget"
    for name in [*OWNED, "renamed_away.json"]:  # the marker tests' files, as an earlier run on a GPU wrote them
        if not (baselines / name).exists():
            (baselines / name).write_text((baselines / "small.json").read_text())


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> ProjectTemplate:
    return ProjectTemplate(tmp_path_factory.mktemp("stale-template"), build_project)


@pytest.fixture
def project(template: ProjectTemplate, tmp_path: Path) -> Path:
    return template.copy_to(tmp_path)


def files(project: Path) -> list[str]:
    return sorted(p.name for p in (project / ".flopbudget").iterdir())


def test_the_cli_never_calls_a_file_stale(project: Path) -> None:
    for args in (("check",), ("check", "--update"), ("check", "small")):
        done = flopbudget(project, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "stale baseline" not in done.stdout + done.stderr
    assert files(project) == sorted([*OWNED, "renamed_away.json"])


@pytest.mark.parametrize(
    "narrowing",
    [
        ["-k", "counted"],
        pytest.param(["-m", "not slow"], marks=pytest.mark.slow),
        pytest.param(["tests/test_a.py"], marks=pytest.mark.slow),
        ["tests/test_a.py::test_counted"],
        pytest.param(["--deselect", "tests/test_b.py::test_fails_first"], marks=pytest.mark.slow),
        pytest.param(["--ignore", "tests/test_b.py"], marks=pytest.mark.slow),
        pytest.param(["--lf"], marks=pytest.mark.slow),
        ["-x"],  # test_fails_first fails: the run stops early
    ],
    ids=["k", "m", "file", "node-id", "deselect", "ignore", "lf", "stopped"],
)
def test_a_narrowed_run_neither_lists_nor_removes(project: Path, narrowing: list[str]) -> None:
    done = pytest_in(project, *narrowing, "--flopbudget-update")  # an update would list and remove them
    assert "stale" not in done.stdout.replace(str(project), ""), done.stdout[-3000:]
    assert files(project) == sorted([*OWNED, "renamed_away.json"])


def test_a_collection_error_makes_the_run_unable_to_judge(project: Path) -> None:
    (project / "tests" / "test_c.py").write_text("import not_installed_anywhere\n")
    done = pytest_in(project, "--continue-on-collection-errors", "--flopbudget-update")
    assert "stale baseline" not in done.stdout and "renamed_away.json" in files(project)


def test_a_whole_run_lists_only_what_no_test_owns_and_its_update_removes_it(project: Path) -> None:
    # skipped tests, and a test that failed before it counted, still own their baselines
    done = pytest_in(project)
    assert done.returncode == 1, done.stdout[-3000:]  # test_fails_first
    assert STALE in done.stdout
    done = pytest_in(project, "--flopbudget-update")
    assert "1 stale removed" in done.stdout, done.stdout[-3000:]
    assert files(project) == OWNED


@pytest.mark.slow
def test_under_xdist_only_a_whole_run_judges(project: Path) -> None:
    pytest.importorskip("xdist")
    assert "stale baseline" not in pytest_in(project, "-n", "2", "-k", "counted").stdout
    done = pytest_in(project, "-n", "2")
    assert STALE in done.stdout, done.stdout[-3000:]
