"""A fake GitHub REST API for the pull-request comment: http.server in a thread, no network.

Shared by the comment's unit tests and the end-to-end test of the action's comment step. Importable from any test
module because `tests/conftest.py` puts this directory on `sys.path` (prepend mode).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "ghs_s3cr3t-t0ken-never-printed"
#: Who the job's token comments as.
ACTIONS_BOT = {"login": "github-actions[bot]", "type": "Bot"}
REPOSITORY = "octo/models"
#: The pull request whose comments the fake holds.
NUMBER = 7


class FakeGitHub:
    """Issue comments of pull request 7 in memory; `status` forces every answer (403 for a fork's token).

    What a hostile or broken API does, for the tests of what the poster refuses: `redirects` answers a method with
    that status and a `Location` at another base URL (the same path), `raw` is the body of every list of comments
    (not JSON, not a list, nested too deep), and `trickle` sends every answer one byte at a time, a byte every
    `trickle` seconds.
    """

    def __init__(self) -> None:
        self.comments: list[dict[str, Any]] = [{"id": 1, "body": "LGTM", "user": {"login": "someone"}}]
        self.requests: list[tuple[str, str, str]] = []
        self.status = 0
        self.next_id = 100
        self.redirects: dict[str, tuple[int, str]] = {}
        self.raw: bytes | None = None
        self.trickle = 0.0
        #: Whom the token belongs to: None for the job's own token (an installation's, which GET /user refuses
        #: with 403 and which comments as github-actions[bot]), else a personal token's user.
        self.user: dict[str, str] | None = None

    def handle(self, method: str, path: str, auth: str, payload: Any) -> tuple[int, Any]:
        self.requests.append((method, path, auth))
        if self.status:
            return self.status, {"message": "Resource not accessible by integration"}
        if auth != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials"}
        route, _, query = path.partition("?")
        if route == "/user" and method == "GET":
            return (200, self.user) if self.user else (403, {"message": "Resource not accessible by integration"})
        if route == f"/repos/{REPOSITORY}/issues/{NUMBER}/comments" and method == "GET":
            params = dict(item.split("=") for item in query.split("&") if item)
            page, per_page = int(params.get("page", 1)), int(params.get("per_page", 30))
            return 200, self.comments[(page - 1) * per_page : page * per_page]
        if route == f"/repos/{REPOSITORY}/issues/{NUMBER}/comments" and method == "POST":
            self.next_id += 1
            author = self.user or ACTIONS_BOT
            self.comments.append({"id": self.next_id, "body": payload["body"], "user": dict(author)})
            return 201, self.comments[-1]
        prefix = f"/repos/{REPOSITORY}/issues/comments/"
        if route.startswith(prefix) and method == "PATCH":
            comment = next(c for c in self.comments if c["id"] == int(route[len(prefix) :]))
            comment["body"] = payload["body"]
            return 200, comment
        return 404, {"message": "Not Found"}


@contextmanager
def serving(fake: FakeGitHub) -> Iterator[str]:
    """Serve `fake` on a free local port for the block; yields the API's URL (for GITHUB_API_URL)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(length)) if length else None
            redirect = fake.redirects.get(self.command)
            if redirect is not None:
                fake.requests.append((self.command, self.path, self.headers.get("Authorization", "")))
                self.send_response(redirect[0])
                self.send_header("Location", f"{redirect[1]}{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status, answer = fake.handle(self.command, self.path, self.headers.get("Authorization", ""), payload)
            listing = self.command == "GET" and status == 200 and isinstance(answer, list)
            data = fake.raw if listing and fake.raw is not None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not fake.trickle:
                self.wfile.write(data)
                return
            for index in range(len(data)):  # until the client hangs up
                try:
                    self.wfile.write(data[index : index + 1])
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(fake.trickle)

        do_GET = do_POST = do_PATCH = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def pull_request_env(event_path: str, url: str, **extra: str) -> dict[str, str]:
    """What GitHub gives the comment step on pull request 7 (the event file must hold its number), aimed at the
    fake's `url`."""
    return {
        "GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_EVENT_PATH": event_path,
        "GITHUB_API_URL": url, **extra,
    }  # fmt: skip
