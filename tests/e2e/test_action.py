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
import stat
from pathlib import Path

import pytest
from e2e_helpers import ACTION, run_action_step

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
    assert f"+ python -m pip install --extra-index-url {CPU_INDEX} {ACTION.parent}[torch] -e . torch==2.13.0" in (
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
    assert done.stdout.startswith("flopbudget 0.")


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
    assert calls(tool) == [expected]
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


def test_comment_makes_the_check_write_the_body_and_its_own_step_post_it(project: Path, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    body = runner_temp / "flopbudget-comment.md"
    done = run_action_step("Check", project, {"comment": "true"}, path=[bin_dir], RUNNER_TEMP=str(runner_temp))
    assert done.returncode == 0, done.stderr
    assert calls(tool) == [["check", "--base-ref", "origin/main", "--report", f"comment:{body}"]]
    # the token is this step's alone, and a failed post never fails it
    body.write_text("<!-- pytest-flopbudget -->\n", encoding="utf-8")
    python = stand_in(bin_dir, "python", exit_code=1)
    done = run_action_step(
        COMMENT_STEP, project, {"comment": "true"}, path=[bin_dir], RUNNER_TEMP=str(runner_temp), GITHUB_TOKEN="t"
    )
    assert done.returncode == 0, done.stderr
    assert calls(python) == [
        ["-m", "pytest_flopbudget.reporters.pr_comment", "--title", CHECK_TITLE, "flopbudget-comment.md"]
    ]


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
    assert calls(python) == [
        ["-m", "pytest_flopbudget.reporters.pr_comment", "--title", CHECK_TITLE, "flopbudget-comment.md",
         "--title", "budgets in tests (pytest)", "flopbudget-comment-pytest.md"]
    ]  # fmt: skip


def test_with_no_body_written_the_comment_step_gives_one_notice(project: Path, tmp_path: Path):
    """The check stopped before writing its body (and pytest is off): the real module says so once, posts nothing."""
    done = run_action_step(COMMENT_STEP, project, {"comment": "true"}, RUNNER_TEMP=str(tmp_path), GITHUB_TOKEN="t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("::notice") == 1 and "no comment body was written" in done.stdout


def test_comment_is_off_by_default_and_the_check_has_no_token(project: Path, tmp_path: Path):
    from e2e_helpers import action_step

    bin_dir = tmp_path / "bin"
    tool = stand_in(bin_dir, "flopbudget")
    python = stand_in(bin_dir, "python")
    assert run_action_step("Check", project, path=[bin_dir]).returncode == 0
    assert calls(tool) == [["check", "--base-ref", "origin/main"]]
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
