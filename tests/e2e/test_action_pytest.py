"""The one path that gates both kinds of budget (docs/getting-started.md), done for real: the action with
`pytest: true`.

A project with a model in pyproject.toml and a budget in a test (`@pytest.mark.flop_budget`), in a real git
repository, its baselines recorded with `pytest --flopbudget-update` as the README says. The CI job is the action's
own scripts (`run_action_step`, as in test_action.py) on a pull request into main, with the inputs of the README's
"Budgets in tests too?" block: the check step runs the real `flopbudget check`, the pytest step the real pytest.
A pull request that leaves the models alone passes both; one that widens the test's model and rewrites its baseline
(which would pass a plain `pytest` on the branch) fails the pytest step, with an annotation on the decorator's line
and a job summary against the base's baseline, while the pyproject step stays green. With `comment: true` too, the
comment step posts one comment (to a fake GitHub API) holding both runs' summaries.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import MODELS, ProjectTemplate, clean_env, git, init_repo, run_action_step
from fake_github import TOKEN, FakeGitHub, pull_request_env, serving

from pytest_flopbudget._reporters.pr_comment import MARKER

yaml = pytest.importorskip("yaml")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = '[tool.flopbudget.models.small]\ntarget = "models:small"\ninputs = [[1, 8]]\nmacs = "1k"\n'

TEST_BUDGETS = """\
import pytest
import torch
from torch import nn

WIDTH = 2


@pytest.mark.flop_budget(macs="100", max_increase="5%")
def test_head(flopbudget):
    flopbudget.count(nn.Linear(8, WIDTH), torch.zeros(1, 8))
"""
DECORATOR_LINE = 8


def readme_inputs() -> dict[str, str]:
    """The `with:` of docs/getting-started.md's block that gates both kinds, as GitHub passes inputs (YAML `true`
    is "true")."""
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")  # moved there from the README
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL) if "pytest: true" in b)
    (step,) = yaml.safe_load(block)
    return {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in step["with"].items()}


def pytest_update(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--flopbudget-update"],
        cwd=project, capture_output=True, text=True, env=clean_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def build_project(root: Path) -> None:
    """The project on main with both baselines committed, and a pull request branch off it."""
    (root / "tests").mkdir(parents=True)
    (root / "models.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests" / "test_budgets.py").write_text(TEST_BUDGETS)
    init_repo(root)
    pytest_update(root)  # the README: `pytest --flopbudget-update` records the baselines of both kinds
    assert sorted(p.name for p in (root / ".flopbudget").iterdir()) == [
        "small.json",
        "tests.test_budgets.test_head.json",
    ]
    (root / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n.flopbudget_cache/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "Models, budgets and baselines")
    git(root, "update-ref", "refs/remotes/origin/main", "main")
    git(root, "switch", "-q", "-c", "change")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> ProjectTemplate:
    return ProjectTemplate(tmp_path_factory.mktemp("action-pytest-template"), build_project)


@pytest.fixture
def project(template: ProjectTemplate, tmp_path: Path) -> Path:
    return template.copy_to(tmp_path / "project")


def ci_job(project: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The check step and the pytest step, with the README's inputs and the tool already installed here."""
    inputs = {**readme_inputs(), "package": "none", "install": "", "python-version": ""}
    assert inputs["pytest"] == "true"
    check = run_action_step("Check compute budgets", project, inputs)
    tests = run_action_step("Check compute budgets in tests", project, inputs)
    return check, tests


@pytest.mark.slow
def test_a_pull_request_that_leaves_the_models_alone_passes_both_steps(project: Path) -> None:
    test_file = project / "tests" / "test_budgets.py"
    test_file.write_text('"""Budgets."""\n' + test_file.read_text())
    git(project, "commit", "-qam", "Document the budgets")
    check, tests = ci_job(project)
    assert check.returncode == 0, check.stdout + check.stderr
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert tests.stdout.startswith("+ python -m pytest --flopbudget-no-models --flopbudget-base-ref=origin/main\n")
    assert "::error" not in check.stdout + tests.stdout
    # nothing to say about what cannot be judged
    assert "stale baseline" not in check.stdout + check.stderr + tests.stdout


@pytest.mark.slow
def test_a_pull_request_that_grows_a_budget_in_a_test_fails_the_pytest_step(project: Path) -> None:
    test_file = project / "tests" / "test_budgets.py"
    test_file.write_text(test_file.read_text().replace("WIDTH = 2", "WIDTH = 3"))
    pytest_update(project)  # the author rewrites the baseline too: CI still compares with main's
    git(project, "commit", "-qam", "Wider head, new baseline")
    check, tests = ci_job(project)
    assert check.returncode == 0, check.stdout + check.stderr  # the pyproject model did not change
    assert tests.returncode == 1, tests.stdout[-3000:] + tests.stderr[-3000:]
    # 8*3 = 24 MACs against main's 8*2 = 16: +50%, more than max-increase 5%, on the decorator's line
    assert f"::error file=tests/test_budgets.py,line={DECORATOR_LINE}," in tests.stdout
    assert "24 MACs is +50.0%25 over baseline 16 MACs, more than max-increase 5%25" in tests.stdout
    summary = (project.parent / "step-summary.md").read_text()
    assert "against origin/main:.flopbudget/tests.test_budgets.test_head.json" in summary


@pytest.mark.slow
def test_the_comment_holds_the_pyproject_models_and_the_budgets_in_tests(project: Path, tmp_path: Path) -> None:
    """`comment: true` with `pytest: true`: both runs write a body and the comment step posts one comment with
    both, each under the heading of its run."""
    (project / "models.py").write_text(MODELS.replace("nn.Linear(8, 2)", "nn.Linear(8, 4)"))  # inside its 1k
    test_file = project / "tests" / "test_budgets.py"
    test_file.write_text(test_file.read_text().replace("WIDTH = 2", "WIDTH = 3"))  # past its max-increase
    pytest_update(project)
    git(project, "commit", "-qam", "Wider models, new baselines")
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}), encoding="utf-8")
    inputs = {**readme_inputs(), "package": "none", "install": "", "python-version": "", "comment": "true"}
    check = run_action_step("Check compute budgets", project, inputs, RUNNER_TEMP=str(runner_temp))
    tests = run_action_step("Check compute budgets in tests", project, inputs, RUNNER_TEMP=str(runner_temp))
    assert check.returncode == 0, check.stdout + check.stderr
    assert tests.returncode == 1, tests.stdout[-3000:] + tests.stderr[-3000:]
    fake = FakeGitHub()
    with serving(fake) as url:
        env = pull_request_env(str(event), url, RUNNER_TEMP=str(runner_temp))
        done = run_action_step("Comment on the pull request", project, inputs, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert TOKEN not in done.stdout + done.stderr and "::notice" not in done.stdout
    assert [method for method, _, _ in fake.requests] == ["GET", "POST"]  # one comment for both runs
    (comment,) = [c["body"] for c in fake.comments if c["body"].startswith(MARKER)]
    assert comment.count(MARKER) == 1
    head, check_part, pytest_part = re.split(r"^## .+\n\n", comment, flags=re.MULTILINE)
    assert head == f"{MARKER}\n"
    assert "\n## pyproject models (flopbudget check)\n\n### flopbudget: ✅ 1 model within budget" in comment
    assert "\n## budgets in tests (pytest)\n\n### flopbudget: ❌ 1 of 1 model over budget" in comment
    # the pyproject model grew inside its budget: its rows and, folded, where (16 -> 32 MACs)
    assert "| small | FLOPs |" in check_part and "| MACs | 1.00k | 16 | 32 | +16 (+100.0%) |" in check_part
    assert "<summary>⚠️ small: 34 FLOPs -&gt; 68 FLOPs (+100.0%)" in check_part
    assert "test_head" not in check_part
    # the test's model grew past its max-increase: its row and its per-layer diff against main's baseline
    assert "| ❌ | tests.test\\_budgets.test\\_head | FLOPs |" in pytest_part and "small" not in pytest_part
    assert "more than max-increase 5%" in pytest_part and "against origin/main:" in pytest_part
