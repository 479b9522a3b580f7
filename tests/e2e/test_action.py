"""The composite action's scripts (action.yml), run locally with bash as a GitHub runner runs them.

`run_action_step` gives each script the environment GitHub would: the step's `env:` with the inputs filled in
(defaults from action.yml), GITHUB_EVENT_NAME, GITHUB_BASE_REF on pull requests, GITHUB_ACTION_PATH. What a test
does not run for real is pip: a stand-in `python` on PATH records the command line the install step would run
(no network, no change to this environment), and `package: none` with an empty `install` is how a workflow that
installed the tool itself skips pip, which is also how the onboarding test points the action at the
already-installed tool. The check step runs the real `flopbudget` in tests/e2e/test_onboarding.py; here a
stand-in records the arguments it gets for each event.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest
from e2e_helpers import ACTION, run_action_step, step_outputs

from pytest_flopbudget._reporters.pr_comment import LEGACY_MARKER, MARKER
from pytest_flopbudget._version import __version__

pytest.importorskip("yaml")

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def stand_in(folder: Path, name: str, exit_code: int = 0, output: str = "") -> Path:
    """An executable `name` in `folder` that appends its arguments (one per line, then `--`) to `name.args`."""
    folder.mkdir(exist_ok=True)
    record = folder / f"{name}.args"
    script = folder / name
    script.write_text(
        "#!/bin/sh\n"
        f'for arg in "$@"; do printf "%s\\n" "$arg" >> "{record}"; done\n'
        f'echo -- >> "{record}"\n'
        f"printf '%s' '{output}'\n"
        f"exit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return record


def calls(record: Path) -> list[list[str]]:
    if not record.exists():
        return []
    text = record.read_text()
    return [chunk.strip("\n").split("\n") if chunk.strip("\n") else [] for chunk in text.split("--\n")[:-1]]


def pictures(tmp_path: Path, runner_temp: str = "runner-temp") -> list[str]:
    """The check's `--report` for the differential pictures (`pictures: true`, the default), in RUNNER_TEMP."""
    return ["--report", f"pictures:{tmp_path / runner_temp / 'flopbudget-diff.html'}"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


# -- install -------------------------------------------------------------------------------------------------------


def test_install_defaults_take_this_action_with_torch_from_the_cpu_index(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    pip = stand_in(bin_dir, "python")
    stand_in(bin_dir, "flopbudget", output="flopbudget 0.1.0")
    done = run_action_step("Install", project, {"install": "-e . torch==2.13.0"}, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    assert calls(pip) == [
        ["-m", "pip", "install", "--extra-index-url", CPU_INDEX, f"{ACTION.parent}[torch]", "-e", ".", "torch==2.13.0"]
    ]
    assert calls(bin_dir / "flopbudget.args") == [["--version"]]
    # the trace line is shell-quoted (`printf %q`), as one would paste it
    assert f"+ python -m pip install --extra-index-url {CPU_INDEX} {ACTION.parent}\\[torch\\] -e . torch==2.13.0" in (
        done.stdout
    )


def test_install_with_a_named_package_and_no_torch_index(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    pip = stand_in(bin_dir, "python")
    stand_in(bin_dir, "flopbudget")
    inputs = {"package": "pytest-flopbudget[onnx]==0.1.0", "extras": "ignored", "torch-index-url": ""}
    done = run_action_step("Install", project, inputs, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    assert calls(pip) == [["-m", "pip", "install", "pytest-flopbudget[onnx]==0.1.0"]]


def test_package_none_and_no_install_skip_pip_and_find_the_installed_tool(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    pip = stand_in(bin_dir, "python")  # would record a pip call; the real flopbudget comes from this venv
    done = run_action_step("Install", project, {"package": "none"}, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    assert calls(pip) == []
    assert done.stdout == f"flopbudget {__version__} (pytest-flopbudget)\n"


def test_a_failed_install_fails_the_step(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "python", exit_code=1)
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step("Install", project, {"install": "-r requirements.txt"}, path=[bin_dir])
    assert done.returncode == 1
    assert calls(tool) == [], "nothing runs after a failed pip"


def test_words_of_install_are_arguments_not_shell_code(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    pip = stand_in(bin_dir, "python")
    stand_in(bin_dir, "flopbudget")
    done = run_action_step(
        "Install", project, {"package": "none", "install": "$(touch pwned) *;touch pwned"}, path=[bin_dir]
    )
    assert done.returncode == 0, done.stderr
    assert calls(pip) == [
        ["-m", "pip", "install", "--extra-index-url", CPU_INDEX, "$(touch", "pwned)", "*;touch", "pwned"]
    ]
    assert not (project / "pwned").exists()


# -- check ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "inputs", "expected"),
    [
        ("pull_request", {}, ["check", "--base-ref", "origin/main"]),
        ("push", {}, ["check"]),
        ("push", {"base-ref": "origin/release"}, ["check", "--base-ref", "origin/release"]),
        ("pull_request", {"base-ref": "v1.0"}, ["check", "--base-ref", "v1.0"]),
        (
            "pull_request",
            {"args": "resnet --report gitlab:gl code.json"},
            ["check", "--base-ref", "origin/main", "resnet", "--report", "gitlab:gl", "code.json"],
        ),
    ],
)
def test_check_compares_with_the_base_on_pull_requests(project: Path, tmp_path: Path, event, inputs, expected):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step("Check", project, inputs, event=event, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    assert calls(tool) == [[*expected, *pictures(tmp_path)]]
    assert done.stdout.startswith("+ flopbudget " + " ".join(expected))


def test_the_check_status_is_the_step_status(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "flopbudget", exit_code=1)
    assert run_action_step("Check", project, event="push", path=[bin_dir]).returncode == 1


def test_working_directory_is_honoured(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    (project / "sub").mkdir()
    script = bin_dir / "flopbudget"
    bin_dir.mkdir()
    script.write_text(f'#!/bin/sh\npwd > "{bin_dir}/cwd"\n')
    script.chmod(0o755)
    done = run_action_step("Check", project, {"working-directory": "sub"}, event="push", path=[bin_dir])
    assert done.returncode == 0, done.stderr
    assert os.path.samefile((bin_dir / "cwd").read_text().strip(), project / "sub")


@pytest.mark.parametrize(
    ("step", "inputs"),
    [
        ("Install", {"package": "none", "install": "##[error]pip ::warning::x \x1b[2Jclear"}),
        ("Check compute budgets", {"args": "##[error]check ::warning::x \x1b[2Jclear"}),
        ("Check compute budgets in tests", {"pytest": "true", "pytest-args": "##[error]tests ::warning::x \x1b[2J"}),
    ],
    ids=["install", "check", "pytest"],
)
def test_the_trace_line_cannot_start_a_workflow_command(project: Path, tmp_path: Path, step: str, inputs):
    """`+ COMMAND` echoes the inputs: `##[` anywhere in a line is a legacy runner command and a control character
    acts on the log, so the line is shell-quoted (`printf %q`: `\\##\\[error\\]`, `$'\\E[2J'`); the command still
    gets the words as they were."""
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step(step, project, inputs, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    (trace,) = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    assert "##[" not in done.stdout and "\x1b" not in done.stdout
    assert "\\##\\[error\\]" in trace and "$'\\E[2J" in trace
    words = [word for call in calls(python) + calls(tool) for word in call]
    assert any(word.startswith("##[error]") for word in words)  # the arguments themselves are unchanged


# -- budgets in tests: the pytest step -----------------------------------------------------------------------------

PYTEST_STEP = "Check compute budgets in tests"


@pytest.mark.parametrize(
    ("event", "inputs", "expected"),
    [
        ("pull_request", {"pytest": "true"}, ["--flopbudget-base-ref=origin/main"]),
        ("push", {"pytest": "true"}, []),
        (
            "pull_request",
            {"pytest": "true", "base-ref": "v1.0", "pytest-args": "tests/budgets -n 2"},
            ["--flopbudget-base-ref=v1.0", "tests/budgets", "-n", "2"],
        ),
    ],
)
def test_pytest_gates_the_budgets_in_tests_against_the_base(project: Path, tmp_path: Path, event, inputs, expected):
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    done = run_action_step(PYTEST_STEP, project, inputs, event=event, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    # the pyproject models are left to `flopbudget check`: nothing is counted or annotated twice
    command = ["-m", "pytest", "--flopbudget-no-models", *expected]
    assert calls(python) == [command]
    assert done.stdout.startswith("+ python " + " ".join(command) + "\n")


def test_pytest_is_off_by_default(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    done = run_action_step(PYTEST_STEP, project, path=[bin_dir])
    assert done.returncode == 0 and done.stdout == ""
    assert calls(python) == []


def test_the_pytest_status_is_the_step_status(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "python", exit_code=1)
    assert run_action_step(PYTEST_STEP, project, {"pytest": "true"}, path=[bin_dir]).returncode == 1


def test_words_of_pytest_args_are_arguments_not_shell_code(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    inputs = {"pytest": "true", "pytest-args": "$(touch pwned) `touch pwned` *;touch pwned"}
    done = run_action_step(PYTEST_STEP, project, inputs, event="push", path=[bin_dir])
    assert done.returncode == 0, done.stderr
    words = ["$(touch", "pwned)", "`touch", "pwned`", "*;touch", "pwned"]
    assert calls(python) == [["-m", "pytest", "--flopbudget-no-models", *words]]
    assert not (project / "pwned").exists()


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"pytest": "yes"}, "::error title=flopbudget action::input pytest: expected true or false, got 'yes'"),
        (
            {"pytest": "yes\n::warning::injected"},
            "::error title=flopbudget action::input pytest: expected true or false, got 'yes ::warning::injected'",
        ),
        (
            {"pytest-args": "tests/budgets"},
            "::error title=flopbudget action::input pytest-args is set but pytest is false: set pytest: true to "
            "run them",
        ),
    ],
)
def test_the_check_refuses_pytest_inputs_it_cannot_honour(project: Path, tmp_path: Path, inputs, message):
    """A mistyped input would leave the budgets in tests ungated without a word: one error line, nothing run."""
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step("Check compute budgets", project, inputs, path=[bin_dir])
    assert done.returncode == 2
    assert done.stdout.splitlines() == [message]
    assert calls(tool) == []


# -- the pull-request comment --------------------------------------------------------------------------------------

COMMENT_STEP = "Comment on the pull request"
CHECK_TITLE = "pyproject models (flopbudget check)"
#: How the comment step runs the poster: isolated (`-I`), the CLI's subcommand, from a directory of its own.
POSTER = ["-I", "-m", "pytest_flopbudget", "comment"]


def test_comment_makes_the_check_write_the_body_and_its_own_step_post_it(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    body = runner_temp / "flopbudget-comment.md"
    done = run_action_step("Check", project, {"comment": "true"}, path=[bin_dir], RUNNER_TEMP=str(runner_temp))
    assert done.returncode == 0, done.stderr
    assert calls(tool) == [["check", "--base-ref", "origin/main", "--report", f"comment:{body}", *pictures(tmp_path)]]
    # the token is this step's alone, and a failed post never fails it
    body.write_text(f"{MARKER}\n", encoding="utf-8")
    python = stand_in(bin_dir, "python", exit_code=1)
    done = run_action_step(
        COMMENT_STEP, project, {"comment": "true"}, path=[bin_dir], RUNNER_TEMP=str(runner_temp), GITHUB_TOKEN="t"
    )
    assert done.returncode == 0, done.stderr
    assert calls(python) == [[*POSTER, "--title", CHECK_TITLE, str(body)]]


def test_with_pytest_the_comment_holds_the_pytest_runs_body_too(project: Path, tmp_path: Path):
    """The pytest step writes its own body beside the check's; the comment step posts both as one comment."""
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    inputs = {"comment": "true", "pytest": "true", "pytest-args": "tests/budgets"}
    done = run_action_step(PYTEST_STEP, project, inputs, path=[bin_dir], RUNNER_TEMP=str(runner_temp))
    assert done.returncode == 0, done.stderr
    body = runner_temp / "flopbudget-comment-pytest.md"
    command = ["-m", "pytest", "--flopbudget-no-models", "--flopbudget-base-ref=origin/main"]
    assert calls(python) == [[*command, f"--flopbudget-report=comment:{body}", "tests/budgets"]]
    (bin_dir / "python.args").unlink()
    done = run_action_step(COMMENT_STEP, project, inputs, path=[bin_dir], RUNNER_TEMP=str(runner_temp))
    assert done.returncode == 0, done.stderr
    titles = ["--title", CHECK_TITLE, "--title", "budgets in tests (pytest)"]
    assert calls(python) == [[*POSTER, *titles, str(runner_temp / "flopbudget-comment.md"), str(body)]]


def test_with_no_body_written_the_comment_step_gives_one_notice(project: Path, tmp_path: Path):
    """The check stopped before writing its body (and pytest is off): the real module says so once, posts nothing."""
    done = run_action_step(COMMENT_STEP, project, {"comment": "true"}, RUNNER_TEMP=str(tmp_path), GITHUB_TOKEN="t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("::notice") == 1 and "no comment body was written" in done.stdout


#: Modules a step that ran the project's code could leave where the comment step might import them from.
PLANTED = ("json", "ssl", "socket", "argparse", "sitecustomize", "usercustomize", "urllib", "http", "pytest_flopbudget")


def plant(folder: Path, pwned: Path) -> None:
    """Each of `PLANTED` in `folder` (a package for the packages), recording its import as a file in `pwned`."""
    code = f"open({str(pwned)!r} + '/' + __name__, 'w').close()\n"  # builtins only: nothing else may be importable
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLANTED:
        if name in ("urllib", "http", "pytest_flopbudget"):
            (folder / name).mkdir(exist_ok=True)
            (folder / name / "__init__.py").write_text(code)
            (folder / name / "__main__.py").write_text(code)
        else:
            (folder / f"{name}.py").write_text(code)


def test_the_comment_step_runs_no_module_the_project_could_plant(project: Path, tmp_path: Path):
    """The token is the comment step's alone, but the steps before it ran the project's code, which can write to
    RUNNER_TEMP, the checkout and the job's environment (GITHUB_ENV): a `json.py` there must not run with the token.
    The step runs `python -I` from a directory of its own, and still posts the comment."""
    from fake_github import FakeGitHub, pull_request_env, serving

    runner_temp = tmp_path / "runner-temp"
    pwned = tmp_path / "pwned"
    user_base = tmp_path / "user-base"
    site = user_base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    pwned.mkdir()
    for folder in (runner_temp, project, tmp_path / "pythonpath", site):
        plant(folder, pwned)
    body = f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n"
    (runner_temp / "flopbudget-comment.md").write_text(body, encoding="utf-8")
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7}}', encoding="utf-8")
    fake = FakeGitHub()
    with serving(fake) as url:
        environment = {"PYTHONPATH": str(tmp_path / "pythonpath"), "PYTHONUSERBASE": str(user_base)}
        done = run_action_step(
            COMMENT_STEP, project, {"comment": "true"}, **pull_request_env(str(event), url), **environment
        )
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in pwned.iterdir()) == []
    assert done.stdout == "" and fake.comments[-1]["body"] == body


def test_the_comment_step_never_sends_the_token_to_another_origin(project: Path, tmp_path: Path):
    """The API answers with a redirect to another origin (a second port): the token is not sent there, and the
    step says so in one error line, without failing the job."""
    from fake_github import FakeGitHub, pull_request_env, serving

    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    (runner_temp / "flopbudget-comment.md").write_text(f"{MARKER}\nbody\n", encoding="utf-8")
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7}}', encoding="utf-8")
    api, elsewhere = FakeGitHub(), FakeGitHub()
    with serving(api) as url, serving(elsewhere) as other_url:
        api.redirects = {"GET": (302, other_url), "POST": (302, other_url)}
        done = run_action_step(COMMENT_STEP, project, {"comment": "true"}, **pull_request_env(str(event), url))
    assert done.returncode == 0, done.stderr
    assert [auth for _, _, auth in elsewhere.requests] == []
    (line,) = done.stdout.splitlines()
    assert line.startswith("::error title=flopbudget") and "the token is not sent there" in line


def test_the_comment_step_never_edits_a_persons_comment_that_starts_with_the_marker(project: Path, tmp_path: Path):
    """A reviewer quoted the comment's source, marker and all: the job's token (GET /user refused, so the
    github-actions[bot]) edits only its own comment, and adds it next to the reviewer's."""
    from fake_github import ACTIONS_BOT, FakeGitHub, pull_request_env, serving

    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    (runner_temp / "flopbudget-comment.md").write_text(f"{MARKER}\nbody\n", encoding="utf-8")
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7}}', encoding="utf-8")
    theirs = [
        {"id": 2, "body": f"{LEGACY_MARKER}\nmy notes", "user": {"login": "reviewer", "type": "User"}},
        {"id": 3, "body": f"{MARKER}\nquoted", "user": {"login": "reviewer", "type": "User"}},
    ]
    api = FakeGitHub()
    api.comments = [dict(comment) for comment in theirs]
    with serving(api) as url:
        done = run_action_step(COMMENT_STEP, project, {"comment": "true"}, **pull_request_env(str(event), url))
        assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
        assert api.comments == [*theirs, {"id": 101, "body": f"{MARKER}\nbody\n", "user": ACTIONS_BOT}]
        (runner_temp / "flopbudget-comment.md").write_text(f"{MARKER}\nnext push\n", encoding="utf-8")
        assert run_action_step(COMMENT_STEP, project, {"comment": "true"}, **pull_request_env(str(event), url))
    assert api.comments == [*theirs, {"id": 101, "body": f"{MARKER}\nnext push\n", "user": ACTIONS_BOT}]


def test_comment_is_off_by_default_and_the_check_has_no_token(project: Path, tmp_path: Path):
    from e2e_helpers import action_step

    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    python = stand_in(bin_dir, "python")
    assert run_action_step("Check", project, path=[bin_dir]).returncode == 0
    assert calls(tool) == [["check", "--base-ref", "origin/main", *pictures(tmp_path)]]
    done = run_action_step(COMMENT_STEP, project, path=[bin_dir], RUNNER_TEMP=str(tmp_path))
    assert done.returncode == 0 and done.stdout == "" and calls(python) == []
    assert "github.token" not in str(action_step("Check compute budgets")) + str(action_step(PYTEST_STEP))


def test_the_check_refuses_a_mistyped_comment(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step("Check compute budgets", project, {"comment": "yes"}, path=[bin_dir])
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        "::error title=flopbudget action::input comment: expected true or false, got 'yes'"
    ]
    assert calls(tool) == []


# -- the differential pictures -------------------------------------------------------------------------------------

FIND_STEP = "Find the differential pictures"
LINK_STEP = "Link the differential pictures"
URL = "https://github.com/octo/models/actions/runs/7/artifacts/42"


def test_pictures_false_leaves_the_check_alone_and_a_mistyped_value_is_refused(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    assert run_action_step("Check", project, {"pictures": "false"}, path=[bin_dir]).returncode == 0
    assert calls(tool) == [["check", "--base-ref", "origin/main"]]
    done = run_action_step("Check compute budgets", project, {"pictures": "yes\n::warning::x"}, path=[bin_dir])
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        "::error title=flopbudget action::input pictures: expected true or false, got 'yes ::warning::x'"
    ]
    assert calls(tool) == [["check", "--base-ref", "origin/main"]]  # nothing more was run


def test_the_find_step_outputs_the_page_and_how_many_models_it_draws(project: Path, tmp_path: Path):

    done = run_action_step(FIND_STEP, project)
    assert done.returncode == 0 and done.stdout == "" and step_outputs(project) == {}  # no model changed
    page = tmp_path / "runner-temp" / "flopbudget-diff.html"
    page.write_text(
        '<h1>x</h1>\n<section class="model" id="model-1">\n</section>\n<section class="model" id="model-2">\n'
        '</section>\n<p><section class="model"></p>\n',  # only a line's start counts: as the page writes them
        encoding="utf-8",
    )
    done = run_action_step(FIND_STEP, project)
    assert done.returncode == 0, done.stderr
    assert step_outputs(project) == {"path": str(page), "models": "2"}
    assert run_action_step(FIND_STEP, project, {"pictures": "false"}).returncode == 0
    assert step_outputs(project) == {}


@pytest.mark.parametrize(
    ("models", "what"),
    [("2", "the 2 changed models"), ("1", "the changed model"), ("", "the changed models")],
    ids=["two", "one", "uncounted"],
)
def test_the_link_goes_to_the_job_summary_and_the_comments_footer(
    project: Path, tmp_path: Path, models: str, what: str
):
    summary = tmp_path / "step-summary.md"
    summary.write_text("### flopbudget: ✅ 2 models within budget\n", encoding="utf-8")
    body = tmp_path / "runner-temp" / "flopbudget-comment.md"
    body.parent.mkdir()
    written = f"{MARKER}\n### flopbudget: ✅ 2 models within budget\n"
    body.write_text(written, encoding="utf-8")
    outputs = {"pictures": {"path": "page.html", "models": models}, "upload": {"artifact-url": URL}}
    done = run_action_step(LINK_STEP, project, steps=outputs)
    assert done.returncode == 0, done.stderr
    line = f"Differential pictures of {what}: [flopbudget-diff.html]({URL})"
    assert summary.read_text(encoding="utf-8") == f"### flopbudget: ✅ 2 models within budget\n\n{line}\n"
    assert step_outputs(project) == {"line": line}
    assert body.read_text(encoding="utf-8") == written  # a body is cut from its end: the link goes in as a footer
    # the comment step passes it to the poster, which puts it last, after merging and cutting the bodies
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    inputs = {"comment": "true"}
    done = run_action_step(COMMENT_STEP, project, inputs, path=[bin_dir], steps={"link": {"line": line}})
    assert done.returncode == 0, done.stderr
    assert calls(python) == [[*POSTER, "--footer", line, "--title", CHECK_TITLE, str(body)]]


def test_no_link_without_an_upload_and_no_comment_body_made_up(project: Path, tmp_path: Path):
    summary = tmp_path / "step-summary.md"
    body = tmp_path / "runner-temp" / "flopbudget-comment.md"
    # the upload was skipped (no page) or failed: its url is empty
    done = run_action_step(LINK_STEP, project, steps={"pictures": {"path": "page.html", "models": "1"}})
    assert done.returncode == 0 and done.stdout == "" and summary.read_text() == ""
    # uploaded, but no comment was asked for: the summary alone
    outputs = {"pictures": {"path": "page.html", "models": "1"}, "upload": {"artifact-url": URL}}
    assert run_action_step(LINK_STEP, project, steps=outputs).returncode == 0
    assert summary.read_text().endswith(f"[flopbudget-diff.html]({URL})\n") and not body.exists()
    assert step_outputs(project)["line"].endswith(f"[flopbudget-diff.html]({URL})")  # unused: comment is false


@pytest.mark.slow
def test_a_pull_request_that_grows_a_model_links_its_picture(project: Path, tmp_path: Path):
    """The real check on a pull request: the grown model, and only it, is drawn against the base's baseline; the
    find step counts it; with the url an upload gives, the summary and the comment's body link the page."""
    pytest.importorskip("torch")
    from e2e_helpers import MODELS, flopbudget, git, init_repo

    (project / "models.py").write_text(MODELS)
    pyproject = "".join(
        f'[tool.flopbudget.models.{name}]\ntarget = "models:{target}"\ninputs = [[1, 8]]\nmacs = "1k"\n\n'
        for name, target in (("grows", "small"), ("stays", "wide"))
    )
    (project / "pyproject.toml").write_text(pyproject)
    init_repo(project)
    assert flopbudget(project, "check", "--update").returncode == 0
    (project / ".gitignore").write_text("__pycache__/\n.flopbudget_cache/\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "models and baselines")
    git(project, "update-ref", "refs/remotes/origin/main", "main")
    git(project, "switch", "-q", "-c", "bigger-batch")
    (project / "pyproject.toml").write_text(pyproject.replace("inputs = [[1, 8]]", "inputs = [[3, 8]]", 1))
    git(project, "commit", "-qam", "grows takes a batch of 3")
    inputs = {"package": "none", "python-version": "", "comment": "true"}
    check = run_action_step("Check compute budgets", project, inputs)
    assert check.returncode == 0, check.stdout + check.stderr  # grew inside its budget
    page = (tmp_path / "runner-temp" / "flopbudget-diff.html").read_text(encoding="utf-8")
    assert re.findall(r"^<h2>(.*)</h2>$", page, flags=re.M) == ["grows (FLOPs)"]
    assert "against the baselines at origin/main" in page
    assert run_action_step(FIND_STEP, project, inputs).returncode == 0
    found = step_outputs(project)
    assert found == {"path": str(tmp_path / "runner-temp" / "flopbudget-diff.html"), "models": "1"}
    link = run_action_step(LINK_STEP, project, inputs, steps={"pictures": found, "upload": {"artifact-url": URL}})
    assert link.returncode == 0, link.stderr
    line = f"Differential pictures of the changed model: [flopbudget-diff.html]({URL})"
    assert (tmp_path / "step-summary.md").read_text(encoding="utf-8").endswith(f"\n\n{line}\n")
    assert step_outputs(project) == {"line": line}  # the comment step's footer
    body = (tmp_path / "runner-temp" / "flopbudget-comment.md").read_text(encoding="utf-8")
    assert body.startswith(f"{MARKER}\n") and "grows:" in body  # the diff, folded


# -- across CI machines: a shard, and the merge job ----------------------------------------------------------------


def test_a_shard_checks_its_part_writes_its_results_and_names_its_artifact(project: Path, tmp_path: Path):
    """No pictures and no comment body in a shard (the merge job's), and the folder and artifact name the upload
    step needs written before the check runs, so a failed check still uploads."""
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget", exit_code=1)
    results = tmp_path / "runner-temp" / "flopbudget-shard"
    done = run_action_step("Check compute budgets", project, {"shard": "2/3"}, path=[bin_dir])
    assert done.returncode == 1  # the shard's own verdict: a forgotten merge job still fails on an overrun
    assert calls(tool) == [
        ["check", "--base-ref", "origin/main", "--shard", "2/3", "--report", f"json:{results}/check.json"]
    ]
    assert step_outputs(project) == {"results": str(results), "artifact": "flopbudget-shard-2-of-3"}
    assert results.is_dir()


def test_a_shard_runs_its_part_of_the_budget_tests_too(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    python = stand_in(bin_dir, "python")
    inputs = {"pytest": "true", "shard": "1/2", "pytest-args": "tests/budgets"}
    done = run_action_step(PYTEST_STEP, project, inputs, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    results = tmp_path / "runner-temp" / "flopbudget-shard" / "pytest.json"
    assert calls(python) == [
        ["-m", "pytest", "--flopbudget-no-models", "--flopbudget-base-ref=origin/main", "--flopbudget-shard=1/2",
         f"--flopbudget-report=json:{results}", "tests/budgets"]
    ]  # fmt: skip


def test_the_merge_job_merges_every_downloaded_shard_and_writes_the_comment_and_pictures(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    shards = tmp_path / "runner-temp" / "flopbudget-shards"
    for index in (1, 2):
        (shards / f"flopbudget-shard-{index}-of-2").mkdir(parents=True)
        (shards / f"flopbudget-shard-{index}-of-2" / "check.json").write_text("{}")
        (shards / f"flopbudget-shard-{index}-of-2" / "pytest.json").write_text("{}")
    inputs = {"merge": "true", "comment": "true", "pytest": "true", "args": "--report gitlab:gl.json"}
    done = run_action_step("Check compute budgets", project, inputs, path=[bin_dir])
    assert done.returncode == 0, done.stderr
    checks = [str(shards / f"flopbudget-shard-{index}-of-2" / "check.json") for index in (1, 2)]
    comment = tmp_path / "runner-temp" / "flopbudget-comment.md"
    assert calls(tool) == [["merge", *checks, "--report", "gitlab:gl.json", "--report", f"comment:{comment}",
                            *pictures(tmp_path)]]  # fmt: skip
    assert step_outputs(project) == {}  # nothing to upload from the merge job but the pictures
    (bin_dir / "flopbudget.args").unlink()
    assert run_action_step(PYTEST_STEP, project, inputs, path=[bin_dir]).returncode == 0
    tests = [str(shards / f"flopbudget-shard-{index}-of-2" / "pytest.json") for index in (1, 2)]
    body = tmp_path / "runner-temp" / "flopbudget-comment-pytest.md"
    assert calls(tool) == [["merge", *tests, "--report", f"comment:{body}"]]


SHARD_OF_N = "input shard: expected K/N, this job's shard of a matrix of N (e.g. 2/3), got"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"shard": "3"}, f"{SHARD_OF_N} '3'"),
        ({"shard": "1/3\n::warning::x"}, f"{SHARD_OF_N} '1/3 ::warning::x'"),
        ({"shard": "1/3", "merge": "true"},
         "inputs shard and merge: a job is one shard of the matrix or its merge job, not both"),
        ({"shard": "1/3", "comment": "true"},
         "input comment: true in a shard: the merge job posts the one comment (set comment: true there)"),
        ({"merge": "yes"}, "input merge: expected true or false, got 'yes'"),
        ({"merge": "true"},
         "merge: no shard's results were downloaded (artifacts flopbudget-shard-*): do the shard jobs run this action "
         "with shard: K/N, and does this job need them?"),
    ],
)  # fmt: skip
def test_shard_and_merge_inputs_it_cannot_honour_are_refused(project: Path, tmp_path: Path, inputs, message):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    done = run_action_step("Check compute budgets", project, inputs, path=[bin_dir])
    assert done.returncode == 2
    assert done.stdout.splitlines() == [f"::error title=flopbudget action::{message}"]
    assert calls(tool) == []
