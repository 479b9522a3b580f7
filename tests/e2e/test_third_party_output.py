"""An output from outside the package: a package installed with a `pytest_flopbudget.outputs` entry point adds
`--report KIND:PATH` to `flopbudget check` and to pytest's `--flopbudget-report`, as a user's `pip install` would
(tests/third_party.py builds and installs it into a fresh venv)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from e2e_helpers import clean_env

from tests.third_party import third_party_venv

pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # a venv and a pip install, then three front-end runs: about half a minute

OUTPUT = """\
from pytest_flopbudget.outputs import Findings, OutputContext


class CsvOutput:
    workspace_variables = ("GITHUB_WORKSPACE",)

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        rows = ["model,nodeid,flops,passed"]
        for verdict in findings.result.verdicts:
            rows.append(f"{verdict.name},{verdict.measurement.nodeid},{verdict.report.flops},{verdict.passed}")
        rows += [f"{error.name},unchecked" for error in findings.result.unchecked]
        with open(path, "w", encoding="utf-8") as file:
            file.write("\\n".join(rows) + "\\n")
"""

MODEL = """\
from torch import nn


def tiny():
    return nn.Linear(4, 2)
"""

PYPROJECT = """\
[tool.flopbudget.models.tiny]
target = "tiny_model:tiny"
inputs = [[1, 4]]
flops = "1k"
"""

EXPECTED = "model,nodeid,flops,passed\ntiny,pyproject.toml::tiny,18,True\n"


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return third_party_venv(
        tmp_path_factory.mktemp("third-party"),
        "flopbudget-csv",
        {"flopbudget_csv.py": OUTPUT},
        {"pytest_flopbudget.outputs": {"csv": "flopbudget_csv:CsvOutput", "broken": "flopbudget_csv:Missing"}},
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tiny_model.py").write_text(MODEL, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return tmp_path


def run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args], cwd=cwd, capture_output=True, text=True, env=clean_env(), check=False, timeout=300
    )


def test_flopbudget_check_writes_an_installed_output(python: Path, project: Path) -> None:
    done = run(python, project, "-m", "pytest_flopbudget", "check", "--no-cache", "--report", "csv:out/check.csv")
    assert done.returncode == 0, done.stderr
    assert (project / "out" / "check.csv").read_text(encoding="utf-8") == EXPECTED


def test_pytest_writes_an_installed_output(python: Path, project: Path) -> None:
    done = run(python, project, "-m", "pytest", "-p", "no:cacheprovider", "--flopbudget-report", "csv:pytest.csv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "pytest.csv").read_text(encoding="utf-8") == EXPECTED


def test_an_unknown_kind_lists_the_installed_ones_and_a_broken_one_is_named(python: Path, project: Path) -> None:
    done = run(python, project, "-m", "pytest_flopbudget", "check", "--report", "cvs:x.csv")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "flopbudget: error: unknown report 'cvs:x.csv'; expected github, gitlab:PATH, json:PATH, markdown:PATH, "
        "metrics:PATH, benchmark:PATH, bencher:PATH, comment:PATH, pictures:PATH, broken:PATH, csv:PATH, auto or "
        "none\n"
    )
    done = run(python, project, "-m", "pytest_flopbudget", "check", "--report", "broken:x.csv")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "flopbudget: error: the broken output (broken = flopbudget_csv:Missing in the pytest_flopbudget.outputs "
        "entry points) cannot be loaded: AttributeError: module 'flopbudget_csv' has no attribute 'Missing'\n"
    )
    assert not (project / "x.csv").exists()
