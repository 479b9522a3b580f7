"""pytest and `flopbudget check` are two front ends of one run: the same project gives byte-identical outputs.

The project has one model of each kind a report must get right: within budget, over budget, a target that does
not import, and one without a baseline. Both front ends run it with every output on (GitHub annotations and job
summary, GitLab Code Quality, JSON, Markdown, the history exports) in separate copies of the project, and every
output is compared.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import MODELS, clean_env

pytest.importorskip("torch")

PYPROJECT = """\
[tool.flopbudget.models.ok]
target = "models:small"
inputs = [[1, 8]]
macs = "1k"

[tool.flopbudget.models.over]
target = "models:wide"
inputs = [[1, 8]]
macs = "100"

[tool.flopbudget.models.broken]
target = "no_such_module:model"
inputs = [[1, 8]]
macs = "1k"

[tool.flopbudget.models.fresh]
target = "models:small"
inputs = [[2, 8]]
macs = "1k"
"""

OUTPUTS = (
    "r.json", "gl.json", "summary.md", "step-summary.md", "metrics.txt", "bench.json", "bmf.json", "pictures.html",
)  # fmt: skip


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "models.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    # baselines for ok, over and broken (not fresh): written by the CLI, then `fresh`'s baseline removed
    return root


def environment(root: Path) -> dict[str, str]:
    env = clean_env()
    env.update(
        GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(root), GITHUB_STEP_SUMMARY=str(root / "step-summary.md"),
        PYTHONDONTWRITEBYTECODE="1",
    )  # fmt: skip
    return env


REPORTS = [
    "json:r.json", "gitlab:gl.json", "markdown:summary.md", "metrics:metrics.txt", "benchmark:bench.json",
    "bencher:bmf.json", "pictures:pictures.html",
]  # fmt: skip


def run_cli(root: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "pytest_flopbudget", "check"]
    for spec in REPORTS:
        args += ["--report", spec]
    return subprocess.run(args, cwd=root, env=environment(root), capture_output=True, text=True, timeout=300)


def run_pytest(root: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "pyproject.toml"]
    for spec in REPORTS:
        args += [f"--flopbudget-report={spec}"]
    return subprocess.run(args, cwd=root, env=environment(root), capture_output=True, text=True, timeout=300)


def annotations(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("::")]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    base = make_project(tmp_path_factory.mktemp("parity") / "project")
    seeded = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", "--update", "ok", "over"],
        cwd=base, env={k: v for k, v in environment(base).items() if not k.startswith("GITHUB")},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    # `over` counts twice its baseline now, so it has a per-layer diff and a differential picture
    grown = PYPROJECT.replace('inputs = [[1, 8]]\nmacs = "100"', 'inputs = [[2, 8]]\nmacs = "100"')
    assert grown != PYPROJECT
    (base / "pyproject.toml").write_text(grown)
    results: dict[str, dict[str, str]] = {}
    for name, runner in (("cli", run_cli), ("pytest", run_pytest)):
        root = base.parent / name
        shutil.copytree(base, root)
        done = runner(root)
        files = {out: (root / out).read_text(encoding="utf-8") for out in OUTPUTS if (root / out).exists()}
        files["annotations"] = "\n".join(annotations(done.stdout))
        files["returncode"] = str(done.returncode)
        results[name] = files
    return results


@pytest.mark.slow
@pytest.mark.parametrize("output", [*OUTPUTS, "annotations"])
def test_both_front_ends_write_the_same(outputs: dict[str, dict[str, str]], output: str) -> None:
    cli, via_pytest = outputs["cli"], outputs["pytest"]
    assert output in cli and output in via_pytest
    assert cli[output] == via_pytest[output]


@pytest.mark.slow
def test_the_shared_outputs_say_what_happened(outputs: dict[str, dict[str, str]]) -> None:
    cli = outputs["cli"]
    results = json.loads(cli["r.json"])
    assert results["passed"] is False
    assert results["counts"]["unchecked"] == 1 and [u["name"] for u in results["unchecked"]] == ["broken"]
    assert {m["name"]: m["passed"] for m in results["models"]} == {"fresh": True, "ok": True, "over": False}
    assert "broken" in cli["annotations"] and "over" in cli["annotations"]
    # the history exports: one series per counted model and metric (the broken model has no figures)
    assert 'flopbudget_macs{model="over"}' in cli["metrics.txt"] and "broken" not in cli["metrics.txt"]
    assert sorted(json.loads(cli["bmf.json"])) == ["fresh", "ok", "over"]
    assert {e["name"] for e in json.loads(cli["bench.json"])} >= {"ok - MACs", "over - MACs", "fresh - MACs"}
    # the differential pictures: the one model whose count moved (ok did not, fresh has no baseline)
    assert re.findall(r"^<h2>(.*)</h2>$", cli["pictures.html"], flags=re.M) == ["over (FLOPs)"]
    # the CLI exits 2 (a model could not be checked), pytest 1 (tests failed): each front end's own convention
    assert (cli["returncode"], outputs["pytest"]["returncode"]) == ("2", "1")
