"""Line numbers for TOML key paths, so config errors can say `pyproject.toml:12: tool.flopbudget.models.x.flops`.

`tomllib` gives values but no positions. This scanner walks the (already validated) text just far enough to see
table headers, `key =` lines, dotted keys and inline tables, skipping strings, arrays and comments. It never
decides what a value is; that is tomllib's job. If it meets something it does not understand it stops and returns
what it found, because a missing line number must never hide the real error.
"""

from __future__ import annotations

import contextlib
import re

KeyPath = tuple[str, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR_END = re.compile(r"[,\]}\n#]")


def locate_keys(text: str) -> dict[KeyPath, int]:
    """Every key path declared in `text` -> the 1-based line where it first appears.

    A table header `[a.b]` records `("a", "b")`; `c = 1` below it records `("a", "b", "c")`; dotted keys and
    inline tables record every level (`d.e = {f = 1}` gives `a.b.d`, `a.b.d.e` and `a.b.d.e.f`).
    """
    scanner = _Scanner(text)
    with contextlib.suppress(IndexError, ValueError):
        scanner.run()
    return scanner.lines


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its closest declared ancestor (an array element reports its array's line)."""
    for end in range(len(path), 0, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.lines: dict[KeyPath, int] = {}

    def run(self) -> None:
        table: KeyPath = ()
        while self._skip_blank(newlines=True):
            char = self.text[self.pos]
            if char == "[":
                array = self.text.startswith("[[", self.pos)
                self._advance(2 if array else 1)
                table = self._key()
                self._record(table)
                self._expect("]]" if array else "]")
            else:
                self._key_value(table)
            self._skip_line()

    # -- statements --------------------------------------------------------------------------------------------

    def _key_value(self, table: KeyPath) -> None:
        path = table + self._key()
        self._record(path)
        self._expect("=")
        self._value(path)

    def _key(self) -> KeyPath:
        parts = [self._simple_key()]
        while self._skip_blank() and self.text[self.pos] == ".":
            self._advance(1)
            parts.append(self._simple_key())
        return tuple(parts)

    def _simple_key(self) -> str:
        self._skip_blank()
        char = self.text[self.pos]
        if char in "\"'":
            return self._string()
        match = _BARE_KEY.match(self.text, self.pos)
        if not match:
            raise ValueError("expected a key")
        self.pos = match.end()
        return match.group()

    # -- values ------------------------------------------------------------------------------------------------

    def _value(self, path: KeyPath) -> None:
        self._skip_blank()
        char = self.text[self.pos]
        if char in "\"'":
            self._string()
        elif char == "[":
            self._array(path)
        elif char == "{":
            self._inline_table(path)
        else:
            match = _SCALAR_END.search(self.text, self.pos)
            self.pos = match.start() if match else len(self.text)

    def _array(self, path: KeyPath) -> None:
        self._advance(1)
        while True:
            self._skip_blank(newlines=True, comments=True)
            if self.text[self.pos] == "]":
                self._advance(1)
                return
            self._value(path)
            self._skip_blank(newlines=True, comments=True)
            if self.text[self.pos] == ",":
                self._advance(1)

    def _inline_table(self, path: KeyPath) -> None:
        self._advance(1)
        while True:
            self._skip_blank(newlines=True, comments=True)
            if self.text[self.pos] == "}":
                self._advance(1)
                return
            self._key_value(path)
            self._skip_blank(newlines=True, comments=True)
            if self.text[self.pos] == ",":
                self._advance(1)

    def _string(self) -> str:
        quote = self.text[self.pos]
        if self.text.startswith(quote * 3, self.pos):
            end = self.text.index(quote * 3, self.pos + 3)
            while self.text.startswith(quote, end + 3):  # up to two quotes may close a multi-line string
                end += 1
            value = self.text[self.pos + 3 : end]
            self._advance(end + 3 - self.pos)
            return value
        start = self.pos + 1
        index = start
        while self.text[index] != quote:
            if quote == '"' and self.text[index] == "\\":
                index += 1
            if self.text[index] == "\n":
                raise ValueError("unterminated string")
            index += 1
        raw = self.text[start:index]
        self._advance(index + 1 - self.pos)
        return _unescape(raw) if quote == '"' else raw

    # -- low level ---------------------------------------------------------------------------------------------

    def _record(self, path: KeyPath) -> None:
        for end in range(1, len(path) + 1):
            self.lines.setdefault(path[:end], self.line)

    def _advance(self, count: int) -> None:
        self.line += self.text.count("\n", self.pos, self.pos + count)
        self.pos += count

    def _expect(self, token: str) -> None:
        self._skip_blank()
        if not self.text.startswith(token, self.pos):
            raise ValueError(f"expected {token!r}")
        self._advance(len(token))

    def _skip_blank(self, newlines: bool = False, comments: bool = False) -> bool:
        """Skip spaces (and newlines and comments when asked); False at the end of the text."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t\r" or (newlines and char == "\n"):
                self._advance(1)
            elif char == "#" and (comments or newlines):
                end = self.text.find("\n", self.pos)
                self._advance((end if end != -1 else len(self.text)) - self.pos)
            else:
                return True
        return False

    def _skip_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self._advance((end + 1 if end != -1 else len(self.text)) - self.pos)


def _unescape(raw: str) -> str:
    """Basic-string escapes, enough for keys (`"a\\"b"`); values are never decoded here."""
    if "\\" not in raw:
        return raw
    try:
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return raw
