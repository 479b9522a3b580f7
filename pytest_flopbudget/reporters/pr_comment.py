"""The pull-request comment: the job summary, posted once and then updated in place on every push.

A reviewer reads the pull request, not the job's summary page, so the per-model delta table and the folded
per-layer diffs go into one comment on it. One comment, not one per push: a hidden marker line
(`<!-- pytest-flopbudget -->`) finds the earlier one, which is edited (PATCH) instead of a new one being added.

Two halves, so that the job's token never sits in the environment of the process that imports the project's
models: `comment:PATH` (`CommentOutput`, a `--report` kind) writes the comment's body to PATH during the check,
and `flopbudget comment PATH` (`cli/comment.py`, then `post` here), in a step of its own, posts it with the
token. Given several bodies (the action's check and its pytest run each write one), it posts one comment holding
them all, each under a heading of its own (`comment_merge`). Posting is best-effort: a missing token, a fork's
read-only token (403), a pull request the token cannot see (404) or an unreachable API give one `::notice::` line
and leave the job summary as the only report; the comment never fails a job. Only the standard library (urllib),
and the token is never printed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_flopbudget.judge.baseline import write_atomic

from ..atomic_file import read_regular_file
from . import github, markdown
from .comment_merge import Part, cut, merge
from .output import Findings, OutputContext, SupportsWrite

#: The hidden first line by which the comment is found again on the next push.
MARKER = "<!-- pytest-flopbudget -->"
#: GitHub's limit for one comment's body, in characters.
MAX_CHARS = 65_536
#: Kept free under the limit (the marker line, a margin).
_RESERVE = 256
#: Comments listed per request (GitHub's maximum), and the most pages read before giving up the search.
_PER_PAGE = 100
_MAX_PAGES = 50
_TIMEOUT_S = 30
#: The most an event payload may hold (GitHub caps a webhook's at 25 MB).
_MAX_EVENT_BYTES = 64 * 1024 * 1024
_TITLE = "flopbudget: pull-request comment"


def comment_body(findings: Findings, workspace: str) -> str:
    """The marker line, then the job summary, cut to fit a comment (UTF-8 bytes are never fewer than
    characters, so a summary under the limit in bytes is under it in characters)."""
    text = markdown.summary_of(findings.result, workspace=workspace, max_bytes=MAX_CHARS - _RESERVE)
    # the summary's truncation note names the summary's limit; here the comment's applies (no-op when uncut)
    text = text.replace("GitHub's 1 MiB limit", "GitHub's limit for a comment")
    return f"{MARKER}\n{text}"


class CommentOutput:
    """`comment:PATH`: the pull-request comment's body, written to PATH for the step that posts it."""

    workspace_variables = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_atomic(Path(path), comment_body(findings, context.root))


class _ApiError(Exception):
    """A request that failed: `status` is the HTTP status, 0 when the API could not be reached."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def post(body: str, env: Mapping[str, str], stream: SupportsWrite) -> str:
    """Create or update the pull request's comment with `body`; returns what was done: `created`, `updated`,
    `skipped` (not a pull request) or `notice` (it could not be posted, and one notice line on `stream` says why).

    Reads GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH (the event's `pull_request.number`) and
    GITHUB_API_URL (default https://api.github.com). Never raises for the API's sake and never writes the token.
    """
    number = _pull_request_number(env.get("GITHUB_EVENT_PATH", ""))
    if number is None:
        return "skipped"  # a push or a scheduled run: nothing to comment on
    token = env.get("GITHUB_TOKEN", "")
    repository = env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        missing = "GITHUB_TOKEN" if not token else "GITHUB_REPOSITORY"
        return notice(stream, f"no pull-request comment: {missing} is not set; the job summary has the report.")
    if not body.startswith(MARKER):
        body = f"{MARKER}\n{body}"
    if len(body) > MAX_CHARS:
        body = body[: MAX_CHARS - 40].rstrip() + "\n\n_Comment cut at GitHub's limit._\n"
    api = env.get("GITHUB_API_URL") or "https://api.github.com"
    base = f"{api.rstrip('/')}/repos/{repository}/issues"
    try:
        existing = _find_comment(f"{base}/{number}/comments", token)
        if existing is None:
            _request("POST", f"{base}/{number}/comments", token, {"body": body})
            return "created"
        _request("PATCH", f"{base}/comments/{existing}", token, {"body": body})
        return "updated"
    except _ApiError as exc:
        if exc.status in (401, 403, 404):
            why = (
                f"the job's token may not write to this pull request (HTTP {exc.status}; a fork's token is "
                "read-only, and the job needs `permissions: pull-requests: write`)"
            )
        else:
            why = f"the GitHub API answered {exc}" if exc.status else f"the GitHub API call failed ({exc})"
        return notice(stream, f"no pull-request comment: {why}; the job summary has the report.")


def with_footer(parts: list[Part], footer: str) -> str:
    """The merged comment, then `footer` (the differential pictures' link) on a line of its own at the very end.

    The footer is added after the bodies were merged and cut, with its room kept free: were it part of a body, a
    cut would drop it first (it is the last line) and hide that body's own truncation note from the merge."""
    line = " ".join(footer.split())  # one line, whatever the step passed
    room = MAX_CHARS - _RESERVE - (len(line) + 2 if line else 0)
    merged = merge(parts, marker=MARKER, max_chars=room)
    if len(parts) == 1 and len(merged) > room:
        merged = cut(merged, room)  # one body is posted as written, unless the footer needs its room
    return f"{merged.rstrip()}\n\n{line}\n" if line else merged


# -- helpers ---------------------------------------------------------------------------------------------------------


def notice(stream: SupportsWrite, message: str) -> str:
    """One `::notice::` line on `stream` (through its `write_command` when it filters every other line)."""
    write = getattr(stream, "write_command", stream.write)
    write(github.command("notice", message, title=_TITLE) + "\n")
    return "notice"


def _pull_request_number(event_path: str) -> int | None:
    """The pull request's number from the event payload (`pull_request` and `pull_request_target` events)."""
    if not event_path:
        return None
    try:  # a regular file only (a FIFO would hang), and JSON nested past the parser's depth is no event
        event = json.loads(read_regular_file(event_path, _MAX_EVENT_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    pull_request = event.get("pull_request") if isinstance(event, dict) else None
    number = pull_request.get("number") if isinstance(pull_request, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _find_comment(url: str, token: str) -> int | None:
    """The id of the comment whose body starts with the marker, else None. A bot's (the job's token posts as
    github-actions[bot]) wins over a person's who pasted the marker, whose comment the token could not edit."""
    found: int | None = None
    for page in range(1, _MAX_PAGES + 1):
        comments = _request("GET", f"{url}?per_page={_PER_PAGE}&page={page}", token)
        if not isinstance(comments, list):
            break
        for comment in comments:
            if not isinstance(comment, dict) or not str(comment.get("body", "")).startswith(MARKER):
                continue
            comment_id = comment.get("id")
            if not isinstance(comment_id, int):
                continue
            user = comment.get("user")
            if isinstance(user, dict) and user.get("type") == "Bot":
                return comment_id
            found = comment_id if found is None else found
        if len(comments) < _PER_PAGE:
            break
    return found


def _request(method: str, url: str, token: str, payload: dict[str, str] | None = None) -> Any:
    """One REST call; the decoded JSON answer. Errors carry the status and reason only, never the token or the
    answer's body."""
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/vnd.github+json")
    request.add_header("X-GitHub-Api-Version", "2022-11-28")
    request.add_header("User-Agent", "pytest-flopbudget")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        raise _ApiError(exc.code, f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise _ApiError(0, str(reason).replace(token, "***")) from None
    try:
        return json.loads(answer) if answer else None
    except ValueError:
        raise _ApiError(0, "an answer that is not JSON") from None
