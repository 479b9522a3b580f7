"""Baseline files: `.flopbudget/<name>.json`, one full Report per model, committed with the code.

A baseline is what the next run's per-layer diff is computed against, so it must be reviewable in a pull request
(deterministic JSON: sorted keys, 2-space indent, trailing newline), never half-written (temp file + atomic
rename, so parallel writers and an interrupted run leave either the old or the new file), and never replaced
behind the user's back: only an explicit update writes, and a file that is not one of ours is an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

from .errors import BaselineError
from .report import Report
from .source import display_path

SUFFIX = ".json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-\[\]=+,@]")
_MAX_STEM = 150


def baseline_filename(name: str) -> str:
    """A portable file name for model `name`: the name itself when it is safe, else a cleaned name plus a hash.

    The hash keeps distinct names distinct (`a/b` and `a_b` do not share a file).
    """
    stem = _UNSAFE.sub("_", name).lstrip(".")
    if stem != name or not stem or len(stem) > _MAX_STEM:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
        stem = f"{stem[:_MAX_STEM]}-{digest}" if stem else digest
    return stem + SUFFIX


def dumps(report: Report) -> str:
    """The exact text of a baseline file: byte-for-byte reproducible for the same Report."""
    return json.dumps(report.to_dict(), sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def read_baseline(path: str | os.PathLike[str]) -> Report:
    """Load one baseline file; a missing, unreadable, corrupt or foreign file raises `BaselineError`."""
    shown = display_path(os.fspath(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"{shown}: no such baseline file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{shown}: cannot read the baseline: {exc}") from None
    return parse_baseline(text, shown)


def parse_baseline(text: str, shown: str) -> Report:
    """A baseline's text as a Report; `shown` names it in the error (a path, or `REF:path` for a git revision)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{shown}:{exc.lineno}: the baseline is not valid JSON ({exc.msg}); restore it from version control, "
            f"or delete it and write a new one with an explicit update"
        ) from None
    try:
        return Report.from_dict(data)
    except ValueError as exc:
        raise BaselineError(
            f"{shown}: not a pytest-flopbudget baseline ({exc}); move it out of the baseline directory, "
            f"or delete it and write a new one with an explicit update"
        ) from None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same directory and `os.replace`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a committed file should get the usual mode
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
        return self.path_for(name).is_file()

    def display(self, name: str) -> str:
        """How outputs name the baseline of `name`: its path relative to the current directory."""
        return display_path(str(self.path_for(name)))

    def text(self, name: str) -> str | None:
        """The file's exact text, None when there is none (for comparing with another revision)."""
        path = self.path_for(name)
        return _read_text(path) if path.exists() else None

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
        if not path.exists():
            return None
        return read_baseline(path)

    def save(self, name: str, report: Report) -> bool:
        """Write the baseline for `name`; returns False when the file already holds exactly this Report.

        An existing file that is not a valid baseline is left alone and raises `BaselineError`: it may be
        someone else's data, and replacing it silently would lose it.
        """
        path = self.path_for(name)
        text = dumps(report)
        if path.exists():
            if _read_text(path) == text:
                return False
            read_baseline(path)
        write_atomic(path, text)
        return True
