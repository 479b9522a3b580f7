"""Line numbers for TOML key paths, so config errors can say `pyproject.toml:12: tool.flopbudget.models.x.flops`.

`tomllib` gives values but no positions. This scanner walks the (already validated) text just far enough to see
table headers, `key =` lines, dotted keys and inline tables, skipping strings, arrays and comments. It never
decides what a value is; that is tomllib's job. If it meets something it does not understand it stops and returns
what it found, because a missing line number must never hide the real error.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

KeyPath = tuple[str, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR_END = re.compile(r"[,\]}\n#]")
#: The body of a multi-line basic string: anything but a backslash escape's start or three quotes in a row.
_ML_BASIC_BODY = re.compile(r'(?:[^"\\]|\\.|"(?!""))*', re.DOTALL)


def locate_keys(text: str) -> dict[KeyPath, int]:
    """Every key path declared in `text` -> the 1-based line where it first appears.

    A table header `[a.b]` records `("a", "b")`; `c = 1` below it records `("a", "b", "c")`; dotted keys and
    inline tables record every level (`d.e = {f = 1}` gives `a.b.d`, `a.b.d.e` and `a.b.d.e.f`). An element of an
    array is under its index, as tomllib's list is: `[[a.at]]`'s second `c = 1` and `at = [{ c = 1 }, { c = 2 }]`'s
    second `c` are both `("a", "at", "1", "c")`.
    """
    scanner = _Scanner(text)
    with contextlib.suppress(IndexError, ValueError):
        scanner.run()
    return scanner.lines


@dataclass(frozen=True)
class Statement:
    """One top-level statement: a `[table]` / `[[array]]` header (`header` is its key path) or a `key = value`
    (`header` is None), from its first line to the line its value ends on (1-based; a multi-line string or array
    spans several)."""

    first_line: int
    last_line: int
    header: KeyPath | None
    array: bool = False


def locate_statements(text: str) -> list[Statement] | None:
    """Every top-level statement of `text` in order, or None when the scanner could not follow the whole text (a
    caller that edits the file by lines must then refuse: it cannot know where a table ends)."""
    scanner = _Scanner(text, strict=True)
    try:
        scanner.run()
    except (IndexError, ValueError):
        return None
    return scanner.statements


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its closest declared ancestor (an array element reports its array's line)."""
    for end in range(len(path), 0, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None


class _Scanner:
    def __init__(self, text: str, strict: bool = False) -> None:
        self.text = text
        self.strict = strict  # stop at anything unexpected after a statement instead of skipping the line
        self.pos = 0
        self.line = 1
        self.lines: dict[KeyPath, int] = {}
        self.statements: list[Statement] = []
        self.arrays: dict[KeyPath, int] = {}  # each array of tables met so far -> the index of its last element

    def run(self) -> None:
        table: KeyPath = ()
        while self._skip_blank(newlines=True):
            char = self.text[self.pos]
            first = self.line
            if char == "[":
                array = self.text.startswith("[[", self.pos)
                self._advance(2 if array else 1)
                header = self._key()
                table = self._in_arrays(header)
                if array:  # `[[a.at]]`: the next element of the array, `a.at.0`, `a.at.1`, ...
                    index = self.arrays.get(table, -1) + 1
                    self.arrays[table] = index
                    self._record(table)
                    table = (*table, str(index))
                self._record(table)
                self._expect("]]" if array else "]")
                self.statements.append(Statement(first, self.line, header, array))
            else:
                self._key_value(table)
                self.statements.append(Statement(first, self.line, None))
            self._end_of_statement()

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
        index = 0
        while True:
            self._skip_blank(newlines=True, comments=True)
            if self.text[self.pos] == "]":
                self._advance(1)
                return
            self._value((*path, str(index)))  # an element's keys under its index, as an array of tables'
            index += 1
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
            if quote == '"':  # `\"""` inside is an escaped quote and two more, not the end
                match = _ML_BASIC_BODY.match(self.text, self.pos + 3)
                end = match.end() if match else self.pos + 3
                if not self.text.startswith(quote * 3, end):
                    raise ValueError("unterminated string")
            else:
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

    def _in_arrays(self, header: KeyPath) -> KeyPath:
        """`header` with the index of the current element after each array of tables it goes through (`[a.at.x]`
        below the second `[[a.at]]` is `a.at.1.x`)."""
        path: KeyPath = ()
        for part in header:
            path = (*path, part)
            if path in self.arrays and len(path) < len(header):
                path = (*path, str(self.arrays[path]))
        return path

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

    def _end_of_statement(self) -> None:
        """After a statement only blanks and a comment may follow on its line; anything else means the scanner
        lost track, and it stops rather than guess."""
        self._skip_blank()
        if self.strict and self.pos < len(self.text) and self.text[self.pos] not in "#\n":
            raise ValueError("expected the end of the line")
        self._skip_line()


def _unescape(raw: str) -> str:
    """Basic-string escapes, enough for keys (`"a\\"b"`); values are never decoded here."""
    if "\\" not in raw:
        return raw
    try:
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return raw
