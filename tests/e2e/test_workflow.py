"""The shipped GitHub files, checked offline by the real tools: check-jsonschema and zizmor.

Five files: this repository's workflow, its release workflow (`release.yml`), the composite action (`action.yml`)
and the workflows users copy (`docs/examples/flopbudget-workflow.yml`, and `flopbudget-matrix-workflow.yml` for a
matrix of shards and its merge job). `check-jsonschema --builtin-schema
vendor.github-workflows` (or `vendor.github-actions`) validates each against the published schema (bundled with
the tool, no network).
`zizmor --offline` audits them for security problems: unpinned actions, credentials persisted by checkout,
template injection, excessive permissions. A deliberately broken copy must produce findings, so a tool that
silently audits nothing cannot make this test pass. The action's scripts are run for real in test_action.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "flopbudget.yml"
ACTION = ROOT / "action.yml"
EXAMPLE = ROOT / "docs" / "examples" / "flopbudget-workflow.yml"
MATRIX = ROOT / "docs" / "examples" / "flopbudget-matrix-workflow.yml"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
INSTALLED = "${{ !cancelled() && steps.install.outcome == 'success' }}"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def tool(name: str) -> str:
    """The tool installed next to this Python (the venv), else on PATH; skip when the dev extra is missing."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def zizmor_findings(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [tool("zizmor"), "--offline", "--min-severity", "medium", "--format", "json", "--no-progress", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip(), f"zizmor printed nothing (exit {done.returncode}): {done.stderr}"
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        (WORKFLOW, "vendor.github-workflows"),
        (EXAMPLE, "vendor.github-workflows"),
        (MATRIX, "vendor.github-workflows"),
        (ACTION, "vendor.github-actions"),
        (RELEASE, "vendor.github-workflows"),
    ],
    ids=["workflow", "example", "matrix", "action", "release"],
)
def test_schema_is_valid(path: Path, schema: str) -> None:
    done = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", schema, str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


@pytest.mark.parametrize(
    "path", [WORKFLOW, EXAMPLE, MATRIX, ACTION, RELEASE], ids=["workflow", "example", "matrix", "action", "release"]
)
def test_zizmor_finds_nothing_of_medium_severity_or_above(path: Path) -> None:
    findings = zizmor_findings(path)
    assert findings == [], json.dumps(findings, indent=2)


def test_zizmor_does_flag_a_broken_copy(tmp_path: Path) -> None:
    broken = WORKFLOW.read_text(encoding="utf-8")
    broken = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v4", broken)
    broken = broken.replace("run: python -m pytest", "run: echo ${{ github.head_ref }} && python -m pytest")
    path = tmp_path / ".github" / "workflows" / "broken.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken, encoding="utf-8")
    rules = {finding["ident"] for finding in zizmor_findings(path)}
    assert {"unpinned-uses", "template-injection"} <= rules


def test_zizmor_does_flag_a_broken_action(tmp_path: Path) -> None:
    broken = ACTION.read_text(encoding="utf-8")
    broken = re.sub(r"actions/setup-python@[0-9a-f]{40}", "actions/setup-python@v5", broken)
    assert '<<< "${ARGS}"' in broken
    broken = broken.replace('<<< "${ARGS}"', '<<< "${{ inputs.args }}"')  # an input expanded into the script
    path = tmp_path / "action.yml"
    path.write_text(broken, encoding="utf-8")
    rules = {finding["ident"] for finding in zizmor_findings(path)}
    assert {"unpinned-uses", "template-injection"} <= rules


def pins(path: Path) -> list[str]:
    """Every `uses:` line must pin a full commit SHA with the version in a comment (a local `./` action aside)."""
    refs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\s*(?:- )?uses: (\S+)", line)
        if match and match.group(1) != "./":
            refs.append(match.group(1))
            assert SHA_PIN.match(match.group(1)), f"not pinned by SHA: {line}"
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"pin without a version comment: {line}"
    return refs


def steps_of(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "runs" in data:
        return list(data["runs"]["steps"])
    return [step for job in data["jobs"].values() for step in job["steps"]]


def test_workflow_follows_the_documented_practice() -> None:
    """What the issues ask for, read from the file: pins, permissions, checkout, CPU torch, the budget step."""
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert data["permissions"] == {"contents": "read"}
    steps = steps_of(WORKFLOW)
    assert len(pins(WORKFLOW)) == 2
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
    assert any(step.get("uses", "").startswith("actions/setup-python@") for step in steps)
    runs = [step["run"] for step in steps if "run" in step]
    assert not any("${{" in run for run in runs), "expressions belong in env:, not in run: (template injection)"
    install = next(step for step in steps if step.get("id") == "install")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in install["run"]
    assert any("pytest" in run for run in runs)
    budgets = next(step for step in steps if step.get("uses") == "./")  # this repository's action
    # after failed tests, never after a failed install
    assert budgets["if"] == "${{ !cancelled() && steps.install.outcome == 'success' }}"
    assert budgets["with"] == {"python-version": "", "package": "none"}
    assert all("cancelled()" not in str(step.get("if", "")) or "steps.install" in step["if"] for step in steps)


def test_example_workflow_uses_the_action_with_least_privilege() -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert data["permissions"] == {"contents": "read"}
    assert set(data[True]) == {"pull_request", "push"}  # YAML 1.1 reads the key `on` as true
    steps = steps_of(EXAMPLE)
    refs = pins(EXAMPLE)
    assert [ref.split("@")[0] for ref in refs] == ["actions/checkout", "OWNER/pytest-flopbudget"]
    assert steps[0]["with"] == {"fetch-depth": 0, "persist-credentials": False}
    assert set(steps[1]["with"]) <= set(yaml.safe_load(ACTION.read_text(encoding="utf-8"))["inputs"])


def test_action_scripts_take_inputs_through_env_only() -> None:
    steps = steps_of(ACTION)
    assert [ref.split("@")[0] for ref in pins(ACTION)] == [
        "actions/setup-python", "actions/download-artifact", "actions/upload-artifact", "actions/upload-artifact",
    ]  # fmt: skip
    for step in steps:
        if "run" in step:
            assert step["shell"] == "bash"
            assert "${{" not in step["run"], step["name"]
            assert "continue-on-error" not in step, step["name"]
            # a failed install must stop the job: a step may run after a failed step only after a good install
            assert step.get("if", INSTALLED) == INSTALLED, step["name"]
            assert step["run"].startswith("set -euo pipefail\n")
    install = next(step for step in steps if step["name"].startswith("Install"))
    assert install["id"] == "install" and "if" not in install


def test_action_uploads_the_differential_pictures_as_one_unzipped_file_without_the_token() -> None:
    """The page `pictures:PATH` wrote is uploaded only when the step before found it, as the file itself (the link
    opens the page), never failing the job; upload-artifact uses the runner's own artifact token, not the job's."""
    steps = {step.get("id"): step for step in steps_of(ACTION)}
    upload = steps["upload"]
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["if"] == "${{ !cancelled() && steps.pictures.outputs.path != '' }}"
    assert upload["with"] == {
        "path": "${{ steps.pictures.outputs.path }}", "archive": False, "if-no-files-found": "ignore"
    }  # fmt: skip
    assert upload["continue-on-error"] is True and "env" not in upload
    names = [step["name"] for step in steps_of(ACTION)]
    order = ["Check compute budgets", "Find the differential pictures", "Upload the differential pictures",
             "Link the differential pictures", "Comment on the pull request"]  # fmt: skip
    assert [name for name in names if name in order] == order  # the link reaches the comment before it is posted
    with_token = [step["name"] for step in steps_of(ACTION) if "github.token" in str(step)]
    assert with_token == ["Comment on the pull request"]


def test_matrix_example_shards_with_least_privilege_and_merges_once() -> None:
    """N shard jobs that only read, and one merge job after them (after a failed shard too) that alone may write
    the comment; every input it gives the action is one the action has."""
    data = yaml.safe_load(MATRIX.read_text(encoding="utf-8"))
    assert data["permissions"] == {"contents": "read"}
    shards, merge = data["jobs"]["shards"], data["jobs"]["merge"]
    assert "permissions" not in shards and shards["strategy"]["fail-fast"] is False
    assert merge["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert merge["needs"] == "shards" and merge["if"] == "${{ !cancelled() }}"
    inputs = set(yaml.safe_load(ACTION.read_text(encoding="utf-8"))["inputs"])
    for job in (shards, merge):
        checkout, action = job["steps"]
        assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["persist-credentials"] is False
        assert action["uses"].startswith("OWNER/pytest-flopbudget@") and set(action["with"]) <= inputs
    total = len(shards["strategy"]["matrix"]["shard"])
    assert shards["steps"][1]["with"]["shard"] == f"${{{{ matrix.shard }}}}/{total}"
    assert merge["steps"][1]["with"]["merge"] is True and "install" not in merge["steps"][1]["with"]
    assert [ref.split("@")[0] for ref in pins(MATRIX)] == ["actions/checkout", "OWNER/pytest-flopbudget"] * 2


def test_action_moves_a_shards_results_to_the_merge_job_without_the_token() -> None:
    """A shard uploads its results folder under its own artifact name, after a failed check too; the merge job
    downloads every shard's (and only when it is the merge job)."""
    steps = {step.get("name"): step for step in steps_of(ACTION)}
    upload = steps["Upload this shard's results"]
    assert upload["if"] == "${{ !cancelled() && steps.check.outputs.artifact != '' }}"
    assert upload["with"] == {
        "name": "${{ steps.check.outputs.artifact }}", "path": "${{ steps.check.outputs.results }}",
        "if-no-files-found": "error",
    }  # fmt: skip
    download = steps["Download the shards' results"]
    assert download["if"] == "${{ inputs.merge == 'true' }}"
    assert download["with"] == {"pattern": "flopbudget-shard-*", "path": "${{ runner.temp }}/flopbudget-shards"}
    names = list(steps)
    assert names.index("Download the shards' results") < names.index("Check compute budgets")
    assert names.index("Check compute budgets in tests with pytest") < names.index("Upload this shard's results")
    assert "github.token" not in str(upload) + str(download)


# -- the release workflow ---------------------------------------------------------------------------------------------


def github_filter(pattern: str) -> re.Pattern[str]:
    """A GitHub Actions branch/tag filter as a regex: `*` any characters but `/`, `+` one or more of the previous
    character or class, `[...]` a class, `.` itself (the only metacharacters release.yml uses)."""
    return re.compile(pattern.replace(".", r"\.").replace("*", "[^/]*"))


def test_release_runs_on_release_tags_only_and_builds_on_every_change() -> None:
    data = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    triggers = data[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"pull_request", "push"} and triggers["push"]["branches"] == ["main"]
    (tags,) = triggers["push"]["tags"]
    for tag in ("v0.1.0", "v1.0.0", "v1.10.2", "v2.0.0rc1"):
        assert github_filter(tags).fullmatch(tag), tag
    for tag in ("v1", "v1.0", "1.0.0", "latest"):  # `v1` is the moving tag `uses: OWNER/pytest-flopbudget@v1` reads
        assert not github_filter(tags).fullmatch(tag), tag


def test_release_publishes_with_trusted_publishing_and_least_privilege() -> None:
    data = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    assert data["permissions"] == {}
    jobs = data["jobs"]
    assert set(jobs) == {"build", "publish"}
    assert jobs["build"]["permissions"] == {"contents": "read"}
    publish = jobs["publish"]
    # only the publish job can ask for the identity token, only on a tag, only after the build job checked
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["needs"] == "build"
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["environment"]["name"] == "pypi"
    assert [step["uses"].split("@")[0] for step in publish["steps"]] == [
        "actions/download-artifact",
        "pypa/gh-action-pypi-publish",
    ]
    assert "with" not in publish["steps"][-1], "trusted publishing: no password, no token"
    assert not any("run" in step for step in publish["steps"]), "the publish job runs no project code"
    assert len(pins(RELEASE)) == 5
    steps = steps_of(RELEASE)
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"] == {"persist-credentials": False}
    runs = [step["run"] for step in steps if "run" in step]
    assert not any("${{" in run for run in runs), "expressions belong in env:, not in run: (template injection)"
    build = "\n".join(runs)
    assert "python -m build\n" in build and "python -m twine check --strict dist/*" in build
    upload = next(step for step in jobs["build"]["steps"] if step.get("uses", "").startswith("actions/upload-"))
    download = publish["steps"][0]
    assert upload["with"]["name"] == download["with"]["name"] and upload["with"]["path"] == download["with"]["path"]


def version_check(tag: str) -> subprocess.CompletedProcess[str]:
    """The release workflow's tag check, run as the runner would (bash, in the checkout, TAG from github.ref_name)."""
    steps = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))["jobs"]["build"]["steps"]
    step = next(step for step in steps if step.get("id") == "version")
    assert step["if"] == "startsWith(github.ref, 'refs/tags/')"
    assert step["env"] == {"TAG": "${{ github.ref_name }}"}
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TAG": tag}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_release_accepts_the_tag_of_the_package_version() -> None:
    from pytest_flopbudget._version import __version__

    done = version_check(f"v{__version__}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"releasing v{__version__}\n"


@pytest.mark.parametrize("tag", ["v99.0.0", "v0.1", "0.1.0"])
def test_release_refuses_a_tag_that_is_not_the_package_version_in_one_line(tag: str) -> None:
    from pytest_flopbudget._version import __version__

    done = version_check(tag)
    assert done.returncode == 1
    assert done.stderr == ""
    assert done.stdout == (
        f"::error title=release::tag {tag} does not match the package version {__version__} in "
        f"pytest_flopbudget/_version.py: tag v{__version__}, or change the version first\n"
    )


def test_zizmor_does_flag_a_broken_release(tmp_path: Path) -> None:
    broken = RELEASE.read_text(encoding="utf-8")
    assert broken.count("persist-credentials: false") == 1 and 'echo "releasing ${TAG}"' in broken
    broken = broken.replace("persist-credentials: false", "fetch-depth: 0")  # the token left in .git/config
    broken = broken.replace('echo "releasing ${TAG}"', 'echo "releasing ${{ github.ref_name }}"')
    path = tmp_path / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken, encoding="utf-8")
    rules = {finding["ident"] for finding in zizmor_findings(path)}
    assert {"artipacked", "template-injection"} <= rules


def test_readme_uses_the_action_by_the_major_tag_of_the_release_it_names() -> None:
    """`uses: OWNER/pytest-flopbudget@v1` with inputs the action has; `v1` is the major of the hook's `rev: v1.x.y`."""
    readme = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")  # moved there from the README
    section = readme[readme.index("## Releases, by tag\n") :]
    yamls = re.findall(r"```yaml\n(.*?)```", section[: section.index("\n## ")], flags=re.DOTALL)
    (step,) = yaml.safe_load(next(block for block in yamls if "uses: OWNER/pytest-flopbudget@" in block))
    major = re.fullmatch(r"OWNER/pytest-flopbudget@(v\d+)", step["uses"])
    assert major, step["uses"]
    assert set(step["with"]) <= set(yaml.safe_load(ACTION.read_text(encoding="utf-8"))["inputs"])
    (repo,) = yaml.safe_load(next(block for block in yamls if "rev: " in block))["repos"]
    assert repo["rev"].startswith(major.group(1) + ".")
    assert not github_filter(yaml.safe_load(RELEASE.read_text(encoding="utf-8"))[True]["push"]["tags"][0]).fullmatch(
        major.group(1)
    ), "moving the major tag must not start a release"
