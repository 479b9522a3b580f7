"""The "Use it in your project" section of docs/getting-started.md (moved there from the README), done for real: a
new project, gated on its pull requests.

The commands are read from the section itself, so the page cannot drift from what works: its model
file is written, every line of its `sh` blocks runs with bash in a temporary git repository (the `pip install`
line excepted: this test runs in the current environment, which has the tool; the line is checked for the CPU
index instead), the table `flopbudget init` writes must be the section's `toml` block byte for byte, and the
pre-commit configuration is the section's `yaml` block. The CI job is the action's own scripts (`run_action_step`,
as in test_action.py) on a pull_request event with `origin/main` as the base, with `package: none` pointing the
install step at the tool already installed here. One pull request passes; one that widens the model (and rewrites
its baseline, skipping the hook that refused it) fails with an annotation on the budget's line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import clean_env, git, init_repo, run_action_step

yaml = pytest.importorskip("yaml")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_WORKFLOW = ROOT / "docs" / "examples" / "flopbudget-workflow.yml"


def readme_section() -> str:
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    start = text.index("## Use it in your project\n")
    return text[start : text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", readme_section(), flags=re.DOTALL)


def commands() -> list[str]:
    """Every command line of the section's sh blocks, in order."""
    return [line for block in blocks("sh") for line in block.splitlines() if line.strip()]


def environment(project: Path) -> dict[str, str]:
    return clean_env(
        PATH=f"{Path(sys.executable).parent}:{clean_env()['PATH']}",
        PRE_COMMIT_HOME=str(project.parent / "pre-commit-home"),
        COLUMNS="200",
    )


def sh(project: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=project, capture_output=True, text=True, env=environment(project), timeout=300
    )


def onboard(project: Path) -> dict[str, str]:
    """Steps 1-4 of the README in a new repository; returns what each command printed."""
    project.mkdir()
    init_repo(project)
    model = next(block for block in blocks("python") if block.startswith("# mypkg/model.py\n"))
    (project / "mypkg").mkdir()
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "model.py").write_text(model)
    git(project, "add", "mypkg")
    git(project, "commit", "-qm", "The model")  # the user's project exists before the README's steps
    hook = next(block for block in blocks("yaml") if block.startswith("# .pre-commit-config.yaml\n"))
    printed = {}
    for command in commands():
        if command.startswith("pip install"):
            assert '"pytest-flopbudget[torch]"' in command
            assert "--extra-index-url https://download.pytorch.org/whl/cpu" in command
            continue
        if command.startswith("pre-commit install"):
            (project / ".pre-commit-config.yaml").write_text(hook)
        done = sh(project, command)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        printed[command] = done.stdout + done.stderr
    return printed


def pull_request(project: Path, branch: str) -> None:
    """`origin/main` as a clone's remote-tracking ref would have it, and a feature branch off main."""
    git(project, "update-ref", "refs/remotes/origin/main", "main")
    git(project, "switch", "-q", "-c", branch)


def ci_job(project: Path) -> subprocess.CompletedProcess[str]:
    """The action's install step (pointed at the installed tool) and its check step, on a pull request into main."""
    install = run_action_step("Install", project, {"package": "none"})
    assert install.returncode == 0, install.stderr
    return run_action_step("Check", project, {"package": "none"}, event="pull_request", base_branch="main")


@pytest.mark.slow
def test_readme_steps_give_a_project_whose_pull_requests_pass(tmp_path: Path):
    project = tmp_path / "project"
    printed = onboard(project)
    count = next(out for command, out in printed.items() if command.startswith("flopbudget count"))
    assert "total: 11,237,082 FLOPs, 5,322,832 MACs, 618 params" in count
    assert "11,237,082 FLOPs, 5,322,832 MACs, 618 params" in readme_section()
    # what init wrote is the README's table, byte for byte
    table = next(block for block in blocks("toml") if block.startswith("[tool.flopbudget.models."))
    assert (project / "pyproject.toml").read_text().endswith("\n" + table)
    assert git(project, "status", "--porcelain") == "", "everything the steps made is committed"
    tracked = git(project, "ls-files").split()
    assert {"pyproject.toml", ".flopbudget/classifier.json", ".pre-commit-config.yaml"} <= set(tracked)

    # step 5: the README's workflow steps are the example workflow's
    readme_steps = yaml.safe_load(next(b for b in blocks("yaml") if "uses: actions/checkout@" in b))
    example_steps = yaml.safe_load(EXAMPLE_WORKFLOW.read_text())["jobs"]["flopbudget"]["steps"]
    assert [(s["uses"], s.get("with")) for s in readme_steps] == [(s["uses"], s.get("with")) for s in example_steps]

    pull_request(project, "docs")
    model = project / "mypkg" / "model.py"
    model.write_text('"""The image classifier."""\n' + model.read_text())
    done = sh(project, "git commit -qam 'Document the model'")  # the hook runs, and passes
    assert done.returncode == 0, done.stdout + done.stderr
    assert "flopbudget" in done.stdout + done.stderr
    job = ci_job(project)
    assert job.returncode == 0, job.stdout + job.stderr
    page = project.parent / "runner-temp" / "flopbudget-diff.html"
    assert job.stdout.startswith(f"+ flopbudget check --base-ref origin/main --report pictures:{page}\n")
    assert "::error" not in job.stdout
    assert not page.exists()  # no model changed: no differential picture to upload
    summary = (project.parent / "step-summary.md").read_text()
    assert "classifier" in summary


@pytest.mark.slow
def test_a_pull_request_that_grows_the_model_fails_the_job(tmp_path: Path):
    project = tmp_path / "project"
    onboard(project)
    pull_request(project, "wider")
    model = project / "mypkg" / "model.py"
    model.write_text(model.read_text().replace("nn.Conv2d(3, 16", "nn.Conv2d(3, 32").replace("Linear(16", "Linear(32"))
    blocked = sh(project, "git commit -qam 'Wider stem'")
    assert blocked.returncode != 0, "the pre-commit hook refuses the overrun"
    assert "classifier: " in blocked.stdout + blocked.stderr
    # the author rewrites the baseline and skips the hook: CI still judges against main's baseline and budget
    sh(project, "flopbudget check --update")
    done = sh(project, "git add -A && git commit -q --no-verify -m 'Wider stem, new baseline'")
    assert done.returncode == 0, done.stderr
    job = ci_job(project)
    assert job.returncode == 1, job.stdout + job.stderr
    line = next(n for n, text in enumerate((project / "pyproject.toml").read_text().splitlines(), 1) if "flops" in text)
    assert f"::error file=pyproject.toml,line={line}," in job.stdout
    summary = (project.parent / "step-summary.md").read_text()
    assert "1 of 1 model over budget" in summary
    assert "against origin/main:.flopbudget/classifier.json" in summary  # the base's baseline, not the rewritten one
