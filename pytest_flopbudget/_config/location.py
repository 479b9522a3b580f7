"""Where a budget, a model or a problem was declared: file, line and key path.

Every front end needs this: the terminal prints `pyproject.toml:12: tool.flopbudget.models.resnet50.flops: ...`,
CI annotations point at the same file and line, and marker budgets point at the test function. Keeping the
location as data (not only inside a message) lets each reporter format it its own way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._safe_text import one_line


class Origin(str, Enum):
    """Which kind of place a `Location` is in, set where the Location is made: outputs that treat a pyproject
    model and a test's model differently (the command that records a baseline) read it, never the file's name or
    the node id."""

    #: `[tool.flopbudget]` in a pyproject.toml.
    PYPROJECT = "pyproject"
    #: A `flop_budget` marker: its line, or one of its arguments (then `Location.marker` is true too).
    MARKER = "marker"
    #: A test function: the model its `flopbudget` fixture counts (with or without a marker).
    TEST = "test"
    #: An option or argument of the `flopbudget` command (`--input`, `--method`, a model named on it).
    COMMAND_LINE = "command line"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Location:
    """A place in the user's files: `file` is absolute (or None), `line` is 1-based, `key` names the setting.

    `key` is a pyproject key path (`tool.flopbudget.models.resnet50.flops`) or a test and marker argument
    (`test_resnet: flop_budget(flops=...)`).
    """

    file: str | None = None
    line: int | None = None
    key: str = ""
    #: For a budget setting, its path below the budget that holds it, as the user wrote it: `("flops",)`,
    #: `("phases", "forward", "flops")`, `("at", 0, "flops")` (an int: the index in a list), `("max-degree", "seq")`
    #: in pyproject.toml; the marker's argument names in a marker (`("max_degree", "seq")`). Empty elsewhere. The
    #: `to accept:` hint names the setting to edit from it.
    slot: tuple[str | int, ...] = ()
    #: Written as an argument of a `flop_budget` marker (else in pyproject.toml or nowhere); its origin is then
    #: `Origin.MARKER`.
    marker: bool = False
    #: Which kind of place this is (pyproject, marker, test, command line); None where nobody said (a Location
    #: made by hand, the default one).
    origin: Origin | None = None

    def __post_init__(self) -> None:
        if self.origin is not None and not isinstance(self.origin, Origin):  # a plain string (from JSON)
            object.__setattr__(self, "origin", Origin(self.origin))
        if self.marker and self.origin is None:
            object.__setattr__(self, "origin", Origin.MARKER)
        elif self.marker and self.origin is not Origin.MARKER:
            raise ValueError(f"a marker argument's location is in a marker, not in {self.origin}")

    def location(self, start: str | None = None) -> str:
        """`pyproject.toml:12`, the path relative to `start` (default: the current directory) when inside it."""
        if not self.file:
            return ""
        path = display_path(self.file, start)
        return f"{path}:{self.line}" if self.line else path

    def where(self, start: str | None = None) -> str:
        """`pyproject.toml:12: tool.flopbudget.models.resnet50.flops`, the prefix of every one-line message."""
        parts = [p for p in (self.location(start), self.key) if p]
        # a key may hold a newline or control characters (a quoted TOML key): the message must stay one line
        return one_line(": ".join(parts))

    def __str__(self) -> str:
        return self.where()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "line": self.line, "key": self.key}
        if self.slot:  # only for a budget setting: every other location's JSON is as it was
            data["slot"] = list(self.slot)
        if self.marker:
            data["marker"] = True
        if self.origin is not None:
            data["origin"] = self.origin.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Location:
        line = data.get("line")
        slot = tuple(part if isinstance(part, int) else str(part) for part in data.get("slot", ()))
        return cls(
            file=data.get("file"),
            line=int(line) if line is not None else None,
            key=str(data.get("key", "")),
            slot=slot,
            marker=bool(data.get("marker", False)),
            origin=Origin(str(data["origin"])) if data.get("origin") is not None else None,
        )


@dataclass(frozen=True)
class Problem:
    """One thing the user has to fix, tied to where it is."""

    source: Location
    message: str

    def __str__(self) -> str:
        where = self.source.where()
        return f"{where}: {self.message}" if where else self.message


class LocatedError(ConfigError):
    """One or more problems in the user's configuration, reported together (one line each).

    Collecting them lets a user fix every typo in one edit instead of one per run; `problems` keeps each
    problem's file and line for reporters that annotate them.
    """

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def display_path(path: str, start: str | None = None) -> str:
    """`path` relative to `start` (default: the current directory) when it is inside it, else unchanged."""
    try:
        base = start or os.getcwd()
        for resolve in (os.path.abspath, os.path.realpath):  # realpath: /tmp vs /private/tmp and other symlinks
            root, absolute = resolve(base), resolve(path)
            if os.path.commonpath([root, absolute]) == root:
                return os.path.relpath(absolute, root)
    except (ValueError, OSError):  # different drives on Windows, or the cwd was removed
        pass
    return path
