"""The few GitHub REST calls the pull-request comment makes, with the job's token, and what they refuse.

The token is the one secret this tool ever holds, so the client is strict where urllib is lenient:

* It is sent to the API's origin only (scheme, host and port of `GITHUB_API_URL`). urllib follows a redirect with
  every header the request had, `Authorization` included, wherever it points: here a redirect is never followed by
  urllib. A read (GET) redirected within the API's origin is followed (a renamed repository answers 301); one
  redirected to another origin is refused, and the token is not sent there.
* A write (POST, PATCH) is never redirected: urllib turns a redirected POST into a GET without its body, which
  "succeeds" with nothing written. A redirect on a write is refused (`Refused`).
* One deadline for everything (`Client.deadline`), however slowly an answer trickles in, and a cap on an answer's
  size; an answer that is not JSON, or is nested deeper than the parser goes, is an `ApiError`.

Only the standard library; errors carry the status and a reason, never the token or the answer's body.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

#: Each socket operation waits at most this long (less when the deadline is closer).
_SOCKET_TIMEOUT_S = 30.0
#: The most an answer may hold (a page of 100 comments of at most 65,536 characters each, and their fields).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: Redirects of a read followed, within the API's origin.
_MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)


class ApiError(Exception):
    """A call that failed: `status` is the HTTP status, 0 when there was no usable answer."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


class Refused(ApiError):
    """An answer acted on, the token would go where it must not, or a write would be lost: a redirect on a write,
    a redirect to another origin. Not a hiccup to note but an error to show."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows no redirect: a 3xx answer is an `HTTPError`, which `Client` looks at itself."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """Calls to the API at `api_url` with `token`, all of them before `deadline` (a `time.monotonic()` value)."""

    def __init__(self, api_url: str, token: str, deadline: float) -> None:
        self.base = api_url.rstrip("/")
        self.origin = origin(self.base)
        self._token = token
        self.deadline = deadline
        self._opener = urllib.request.build_opener(_NoRedirects())
        self.cancelled = False

    def get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def write(self, method: str, path: str, payload: dict[str, str]) -> Any:
        return self._call(method, path, json.dumps(payload).encode("utf-8"))

    def _call(self, method: str, path: str, data: bytes | None) -> Any:
        url = f"{self.base}{path}"
        for _ in range(_MAX_REDIRECTS + 1):
            try:
                return _decode(self._send(method, url, data))
            except urllib.error.HTTPError as exc:
                if exc.code not in _REDIRECTS:
                    raise ApiError(exc.code, f"HTTP {exc.code} {exc.reason}") from None
                code, target = exc.code, urllib.parse.urljoin(url, exc.headers.get("Location") or "")
            redirect = f"HTTP {code} to {_shown(target)}"
            if method != "GET":
                raise Refused(code, f"the API answered {method} with a redirect ({redirect}): a write is not resent")
            if origin(target, strict=False) != self.origin:
                raise Refused(code, f"the API redirected to another origin ({redirect}): the token is not sent there")
            url = target
        raise ApiError(0, f"more than {_MAX_REDIRECTS} redirects")

    def _send(self, method: str, url: str, data: bytes | None) -> bytes:
        left = self.deadline - time.monotonic()
        if self.cancelled or left <= 0:
            raise ApiError(0, "out of time")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "pytest-flopbudget")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=min(_SOCKET_TIMEOUT_S, left)) as response:
                chunks: list[bytes] = []
                size = 0
                read = getattr(response, "read1", response.read)  # one socket read at a time: the deadline is kept
                while chunk := read(65536):
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise ApiError(0, f"an answer larger than {MAX_ANSWER_BYTES} bytes")
                    if time.monotonic() > self.deadline:
                        raise ApiError(0, "out of time")
                    chunks.append(chunk)
                return b"".join(chunks)
        except (urllib.error.HTTPError, ApiError):
            raise
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise ApiError(0, str(reason).replace(self._token, "***")) from None
        except Exception as exc:  # http.client's own (a malformed status line, too many headers)
            raise ApiError(0, type(exc).__name__) from None


def origin(url: str, *, strict: bool = True) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL. With `strict`, anything else (the URL of `GITHUB_API_URL`) is a
    `ValueError` saying what is accepted; without, it is an origin no API has."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        if not strict:
            return ("", "", 0)
        raise ValueError(f"expected an http(s) URL such as https://api.github.com, got {_shown(url)}")
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _decode(answer: bytes) -> Any:
    try:
        return json.loads(answer) if answer else None
    except (ValueError, RecursionError):
        raise ApiError(0, "an answer that is not JSON (or nested too deep)") from None


def _shown(url: str) -> str:
    """A URL as an error line shows it: quoted, on one line, at most 200 characters, with no user:password."""
    try:
        parts = urllib.parse.urlsplit(url)
        url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    except ValueError:
        pass
    return repr(url[:200])
