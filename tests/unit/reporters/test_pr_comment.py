"""The pull-request comment against a fake GitHub REST API (http.server in a thread, no network)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import ACTIONS_BOT, REPOSITORY, TOKEN, FakeGitHub, pull_request_env, serving
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._reporters.ci import ReportSpec, emit
from pytest_flopbudget._reporters.output import Findings
from pytest_flopbudget._reporters.pr_comment import LEGACY_MARKER, MARKER, MAX_CHARS, comment_body, post
from pytest_flopbudget._run import RunResult


@pytest.fixture
def api() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()
    with serving(fake) as url:
        yield fake, url


def github_env(tmp_path: Path, url: str, event: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"pull_request": {"number": 7}} if event is None else event), encoding="utf-8")
    return pull_request_env(str(path), url, **extra)


COMMENTS = f"/repos/{REPOSITORY}/issues/7/comments"


def test_creates_once_then_updates_the_same_comment_in_place(api, tmp_path: Path) -> None:
    fake, url = api
    env = github_env(tmp_path, url)
    out = io.StringIO()
    assert post(f"{MARKER}\nfirst push\n", env, out) == "created"
    (created,) = [c for c in fake.comments if c["body"].startswith(MARKER)]
    assert post(f"{MARKER}\nsecond push\n", env, out) == "updated"
    mine = [c for c in fake.comments if c["body"].startswith(MARKER)]
    assert [c["id"] for c in mine] == [created["id"]]
    assert mine[0]["body"] == f"{MARKER}\nsecond push\n"
    assert fake.comments[0]["body"] == "LGTM"  # the reviewer's comment untouched
    # the token's identity is asked for once a comment starts with the marker (the job's token: 403, the bot)
    edit = f"/repos/{REPOSITORY}/issues/comments/{created['id']}"
    assert [(method, path.partition("?")[0]) for method, path, _ in fake.requests] == [
        ("GET", COMMENTS), ("POST", COMMENTS), ("GET", COMMENTS), ("GET", "/user"), ("PATCH", edit)
    ]  # fmt: skip
    assert out.getvalue() == ""


def test_finds_its_comment_on_a_later_page(api, tmp_path: Path) -> None:
    fake, url = api
    chat = [{"id": i, "body": f"chat {i}"} for i in range(1, 151)]
    fake.comments = [*chat, {"id": 500, "body": f"{MARKER}\nold", "user": ACTIONS_BOT}]
    assert post("new\n", github_env(tmp_path, url), io.StringIO()) == "updated"
    assert fake.comments[-1] == {"id": 500, "body": f"{MARKER}\nnew\n", "user": ACTIONS_BOT}  # the marker added


HUMAN = {"login": "someone", "type": "User"}
RENOVATE = {"login": "renovate[bot]", "type": "Bot"}
OCTOCAT = {"login": "octocat", "type": "User"}


@pytest.mark.parametrize("marker", [MARKER, LEGACY_MARKER], ids=["marker", "legacy-marker"])
def test_a_comment_by_anyone_else_that_starts_with_the_marker_is_never_edited(api, tmp_path: Path, marker: str) -> None:
    """A person who pasted the marker, or another bot: their comments stay as they are, ours is a new one."""
    fake, url = api
    theirs = [
        {"id": 2, "body": f"{marker}\npasted", "user": HUMAN},
        {"id": 3, "body": f"{marker}\nanother tool", "user": RENOVATE},
        {"id": 4, "body": f"{marker}\nby a personal token", "user": OCTOCAT},
    ]
    fake.comments = [dict(comment) for comment in theirs]
    assert post(f"{MARKER}\nnew\n", github_env(tmp_path, url), io.StringIO()) == "created"
    assert fake.comments[:3] == theirs and fake.comments[3]["user"] == ACTIONS_BOT
    assert [method for method, _, _ in fake.requests].count("PATCH") == 0


def test_with_a_personal_token_its_user_is_the_identity(api, tmp_path: Path) -> None:
    """GET /user answers for a personal token: that user's comment is ours, the Actions bot's is not."""
    fake, url = api
    fake.user = OCTOCAT
    fake.comments = [
        {"id": 2, "body": f"{MARKER}\nthe bot's", "user": ACTIONS_BOT},
        {"id": 3, "body": f"{MARKER}\nold", "user": {"login": "OctoCat", "type": "User"}},  # logins ignore case
    ]
    assert post(f"{MARKER}\nnew\n", github_env(tmp_path, url), io.StringIO()) == "updated"
    assert [comment["body"] for comment in fake.comments] == [f"{MARKER}\nthe bot's", f"{MARKER}\nnew\n"]


def test_its_own_comment_of_an_earlier_version_is_edited_onto_the_new_marker(api, tmp_path: Path) -> None:
    fake, url = api
    fake.comments = [{"id": 2, "body": f"{LEGACY_MARKER}\nold", "user": ACTIONS_BOT}]
    assert post(f"{MARKER}\nnew\n", github_env(tmp_path, url), io.StringIO()) == "updated"
    assert fake.comments == [{"id": 2, "body": f"{MARKER}\nnew\n", "user": ACTIONS_BOT}]


def test_the_marker_is_a_hidden_line_of_its_own() -> None:
    assert MARKER.startswith("<!-- pytest-flopbudget ") and MARKER.endswith(" -->") and "\n" not in MARKER
    assert MARKER != LEGACY_MARKER and "--" not in MARKER[4:-3]  # one HTML comment, closed once


@pytest.mark.parametrize("status", [403, 404])
def test_a_fork_token_degrades_to_one_notice(api, tmp_path: Path, status: int) -> None:
    fake, url = api
    fake.status = status
    out = io.StringIO()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, url), out) == "notice"
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("::notice title=flopbudget")
    assert f"HTTP {status}" in lines[0] and "pull-requests: write" in lines[0]
    assert TOKEN not in out.getvalue()


def test_missing_token_is_one_notice_and_no_request(api, tmp_path: Path) -> None:
    fake, url = api
    out = io.StringIO()
    env = github_env(tmp_path, url)
    del env["GITHUB_TOKEN"]
    assert post("body", env, out) == "notice"
    assert fake.requests == []
    assert out.getvalue().count("::notice") == 1 and "GITHUB_TOKEN is not set" in out.getvalue()


def test_unreachable_api_is_one_notice(tmp_path: Path) -> None:
    out = io.StringIO()
    env = github_env(tmp_path, "http://127.0.0.1:9", GITHUB_TOKEN=TOKEN)  # the discard port: nobody listens
    assert post("body", env, out) == "notice"
    assert out.getvalue().count("\n") == 1 and TOKEN not in out.getvalue()


def test_not_a_pull_request_posts_nothing(api, tmp_path: Path) -> None:
    fake, url = api
    out = io.StringIO()
    assert post("body", github_env(tmp_path, url, event={"ref": "refs/heads/main"}), out) == "skipped"
    assert post("body", {"GITHUB_TOKEN": TOKEN}, out) == "skipped"
    assert fake.requests == [] and out.getvalue() == ""


def test_an_oversized_body_is_cut_to_the_comment_limit(api, tmp_path: Path) -> None:
    fake, url = api
    assert post(MARKER + "\n" + "é" * 100_000, github_env(tmp_path, url), io.StringIO()) == "created"
    assert len(fake.comments[-1]["body"]) <= MAX_CHARS


def test_the_body_is_the_job_summary_under_the_marker_and_the_limit(make_project, make_report) -> None:
    project = make_project(pyproject(RESNET))
    verdict = project.verdict("resnet", make_report({"stem": 300, "head": 900}), make_report({"head": 500}))
    body = comment_body(Findings(RunResult([verdict])), str(project.root))
    assert body.startswith(MARKER + "\n### flopbudget: ❌ 1 of 1 model over budget")
    assert "<details>" in body and "| ❌ | resnet | FLOPs |" in body


def test_a_huge_run_is_cut_to_the_comment_limit(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:04d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(800)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    verdicts = [project.verdict(f"m{i:04d}", make_report({"conv": 100})) for i in range(800)]
    huge = comment_body(Findings(RunResult(verdicts)), str(project.root))
    assert len(huge) <= MAX_CHARS and huge.startswith(MARKER + "\n")
    assert "_Summary cut to stay under GitHub's limit for a comment" in huge


def test_comment_report_kind_writes_the_body_file(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(pyproject(RESNET))
    verdict = project.verdict("resnet", make_report({"head": 900}))
    path = tmp_path / "out" / "comment.md"
    assert emit(RunResult([verdict]), [ReportSpec("comment", str(path))], env={}, stream=io.StringIO()).ok
    assert path.read_text(encoding="utf-8") == comment_body(Findings(RunResult([verdict])), str(Path.cwd()))


# -- what the poster refuses: the token elsewhere, a write redirected, answers it cannot trust -----------------------


@pytest.fixture
def elsewhere() -> Iterator[tuple[FakeGitHub, str]]:
    """A second fake API on another port of 127.0.0.1: another origin, which must never see the token."""
    fake = FakeGitHub()
    with serving(fake) as url:
        yield fake, url


def one_line(out: io.StringIO, level: str) -> str:
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"::{level} title=flopbudget"), out.getvalue()
    assert TOKEN not in out.getvalue() and "Traceback" not in out.getvalue()
    return lines[0]


def test_a_read_redirected_to_another_origin_never_carries_the_token(api, elsewhere, tmp_path: Path) -> None:
    fake, url = api
    other, other_url = elsewhere
    fake.redirects["GET"] = (301, other_url)
    out = io.StringIO()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, url), out) == "error"
    assert "redirected to another origin" in one_line(out, "error")
    assert [auth for _, _, auth in other.requests if auth] == []
    assert other.requests == [] and [method for method, _, _ in fake.requests] == ["GET"]


@pytest.mark.parametrize(("method", "status"), [("POST", 302), ("POST", 303), ("PATCH", 307)])
def test_a_redirected_write_is_one_error_and_nothing_written(
    api, elsewhere, tmp_path: Path, method: str, status: int
) -> None:
    """urllib turned a redirected POST into a GET that 'succeeded', and sent the token along to wherever."""
    fake, url = api
    other, other_url = elsewhere
    if method == "PATCH":
        fake.comments.append(
            {"id": 5, "body": f"{MARKER}\nold", "user": {"login": "github-actions[bot]", "type": "Bot"}}
        )
    fake.redirects[method] = (status, other_url)
    before = [dict(comment) for comment in fake.comments]
    out = io.StringIO()
    assert post(f"{MARKER}\nnew\n", github_env(tmp_path, url), out) == "error"
    assert f"the API answered {method} with a redirect (HTTP {status} to " in one_line(out, "error")
    assert other.requests == [] and fake.comments == before


def test_an_answer_trickled_in_byte_by_byte_meets_the_deadline(api, tmp_path: Path) -> None:
    fake, url = api
    fake.comments += [{"id": 10 + i, "body": "x" * 60, "user": {"login": "someone"}} for i in range(20)]
    fake.trickle = 0.2  # every byte comes well within a socket timeout, the whole list of comments in 8 minutes
    out = io.StringIO()
    started = time.monotonic()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, url), out, timeout_s=1) == "notice"
    assert time.monotonic() - started < 60  # a hang guard: the deadline is 1 s, the whole answer 8 minutes
    assert "the GitHub API did not answer within 1 s" in one_line(out, "notice")


@pytest.mark.parametrize(
    "raw",
    [b'{"message": "Moved"}', b"[" * 100_000 + b"]" * 100_000, b"<html>"],
    ids=["not-a-list", "nested-too-deep", "not-json"],
)
def test_a_page_of_comments_it_cannot_read_is_one_notice_and_never_a_second_comment(
    api, tmp_path: Path, raw: bytes
) -> None:
    fake, url = api
    fake.raw = raw
    out = io.StringIO()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, url), out) == "notice"
    one_line(out, "notice")
    assert [method for method, _, _ in fake.requests] == ["GET"]


def test_more_pages_than_it_reads_is_one_notice_and_never_a_second_comment(api, tmp_path: Path) -> None:
    fake, url = api
    fake.comments = [{"id": i, "body": "chat", "user": {"login": "someone"}} for i in range(1, 5_102)]
    out = io.StringIO()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, url), out) == "notice"
    assert "more than 5000 comments" in one_line(out, "notice")
    assert {method for method, _, _ in fake.requests} == {"GET"}


@pytest.mark.parametrize(
    "api_url", ["not a url", "ftp://api.example.com", "http://[::1", "http://api:99999", "https://"]
)
def test_a_malformed_api_url_is_one_error_line(tmp_path: Path, api_url: str) -> None:
    out = io.StringIO()
    assert post(f"{MARKER}\nbody\n", github_env(tmp_path, api_url), out) == "error"
    assert "GITHUB_API_URL: expected an http(s) URL such as https://api.github.com, got " in one_line(out, "error")
