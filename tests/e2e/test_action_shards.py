"""The documented matrix workflow (docs/examples/flopbudget-matrix-workflow.yml, shown in docs/ci.md) run as GitHub
runs it: three shard jobs and their merge job, each the action's own steps with the `with:` the workflow gives it,
on a pull request of a project of 24 models, against a fake GitHub API on 127.0.0.1.

Each job has its own checkout and RUNNER_TEMP, as each job of a matrix has its own machine; what the upload and
download steps would move (`uses:` steps this runner does not run) is copied, by the artifact names the steps give.
The merged outputs (the JSON results, the job summary, the comment, the pictures page) must be the ones one job
writes on the same pull request, byte for byte, with one comment and one page. The job's token is handed to every
step as GitHub would (`${{ github.token }}` where a step's `env:` asks for it), and the project's models record the
environment of every process that imports them: the token is in none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import flopbudget, git, init_repo, run_action_step, step_outputs

yaml = pytest.importorskip("yaml")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
MATRIX_WORKFLOW = ROOT / "docs" / "examples" / "flopbudget-matrix-workflow.yml"
MODELS = 24
URL = "https://github.com/octo/models/actions/runs/7/artifacts/42"

#: 24 small MLPs of different widths and depths (so the shards' weights differ); the module records who imports it.
MODEL_SOURCE = """\
import json
import os

from torch import nn

if os.environ.get("ENV_LOG"):  # the test's spy: every process that imports the models, with its environment
    with open(os.path.join(os.environ["ENV_LOG"], f"{os.getpid()}.json"), "w", encoding="utf-8") as spy:
        json.dump(dict(os.environ), spy)

SHAPES = {SHAPES}


def mlp(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def __getattr__(name):  # models:m07 is mlp(*SHAPES["m07"])
    if name in SHAPES:
        return lambda: mlp(*SHAPES[name])
    raise AttributeError(name)
"""


def shapes(grown: bool) -> dict[str, list[int]]:
    found = {f"m{i:02d}": [4 + 4 * (i % 5), 1 + i % 4] for i in range(MODELS)}
    if grown:  # the pull request: one model over its budget, one grown within it
        found["m05"][1] += 1
        found["m11"][1] += 1
    return found


def make_project(root: Path) -> None:
    """A repository whose main has the 24 models and their baselines, on a branch that grows two of them."""
    root.mkdir()
    init_repo(root)
    (root / "models.py").write_text(MODEL_SOURCE.replace("{SHAPES}", repr(shapes(False))), encoding="utf-8")
    tables = [
        f'[tool.flopbudget.models.{name}]\ntarget = "models:{name}"\ninputs = [[1, {width}]]\nflops = "100k"\n'
        for name, (width, _) in shapes(False).items()
    ]
    (root / "pyproject.toml").write_text("[tool.flopbudget]\n\n" + "\n".join(tables), encoding="utf-8")
    done = flopbudget(root, "check", "--update")
    assert done.returncode == 0, done.stdout + done.stderr
    exact = json.loads((root / ".flopbudget" / "m05.json").read_text())["totals"]["flops"]
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    start = text.index("[tool.flopbudget.models.m05]")
    end = text.index("\n\n", start)
    (root / "pyproject.toml").write_text(text[:start] + text[start:end].replace('"100k"', str(exact)) + text[end:])
    (root / ".gitignore").write_text("__pycache__/\n.flopbudget_cache/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "24 models and their baselines")
    git(root, "update-ref", "refs/remotes/origin/main", "main")
    git(root, "switch", "-q", "-c", "grow")
    (root / "models.py").write_text(MODEL_SOURCE.replace("{SHAPES}", repr(shapes(True))), encoding="utf-8")
    git(root, "commit", "-qam", "m05 and m11 get a layer more")


def jobs() -> dict[str, Any]:
    return yaml.safe_load(MATRIX_WORKFLOW.read_text(encoding="utf-8"))["jobs"]


def action_inputs(job: dict[str, Any], **matrix: str) -> dict[str, str]:
    """The `with:` of the job's step that uses the action, with `${{ matrix.* }}` filled in, pointed at the tool
    installed here (`package: none`, no install, no Python set-up), as test_onboarding does."""
    (step,) = [step for step in job["steps"] if step.get("uses", "").startswith("OWNER/pytest-flopbudget@")]
    inputs = {}
    for key, value in step["with"].items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        for name, filled in matrix.items():
            text = text.replace(f"${{{{ matrix.{name} }}}}", filled)
        assert "${{" not in text, text
        inputs[key] = text
    return {**inputs, "package": "none", "install": "", "python-version": ""}


def checkout(template: Path, job: Path) -> Path:
    """The job's own machine: a copy of the repository, and a RUNNER_TEMP of its own beside it."""
    shutil.copytree(template, job / "project", ignore=shutil.ignore_patterns("__pycache__"))
    return job / "project"


class Runner:
    """Runs the action's steps of one job in order, as the runner does: the job's token to each step whose env:
    asks for it, step outputs recorded by id, GITHUB_ENV-free."""

    def __init__(self, project: Path, inputs: dict[str, str], env: dict[str, str]) -> None:
        self.project = project
        self.inputs = inputs
        self.env = env
        self.outputs: dict[str, dict[str, str]] = {}

    def step(self, name: str, step_id: str | None = None) -> Any:
        done = run_action_step(name, self.project, self.inputs, steps=self.outputs, **self.env)
        if step_id is not None:
            self.outputs[step_id] = step_outputs(self.project)
        return done


def one_job(
    project: Path, inputs: dict[str, str], env: dict[str, str], artifacts: Path | None = None
) -> tuple[Runner, Any]:
    """Install, then the check step (a shard's check, the merge, or one job's check), then the pictures and the
    comment; a shard's results are "uploaded" to `artifacts`."""
    runner = Runner(project, inputs, env)
    install = runner.step("Install", "install")
    assert install.returncode == 0, install.stdout + install.stderr
    check = runner.step("Check compute budgets", "check")
    assert runner.step("Check compute budgets in tests").returncode == 0
    artifact = runner.outputs["check"].get("artifact")
    if artifact:  # the upload step: the results folder as the artifact of that name
        assert artifacts is not None
        shutil.copytree(runner.outputs["check"]["results"], artifacts / artifact)
    assert runner.step("Find the differential pictures", "pictures").returncode == 0
    if runner.outputs["pictures"].get("path"):  # the upload step, uploading the page, gives its url
        runner.outputs["upload"] = {"artifact-url": URL}
    assert runner.step("Link the differential pictures", "link").returncode == 0
    assert runner.step("Comment on the pull request").returncode == 0
    return runner, check


@pytest.mark.slow
def test_the_documented_matrix_merges_to_what_one_job_writes(tmp_path: Path) -> None:
    from fake_github import TOKEN, FakeGitHub, pull_request_env, serving

    template = tmp_path / "template"
    make_project(template)
    spy = tmp_path / "imports"
    spy.mkdir()
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7}}', encoding="utf-8")
    workflow = jobs()
    assert workflow["shards"]["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert workflow["merge"]["needs"] == "shards" and workflow["merge"]["if"] == "${{ !cancelled() }}"

    def env(url: str, job: Path) -> dict[str, str]:
        # the token is no step's unless its env: asks for it (the runner's own `token=`, see run_action_step)
        base = pull_request_env(str(event), url, ENV_LOG=str(spy))
        base.pop("GITHUB_TOKEN")
        return {**base, "token": TOKEN}

    # one job on the pull request: what the merge must reproduce (its check also writes the JSON results)
    whole_api, merged_api = FakeGitHub(), FakeGitHub()
    whole = checkout(template, tmp_path / "whole")
    with serving(whole_api) as url:
        inputs = {**action_inputs(workflow["merge"]), "merge": "false"}
        inputs["args"] = f"--report json:{tmp_path / 'whole.json'}"
        _, whole_check = one_job(whole, inputs, env(url, whole))
    assert whole_check.returncode == 1, whole_check.stdout + whole_check.stderr  # m05 is over its budget

    # the matrix: three shards, then the merge job
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    parts = []
    for shard in ("1", "2", "3"):
        job = tmp_path / f"shard-{shard}"
        project = checkout(template, job)
        inputs = action_inputs(workflow["shards"], shard=shard)
        runner, check = one_job(project, inputs, env("http://127.0.0.1:9", job), artifacts)
        assert check.returncode in (0, 1), check.stdout + check.stderr
        assert f"--shard {shard}/3" in check.stdout
        assert "::error" not in check.stdout and (job / "step-summary.md").read_text() == ""  # the merge's to say
        assert not (job / "runner-temp" / "flopbudget-diff.html").exists()  # one pictures page: the merge's
        assert runner.outputs["check"]["artifact"] == f"flopbudget-shard-{shard}-of-3"
        parts.append(json.loads((artifacts / f"flopbudget-shard-{shard}-of-3" / "check.json").read_text())["shard"])
    assert sorted(nodeid for part in parts for nodeid in part["part"]) == sorted(
        f"pyproject.toml::m{i:02d}" for i in range(MODELS)
    )
    assert [len(part["part"]) for part in parts] == [8, 8, 8]  # 24 models of like weight: 8 each

    merge_job = tmp_path / "merge"
    project = checkout(template, merge_job)
    shutil.copytree(artifacts, merge_job / "runner-temp" / "flopbudget-shards")  # the download step
    with serving(merged_api) as url:
        inputs = action_inputs(workflow["merge"])
        inputs["args"] = f"--report json:{tmp_path / 'merged.json'}"
        _, merged_check = one_job(project, inputs, env(url, merge_job))
    assert merged_check.returncode == 1, merged_check.stdout + merged_check.stderr
    assert merged_check.stdout.startswith("+ flopbudget merge ")

    # one run: the same results, summary, comment and page as one job's
    assert (tmp_path / "merged.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
    whole_summary = (tmp_path / "whole" / "step-summary.md").read_text(encoding="utf-8")
    assert "m05" in whole_summary and "Differential pictures of the 2 changed models" in whole_summary
    assert (merge_job / "step-summary.md").read_text(encoding="utf-8") == whole_summary
    page = (merge_job / "runner-temp" / "flopbudget-diff.html").read_text(encoding="utf-8")
    assert page == (tmp_path / "whole" / "runner-temp" / "flopbudget-diff.html").read_text(encoding="utf-8")
    ours = [comment for comment in merged_api.comments if comment["id"] >= 100]
    assert len(ours) == 1 and ours == [c for c in whole_api.comments if c["id"] >= 100]
    annotations = [line for line in merged_check.stdout.splitlines() if line.startswith("::error")]
    assert annotations == [line for line in whole_check.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == 1 and "m05" in annotations[0]

    # the token never reached a process that imported the models: 1 check and 3 shards did, the merge did not
    seen = [json.loads(path.read_text()) for path in spy.iterdir()]
    assert len(seen) >= 4
    assert not [environment for environment in seen if TOKEN in json.dumps(environment)]
    assert not [
        environment
        for environment in seen
        if str(merge_job) in environment.get("PWD", "") + environment.get("GITHUB_WORKSPACE", "")
    ]


def test_ci_md_shows_the_matrix_workflow_this_file_runs() -> None:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    section = text[text.index("### GitHub Actions: the matrix and its merge job") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", section.index("```yaml"))]
    assert block == MATRIX_WORKFLOW.read_text(encoding="utf-8")
