"""`flopbudget comment`: the bodies `comment:PATH` wrote, posted as one comment to a fake GitHub REST API
(http.server in a thread, no network), through the command's own `main`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, pull_request_env, serving

from pytest_flopbudget._cli import main
from pytest_flopbudget._reporters.pr_comment import MARKER, MAX_CHARS


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeGitHub, str]]:
    """The fake API, and the environment a pull request's step has, aimed at it."""
    fake = FakeGitHub()
    with serving(fake) as url:
        event = tmp_path / "event.json"
        event.write_text(json.dumps({"pull_request": {"number": 7}}), encoding="utf-8")
        for key, value in pull_request_env(str(event), url).items():
            monkeypatch.setenv(key, value)
        yield fake, url


def comment(*args: Any) -> int:
    """`flopbudget comment ARGS`, in this process."""
    return main(["comment", *(str(arg) for arg in args)])


def test_main_posts_the_file_and_never_fails(api, tmp_path: Path, capsys) -> None:
    fake, _ = api
    body = tmp_path / "comment.md"
    body.write_text(f"{MARKER}\nfrom a file\n", encoding="utf-8")
    assert comment(body) == 0
    assert fake.comments[-1]["body"] == f"{MARKER}\nfrom a file\n"
    fake.status = 403
    assert comment(body) == 0
    assert comment(tmp_path / "missing.md") == 0
    captured = capsys.readouterr()
    assert captured.out.count("::notice") == 2 and TOKEN not in captured.out + captured.err


# -- several bodies: the action's check and its pytest run ---------------------------------------------------------

CHECK_TITLE = "pyproject models (flopbudget check)"
PYTEST_TITLE = "budgets in tests (pytest)"


def action_args(check: Path, tests: Path) -> list[str]:
    """The comment step's command line: both bodies, each with the title of its run."""
    return ["--title", CHECK_TITLE, "--title", PYTEST_TITLE, str(check), str(tests)]


def test_main_posts_the_check_and_the_pytest_bodies_as_one_comment(api, tmp_path: Path) -> None:
    fake, _ = api
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    check.write_text(f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n", encoding="utf-8")
    tests.write_text(f"{MARKER}\n### flopbudget: ❌ 1 of 1 model over budget\n", encoding="utf-8")
    assert comment(*action_args(check, tests)) == 0
    assert [method for method, _, _ in fake.requests] == ["GET", "POST"]  # one comment
    assert fake.comments[-1]["body"] == (
        f"{MARKER}\n## {CHECK_TITLE}\n\n### flopbudget: ✅ 1 model within budget\n\n"
        f"## {PYTEST_TITLE}\n\n### flopbudget: ❌ 1 of 1 model over budget\n"
    )
    assert comment(*action_args(check, tests)) == 0  # the next push edits it
    assert [c["body"].count(MARKER) for c in fake.comments] == [0, 1]


@pytest.mark.parametrize("written", ["check", "pytest"])
def test_main_posts_the_only_body_written_as_it_is(api, tmp_path: Path, capsys, written: str) -> None:
    """A run that stopped before writing its body (the check failing to load a model) leaves the other's."""
    fake, _ = api
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    body = f"{MARKER}\n### flopbudget: ❌ 1 of 1 model over budget\n\n<details>\n</details>\n"
    (check if written == "check" else tests).write_text(body, encoding="utf-8")
    assert comment(*action_args(check, tests)) == 0
    assert fake.comments[-1]["body"] == body  # byte for byte, no heading
    assert capsys.readouterr().out == ""


def test_main_with_no_body_written_is_one_notice_and_no_request(api, tmp_path: Path, capsys) -> None:
    fake, _ = api
    assert comment(*action_args(tmp_path / "check.md", tmp_path / "pytest.md")) == 0
    out = capsys.readouterr().out
    assert fake.requests == []
    assert out.count("\n") == 1 and out.startswith("::notice title=flopbudget") and "no comment body" in out


def failures_table(models: int) -> str:
    return "".join(f"| ❌ | m{i:05d} | FLOPs | 10 | 100 | 150 | +50 (+50.0%) | over |\n" for i in range(models))


def over_limit_bodies(tmp_path: Path) -> tuple[Path, Path]:
    """The check's and the pytest run's bodies, 900 failed models each: together over a comment's limit."""
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    for path in (check, tests):
        path.write_text(f"{MARKER}\n### flopbudget: ❌ 900 of 900 models over budget\n\n{failures_table(900)}")
    return check, tests


def test_main_with_the_bodies_over_the_limit_posts_one_comment_under_it(api, tmp_path: Path) -> None:
    fake, _ = api
    check, tests = over_limit_bodies(tmp_path)
    assert comment(*action_args(check, tests)) == 0
    posted = fake.comments[-1]["body"]
    assert len(posted) <= MAX_CHARS and posted.count(MARKER) == 1
    assert posted.count("table rows left out; the job log has them all._") == 2


LINK = "Differential pictures of the changed model: [flopbudget-diff.html](https://github.com/o/r/actions/runs/1/artifacts/2)"


def test_the_footer_goes_last_after_the_bodies_are_merged(api, tmp_path: Path) -> None:
    fake, _ = api
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    check.write_text(f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n", encoding="utf-8")
    tests.write_text(f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n", encoding="utf-8")
    assert comment("--footer", LINK, *action_args(check, tests)) == 0
    assert fake.comments[-1]["body"].endswith(
        f"## {PYTEST_TITLE}\n\n### flopbudget: ✅ 1 model within budget\n\n{LINK}\n"
    )
    assert comment("--footer", LINK, "--title", CHECK_TITLE, check) == 0  # one body: as written, then the link
    assert fake.comments[-1]["body"] == f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n\n{LINK}\n"


def test_a_footer_survives_the_cut_and_the_bodies_keep_their_notes(api, tmp_path: Path) -> None:
    """Appended to a body, the link was the first line a cut dropped, and it hid the body's own cut note."""
    fake, _ = api
    check, tests = over_limit_bodies(tmp_path)
    assert comment("--footer", LINK, *action_args(check, tests)) == 0
    posted = fake.comments[-1]["body"]
    assert len(posted) <= MAX_CHARS and posted.count(MARKER) == 1 and posted.endswith(f"\n\n{LINK}\n")
    assert posted.count("table rows left out; the job log has them all._") == 2
    # one body at its own limit (the check cut it) and the link: cut again to make room, the link kept
    full = f"{MARKER}\n### flopbudget: ❌ 1100 of 1100 models over budget\n\n{failures_table(1100)}"
    check.write_text(full[: full.rindex("\n", 0, MAX_CHARS - 256) + 1])  # whole rows, up to the check's limit
    assert comment("--footer", LINK, "--title", CHECK_TITLE, check) == 0
    posted = fake.comments[-1]["body"]
    assert len(posted) <= MAX_CHARS and posted.endswith(f"\n\n{LINK}\n") and "table rows left out" in posted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the following arguments are required: BODY_FILE"),
        (["--title"], "argument --title: expected one argument"),
        (["--verbose", "body.md"], "unrecognized arguments: --verbose"),
    ],
)
def test_a_command_line_it_cannot_follow_is_one_line(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        comment(*args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("flopbudget") and ": error: " in err and message in err


def test_titles_pair_with_the_bodies_in_order_or_are_refused(api, tmp_path: Path, capsys) -> None:
    fake, _ = api
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    assert comment("--title", CHECK_TITLE, check, tests) == 2
    assert capsys.readouterr().err == (
        "flopbudget: error: --title given 1 times for 2 BODY_FILEs: give one --title per BODY_FILE, in the same "
        "order, or none\n"
    )
    assert fake.requests == []


def test_main_says_once_a_body_cannot_be_read_and_posts_the_other(api, tmp_path: Path, capsys) -> None:
    fake, _ = api
    check, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    check.mkdir()  # there, but not a file it can read
    tests.write_text(f"{MARKER}\nfrom pytest\n", encoding="utf-8")
    assert comment(*action_args(check, tests)) == 0
    assert fake.comments[-1]["body"] == f"{MARKER}\nfrom pytest\n"
    tests.unlink()
    assert comment(*action_args(check, tests)) == 0
    out = capsys.readouterr().out
    assert out.count("::notice") == 2 and out.count(f"no comment body from {check}: cannot read it") == 2


# -- what the command reads: regular files only, one line for what it cannot use -----------------------------------


def comment_process(*args: Path | str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m pytest_flopbudget comment ARGS` as a process of its own (a hang fails the test, not the suite)."""
    return subprocess.run(
        [sys.executable, "-I", "-m", "pytest_flopbudget", "comment", *(str(arg) for arg in args)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=30, check=False,
    )  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_left_as_a_body_is_one_notice_not_a_hang(api, tmp_path: Path) -> None:
    fake, _ = api
    fifo, tests = tmp_path / "check.md", tmp_path / "pytest.md"
    os.mkfifo(fifo)  # nobody ever writes to it: opening it for reading would wait for ever
    tests.write_text(f"{MARKER}\nfrom pytest\n", encoding="utf-8")
    done = comment_process(*action_args(fifo, tests), env=dict(os.environ))
    assert done.returncode == 0 and done.stderr == ""
    (line,) = done.stdout.splitlines()
    assert line.startswith("::notice ") and f"no comment body from {fifo}: cannot read it: not a regular file" in line
    assert fake.comments[-1]["body"] == f"{MARKER}\nfrom pytest\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("event", ["fifo", "nested"])
def test_an_event_file_it_cannot_use_is_not_a_pull_request(api, tmp_path: Path, event: str) -> None:
    """GITHUB_EVENT_PATH a FIFO (a hang) or JSON nested deeper than the parser goes (a traceback): no comment."""
    fake, _ = api
    body = tmp_path / "check.md"
    body.write_text(f"{MARKER}\nbody\n", encoding="utf-8")
    path = tmp_path / "event-it-cannot-use.json"
    if event == "fifo":
        os.mkfifo(path)
    else:
        path.write_text('{"pull_request": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    done = comment_process(body, env={**os.environ, "GITHUB_EVENT_PATH": str(path)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert fake.requests == []


def test_a_refused_redirect_exits_1_and_a_notice_exits_0(api, tmp_path: Path, capsys) -> None:
    fake, url = api
    body = tmp_path / "check.md"
    body.write_text(f"{MARKER}\nbody\n", encoding="utf-8")
    fake.redirects["POST"] = (302, url)
    assert comment(body) == 1
    assert capsys.readouterr().out.startswith("::error title=flopbudget")
    fake.redirects.clear()
    fake.status = 403
    assert comment(body) == 0


def test_timeout_takes_seconds_and_refuses_the_rest(capsys) -> None:
    with pytest.raises(SystemExit):
        comment("--timeout", "0", "body.md")
    assert "'0' is not a time: give a number of seconds, more than 0, at most 3600" in capsys.readouterr().err
