"""The pull-request comment against a fake GitHub REST API (http.server in a thread, no network)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, pull_request_env, serving
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget.reporters.ci import ReportSpec, emit
from pytest_flopbudget.reporters.output import Findings
from pytest_flopbudget.reporters.pr_comment import MARKER, MAX_CHARS, comment_body, post
from pytest_flopbudget.run import RunResult


@pytest.fixture
def api() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()
    with serving(fake) as url:
        yield fake, url


def github_env(tmp_path: Path, url: str, event: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"pull_request": {"number": 7}} if event is None else event), encoding="utf-8")
    return pull_request_env(str(path), url, **extra)


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
    assert [method for method, _, _ in fake.requests] == ["GET", "POST", "GET", "PATCH"]
    assert out.getvalue() == ""


def test_finds_its_comment_on_a_later_page(api, tmp_path: Path) -> None:
    fake, url = api
    fake.comments = [{"id": i, "body": f"chat {i}"} for i in range(1, 151)] + [{"id": 500, "body": f"{MARKER}\nold"}]
    assert post("new\n", github_env(tmp_path, url), io.StringIO()) == "updated"
    assert fake.comments[-1] == {"id": 500, "body": f"{MARKER}\nnew\n"}  # the marker added when missing


def test_the_bots_comment_wins_over_a_pasted_marker(api, tmp_path: Path) -> None:
    fake, url = api
    fake.comments = [
        {"id": 2, "body": f"{MARKER}\npasted", "user": {"login": "someone", "type": "User"}},
        {"id": 3, "body": f"{MARKER}\nold", "user": {"login": "github-actions[bot]", "type": "Bot"}},
    ]
    assert post(f"{MARKER}\nnew\n", github_env(tmp_path, url), io.StringIO()) == "updated"
    assert [c["body"] for c in fake.comments] == [f"{MARKER}\npasted", f"{MARKER}\nnew\n"]


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
