"""Baseline files: `.flopbudget/<name>.json`, one full Report per model, committed with the code.

A baseline is what the next run's per-layer diff is computed against, so it must be reviewable in a pull request
(deterministic JSON: sorted keys, 2-space indent, trailing newline), never half-written (temp file + atomic
rename, so parallel writers and an interrupted run leave either the old or the new file), and never replaced
behind the user's back: only an explicit update writes, and a file that is not one of ours is an error.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_flopbudget._atomic_file import FileTooLargeError, NotRegularFileError, read_regular_file, write_atomic
from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._errors import BaselineError
from pytest_flopbudget._judge.versions import with_libraries_of
from pytest_flopbudget._report import Report

if TYPE_CHECKING:
    from pytest_flopbudget._curve.formula import Formula

SUFFIX = ".json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-\[\]=+,@]")
_MAX_STEM = 150
#: How a hashed file name ends; a name that ends so itself is hashed too, so no two names share a file.
_HASHED = re.compile(r"-[0-9a-f]{8}\Z")

#: The most a baseline file may hold: far more than any model's per-layer report, and never /dev/zero's endless
#: stream read into memory.
MAX_BYTES = 64 * 1024 * 1024
#: The deepest nesting of JSON arrays and objects a baseline may have (a report nests 5 deep; `inputs` a few more).
MAX_DEPTH = 64
#: The most digits an integer in a baseline may have (counts are at most 10^30): a 5,000-digit one is refused
#: before Python's int conversion limit, or its quadratic time, is ever reached.
MAX_DIGITS = 40


def baseline_filename(name: str) -> str:
    """A portable file name for model `name`: the name itself when it is safe, else a cleaned name plus a hash.

    Distinct names never share a file: a plain file name is the name itself, and every hashed one ends in `-` and
    8 hex digits, which a name kept plain never does (`a_b-3ec69c85` is hashed, not confused with `a/b`'s file);
    hashed names differ in their cleaned stem or in the hash of the whole name.
    """
    stem = _UNSAFE.sub("_", name).lstrip(".")
    if stem != name or not stem or len(stem) > _MAX_STEM or _HASHED.search(name):
        digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        stem = f"{(stem or '_')[:_MAX_STEM]}-{digest}"
    return stem + SUFFIX


def dumps(report: Report, formula: Formula | None = None) -> str:
    """The exact text of a baseline file: byte-for-byte reproducible for the same Report (and formula).

    A model with a curve keeps its formula next to the Report, under the two keys a count's JSON uses
    (`"formula"`, `"curve"`, which carries its own format): a file without them is a baseline as before, and
    the Report reader ignores them."""
    data = report.to_dict() if formula is None else {**report.to_dict(), **formula.to_dict()}
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def parse_formula(text: str, shown: str) -> Formula | None:
    """The formula a baseline's text keeps, None when it keeps none; a malformed one raises `BaselineError`
    (never read as no formula: the diff of its terms would be silently lost)."""
    from pytest_flopbudget._curve.formula import Formula

    try:
        data = json.loads(text, parse_int=_parse_int)
        if not isinstance(data, dict) or "curve" not in data:
            return None
        return Formula.from_dict(data)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _error(shown, f"its formula cannot be read ({_one_line(exc)}); {_FOREIGN}") from None


def baseline_formula(store: BaselineSource, name: str) -> Formula | None:
    """The formula `store`'s baseline of `name` keeps (the working tree's, or a base ref's), None without one."""
    text = store.text(name)
    return None if text is None else parse_formula(text, store.display(name))


def read_baseline(path: str | os.PathLike[str]) -> Report:
    """Load one baseline file; a missing, unreadable, corrupt or foreign file raises `BaselineError`."""
    shown = display_path(os.fspath(path))
    return parse_baseline(_read_file(path, shown), shown)


def parse_baseline(text: str, shown: str) -> Report:
    """A baseline's text as a Report; `shown` names it in the error (a path, or `REF:path` for a git revision).

    Any text at all gives a Report or a one-line `BaselineError`: too large, too deeply nested, a huge integer,
    a missing field or one of the wrong type (a float, NaN or Infinity where a count belongs) are all refused.
    """
    if len(text) > MAX_BYTES:
        raise _error(shown, f"the baseline is larger than {MAX_BYTES // 2**20} MiB")
    depth = _nesting(text)
    if depth > MAX_DEPTH:
        raise _error(shown, f"the baseline nests arrays and objects {depth} deep (at most {MAX_DEPTH}); {_FOREIGN}")
    try:
        data = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise _error(
            f"{shown}:{exc.lineno}",
            f"the baseline is not valid JSON ({exc.msg}); restore it from version control, "
            f"or delete it and write a new one with an explicit update",
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # _parse_int's error; the nesting check is a backstop
        raise _error(shown, f"not a pytest-flopbudget baseline ({_one_line(exc)}); {_FOREIGN}") from None
    try:
        return Report.from_dict(data)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _error(shown, f"not a pytest-flopbudget baseline ({_one_line(exc)}); {_FOREIGN}") from None


_FOREIGN = "move it out of the baseline directory, or delete it and write a new one with an explicit update"


def _error(shown: str, message: str) -> BaselineError:
    return BaselineError(_one_line(f"{shown}: {message}"))


def _one_line(message: object) -> str:
    return " ".join(str(message).split("\n")).replace("\r", " ")


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits, at most {MAX_DIGITS} allowed")
    return int(digits)


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = str.maketrans({"[": "\x01", "{": "\x01", "]": "\xff", "}": "\xff"})
_NOT_BRACKETS = re.compile(r"[^\x01\xff]+")


def _nesting(text: str) -> int:
    """How deep arrays and objects nest in JSON `text` (brackets inside strings do not count), in linear time and
    without recursion, so that `json.loads` is never asked to recurse 5,000 levels deep."""
    if "[" not in text and "{" not in text:
        return 0
    structure = _STRING.sub("", text.replace("\x01", "").replace("\xff", "")).translate(_BRACKETS)
    steps = _NOT_BRACKETS.sub("", structure).encode("latin-1")
    return max(itertools.accumulate(array.array("b", steps)), default=0)


def _read_file(path: str | os.PathLike[str], shown: str) -> str:
    """The text of a regular file of at most MAX_BYTES: a FIFO, a device (a symlink to /dev/zero), a directory or
    a socket is refused before it is read, and a FIFO is opened without blocking, so nothing hangs."""
    try:
        data = read_regular_file(path, MAX_BYTES)
    except NotRegularFileError:
        raise _error(shown, f"not a regular file; {_FOREIGN}") from None
    except FileTooLargeError:
        raise _error(shown, f"the baseline is larger than {MAX_BYTES // 2**20} MiB; {_FOREIGN}") from None
    except FileNotFoundError:
        raise _error(shown, "no such baseline file") from None
    except OSError as exc:
        raise _error(shown, f"cannot read the baseline: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(shown, f"cannot read the baseline: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_text(path: Path) -> str | None:
    """The file's text, None when it is missing or cannot be read as a baseline (never blocks or reads forever)."""
    try:
        return _read_file(path, "")
    except BaselineError:
        return None


def _present(path: Path, shown: str) -> bool:
    """Whether anything (even a dangling symlink's target aside) is at `path`; an error other than "no such file"
    (permission denied on the directory, a name too long) is a `BaselineError`, not a missing baseline."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise _error(shown, f"cannot read the baseline: {exc.strerror or exc}") from None
    except ValueError as exc:  # an embedded NUL in the directory name
        raise _error(shown, f"cannot read the baseline: {exc}") from None
    return True


class BaselineSource(Protocol):
    """Where baselines are read from: the working tree (`BaselineStore`) or a git revision (`base_ref`)."""

    def load(self, name: str) -> Report | None: ...

    def display(self, name: str) -> str: ...

    def text(self, name: str) -> str | None: ...


class BaselineStore:
    """The baseline directory: look up, load and (on explicit update only) save one Report per model name."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, name: str) -> Path:
        return self.directory / baseline_filename(name)

    def exists(self, name: str) -> bool:
        """Something is at the baseline's path (`load` says what is wrong with it when it is not a baseline)."""
        try:
            return _present(self.path_for(name), self.display(name))
        except BaselineError:  # there, but it cannot even be looked at: `load` says so
            return True

    def display(self, name: str) -> str:
        """How outputs name the baseline of `name`: its path relative to the current directory."""
        return display_path(str(self.path_for(name)))

    def text(self, name: str) -> str | None:
        """The file's exact text, None when there is none (for comparing with another revision)."""
        return _read_text(self.path_for(name))

    def files(self) -> list[str]:
        """Names of the baseline files in the directory (`*.json`), sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.suffix == SUFFIX and p.is_file())

    def remove(self, filename: str) -> None:
        (self.directory / filename).unlink()

    def load(self, name: str) -> Report | None:
        """The saved Report for `name`, None when there is none yet; a bad file raises `BaselineError`."""
        path = self.path_for(name)
        if not _present(path, self.display(name)):
            return None
        return read_baseline(path)

    def save(self, name: str, report: Report, formula: Formula | None = None) -> bool:
        """Write the baseline for `name`; returns False when the file already holds exactly this Report.

        A file in an older layout (`report/1`) that holds exactly this Report, or this Report counted with other
        library versions (`versions`: torch, this tool), is left as it is: an update rewrites a baseline when its
        count changed, never only to change its layout or its versions, so upgrading torch or the tool does not
        touch every committed baseline (its versions then say what last changed the count). An existing file that
        is not a valid baseline is left alone and raises `BaselineError`: it may be someone else's data, and
        replacing it silently would lose it.
        """
        path = self.path_for(name)
        text = dumps(report, formula)
        try:  # a report that would not read back (a count over 10^30) is not written, so every file we write reads
            Report.from_dict(json.loads(text))
        except ValueError as exc:
            raise _error(self.display(name), f"not written: {_one_line(exc)}") from None
        shown = self.display(name)
        if _present(path, shown):
            existing = _read_file(path, shown)  # read once: equal means nothing to do, else it must be ours
            if existing == text:
                return False
            kept = parse_baseline(existing, shown)
            versions = with_libraries_of(kept.versions, report.versions)
            if dumps(replace(kept, versions=versions), parse_formula(existing, shown)) == text:
                return False  # the same count in an older layout, or with other library versions: kept as it is
        write_atomic(path, text)
        return True
