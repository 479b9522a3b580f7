"""Every line this tool prints passes here, so that names from a model cannot act on the terminal or the CI runner.

Names reach the output from places nobody reviews: pyproject keys, torch module names, ONNX node names and op
types written inside a binary file. The GitHub Actions runner treats any stdout line whose trimmed start is `::`
as a workflow command (`::stop-commands::` silences every later annotation) and `##[` anywhere in a line as a
legacy one; terminals act on ANSI escape sequences (`ESC[2J` clears the screen), and bidi controls reorder what a
reviewer reads. So every line is made inert here: control characters are shown escaped (`\\x1b`, `\\u202e`), a
line that would start a command gets its first colon escaped (`\\x3a:stop-commands::...`), and `##[` becomes
`#\\x23[`. Only the GitHub reporter's own, fully escaped workflow commands bypass this, through
`SafeStream.write_command`.
"""

from __future__ import annotations

import re
from typing import Protocol

#: C0 (but tab and newline), DEL, C1, and the bidirectional controls and marks.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """Control characters (not tab or newline, nor those in `keep`) as visible escapes; all else unchanged."""
    if keep:
        return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
    return _CONTROL.sub(_escape, text)


def one_line(text: str) -> str:
    """`visible`, with newlines and tabs escaped too and `##[` broken up: for a name that must stay on one line
    (a node id, which pytest prints inside lines this module never sees)."""
    return visible(text).replace("\n", "\\x0a").replace("\t", "\\x09").replace("##[", "#\\x23[")


def safe_line(line: str) -> str:
    """One line that cannot start a workflow command or drive the terminal."""
    line = visible(line)
    stripped = line.lstrip()
    if stripped.startswith("::"):
        start = len(line) - len(stripped)
        line = line[:start] + "\\x3a" + stripped[1:]
    return line.replace("##[", "#\\x23[")


def json_safe(text: str) -> str:
    """JSON text whose lines `safe_line` leaves as they are, so it stays valid JSON on stdout: `##[` (which
    `safe_line` would break up with a backslash escape JSON does not have) only occurs inside strings and is
    written `#\\u0023[` there. The JSON must be ASCII (`ensure_ascii`), so it holds no control character."""
    return text.replace("##[", "#\\u0023[")


def safe_text(text: str) -> str:
    """`safe_line` for every line of `text` (newlines kept)."""
    return "\n".join(safe_line(line) for line in text.split("\n"))


class TextStream(Protocol):
    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


class SafeStream:
    """A text stream whose every line goes through `safe_line`; `write_command` writes a workflow command the
    caller has escaped itself (the GitHub reporter's annotations)."""

    def __init__(self, stream: TextStream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(safe_text(text))
        return len(text)

    def write_command(self, line: str) -> None:
        self._stream.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty()) if isatty is not None else False

    @property
    def raw(self) -> TextStream:
        return self._stream
