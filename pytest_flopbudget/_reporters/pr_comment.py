"""The pull-request comment: the job summary, posted once and then updated in place on every push.

A reviewer reads the pull request, not the job's summary page, so the per-model delta table and the folded
per-layer diffs go into one comment on it. One comment, not one per push: the earlier one, found by its hidden
first line (`MARKER`) and by its author (the token's own identity: a person's comment that starts with the marker
is never ours), is edited (PATCH) instead of a new one being added.

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
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from pytest_flopbudget._atomic_file import read_regular_file, write_atomic
from pytest_flopbudget._reporters import github, markdown
from pytest_flopbudget._reporters.comment_merge import Part, cut, merge
from pytest_flopbudget._reporters.github_api import ApiError, Client, Refused
from pytest_flopbudget._reporters.output import Findings, OutputContext, SupportsWrite

#: The hidden first line by which the comment is found again on the next push: specific to this tool's comment, so
#: that no other tool's is taken for it (and a person's never is: only a comment by the token's own identity is).
MARKER = "<!-- pytest-flopbudget pull-request comment (edited in place by the job; 3f9c2b71) -->"
#: The marker of earlier versions: a comment of the token's identity that starts with it is edited (and moved to
#: `MARKER`) instead of a second one being added.
LEGACY_MARKER = "<!-- pytest-flopbudget -->"
#: Who a token that may not read its own user (the job's `GITHUB_TOKEN`: GET /user is 403) comments as.
ACTIONS_BOT = ("github-actions[bot]", "Bot")
#: GitHub's limit for one comment's body, in characters.
MAX_CHARS = 65_536
#: Kept free under the limit (the marker line, a margin).
_RESERVE = 256
#: Comments listed per request (GitHub's maximum), and the most pages read before giving up the search.
_PER_PAGE = 100
_MAX_PAGES = 50
#: Every call and every answer of one post ends within this many seconds (`flopbudget comment --timeout`).
TIMEOUT_S = 120.0
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
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


def post(body: str, env: Mapping[str, str], stream: SupportsWrite, *, timeout_s: float = TIMEOUT_S) -> str:
    """Create or update the pull request's comment with `body`; returns what was done: `created`, `updated`,
    `skipped` (not a pull request), `notice` (it could not be posted, and one notice line on `stream` says why) or
    `error` (what the API or the environment asked for was refused, and one error line says why).

    Reads GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH (the event's `pull_request.number`) and
    GITHUB_API_URL (default https://api.github.com). Every call and answer ends within `timeout_s` seconds. Never
    raises for the API's sake and never writes the token.
    """
    number = _pull_request_number(env.get("GITHUB_EVENT_PATH", ""))
    if number is None:
        return "skipped"  # a push or a scheduled run: nothing to comment on
    token = env.get("GITHUB_TOKEN", "")
    repository = env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        missing = "GITHUB_TOKEN" if not token else "GITHUB_REPOSITORY"
        return notice(stream, f"no pull-request comment: {missing} is not set; the job summary has the report.")
    if not _REPOSITORY.fullmatch(repository):
        shown = repr(repository[:200])
        return error(stream, f"no pull-request comment: GITHUB_REPOSITORY: expected OWNER/NAME, got {shown}.")
    if body.split("\n", 1)[0].strip() == LEGACY_MARKER:
        body = body.split("\n", 1)[1] if "\n" in body else ""
    if not body.startswith(MARKER):
        body = f"{MARKER}\n{body}"
    if len(body) > MAX_CHARS:
        body = body[: MAX_CHARS - 40].rstrip() + "\n\n_Comment cut at GitHub's limit._\n"
    try:
        client = Client(env.get("GITHUB_API_URL") or "https://api.github.com", token, time.monotonic() + timeout_s)
    except ValueError as exc:
        return error(stream, f"no pull-request comment: GITHUB_API_URL: {exc}.")
    done: list[str | ApiError] = []
    worker = threading.Thread(target=_post, args=(client, repository, number, body, done), daemon=True)
    worker.start()
    worker.join(timeout_s + 1)  # the client's own deadline ends it sooner, unless an answer's head trickles in
    client.cancelled = True
    outcome = done[0] if done else ApiError(0, "out of time")
    if isinstance(outcome, str):
        return outcome
    if isinstance(outcome, Refused):
        return error(stream, f"no pull-request comment: {outcome}.")
    if outcome.status in (401, 403, 404):
        why = (
            f"the job's token may not write to this pull request (HTTP {outcome.status}; a fork's token is "
            "read-only, and the job needs `permissions: pull-requests: write`)"
        )
    elif str(outcome) == "out of time":
        why = f"the GitHub API did not answer within {timeout_s:g} s"
    else:
        why = f"the GitHub API answered {outcome}" if outcome.status else f"the GitHub API call failed ({outcome})"
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


def error(stream: SupportsWrite, message: str) -> str:
    """One `::error::` line on `stream`: something was refused (the comment still never fails the job)."""
    write = getattr(stream, "write_command", stream.write)
    write(github.command("error", message, title=_TITLE) + "\n")
    return "error"


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


def _post(client: Client, repository: str, number: int, body: str, done: list[str | ApiError]) -> None:
    """The calls of one post, in a thread of its own: what was done, or the `ApiError` that stopped it, goes into
    `done`."""
    issues = f"/repos/{repository}/issues"
    try:
        existing = _find_comment(client, f"{issues}/{number}/comments")
        if existing is None:
            client.write("POST", f"{issues}/{number}/comments", {"body": body})
            done.append("created")
        else:
            client.write("PATCH", f"{issues}/comments/{existing}", {"body": body})
            done.append("updated")
    except ApiError as exc:
        done.append(exc)
    except Exception as exc:  # never a traceback for the API's sake: one line says what it was
        done.append(ApiError(0, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"))


def _find_comment(client: Client, path: str) -> int | None:
    """The id of our comment on the pull request, else None: the first whose first line is the marker (or an earlier
    version's) and whose author is the token's own identity (`_identity`), so that a person's comment, or another
    bot's, that starts with the marker is never edited. A page that is not a list, or more pages than `_MAX_PAGES`,
    is an `ApiError`: a comment not looked for to the end is not made twice."""
    identity: tuple[str, str | None] | None = None
    for page in range(1, _MAX_PAGES + 1):
        comments = client.get(f"{path}?per_page={_PER_PAGE}&page={page}")
        if not isinstance(comments, list):
            raise ApiError(0, f"page {page} of the pull request's comments is not a list")
        for comment in comments:
            if not isinstance(comment, dict) or not isinstance(comment.get("id"), int):
                continue
            body = comment.get("body")
            if not isinstance(body, str) or body.split("\n", 1)[0].strip() not in (MARKER, LEGACY_MARKER):
                continue
            identity = identity or _identity(client)  # asked once, and only when some comment has the marker
            if _written_by(comment.get("user"), identity):
                return int(comment["id"])
        if len(comments) < _PER_PAGE:
            return None
    raise ApiError(0, f"the pull request has more than {_MAX_PAGES * _PER_PAGE} comments, not all looked through")


def _identity(client: Client) -> tuple[str, str | None]:
    """(login, type) of whom the token comments as: its user (`GET /user`) for a personal token; the job's token
    (an installation token, which may not read a user: 401, 403 or 404) comments as `ACTIONS_BOT`."""
    try:
        user = client.get("/user")
    except ApiError as exc:
        if isinstance(exc, Refused) or exc.status not in (401, 403, 404):
            raise
        return ACTIONS_BOT
    login = user.get("login") if isinstance(user, dict) else None
    if not isinstance(login, str) or not login:
        raise ApiError(0, "GET /user answered no login")
    kind = user.get("type")
    return login, kind if isinstance(kind, str) else None


def _written_by(user: object, identity: tuple[str, str | None]) -> bool:
    """Whether a comment's `user` is `identity`: the same login (GitHub's logins ignore case), and the same type
    where both say (a person's login cannot hold `[bot]`, but a type that differs is never ours)."""
    if not isinstance(user, dict) or not isinstance(user.get("login"), str):
        return False
    login, kind = identity
    if user["login"].lower() != login.lower():
        return False
    return kind is None or not isinstance(user.get("type"), str) or user["type"] == kind
