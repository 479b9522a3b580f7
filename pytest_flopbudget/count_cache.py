"""Counts already made, kept with the facts they depend on, so a commit that touches none of them counts nothing.

A record is keyed by everything that decides a count before any file is read: the tool's version, the Python
build, the platform, `sys.path`, the working directory and the model's entry minus its ceilings (target, inputs,
training, execution, ...). It holds the Report and the `Dependencies` captured while counting; it is used only
when every one of those facts still holds. So a wrong hit needs a changed input that no recorded fact covers,
and the facts cover every file Python opened, listed or probed, every module imported and every environment
variable read.

The cache lives in `.flopbudget_cache/` next to pyproject.toml (like `.pytest_cache` and `.ruff_cache`): it ignores
itself for git (`.gitignore` with `*`) and is marked for backup tools (`CACHEDIR.TAG`). A record that cannot be
read is a miss, never an error; a record that cannot be written is skipped with one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .baseline import write_atomic
from .dependencies import Dependencies
from .report import Report

CACHE_DIR_NAME = ".flopbudget_cache"
FORMAT = 1
#: Records bigger than this are not read (a hostile or corrupt cache must not cost memory); a miss instead.
MAX_RECORD_BYTES = 64 * 1024 * 1024
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by pytest-flopbudget.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Created by pytest-flopbudget automatically.\n*\n"
#: Keys of a model's table that judge a count but do not change it: editing a ceiling must not recount.
CEILING_KEYS = frozenset({"flops", "macs", "params", "max-skipped-ops", "max-increase"})


def cache_enabled(setting: bool | None, env: Mapping[str, str]) -> bool:
    """`--cache/--no-cache` as given, else on except in CI (`CI` set) or with `FLOPBUDGET_NO_CACHE` set.

    CI machines start from a clean checkout, so a cache there only helps if something restores it between jobs, and
    a restored cache is one more thing a gate would have to trust; `--cache` turns it on where that is wanted.
    """
    if setting is not None:
        return setting
    if env.get("FLOPBUDGET_NO_CACHE", "").strip() not in ("", "0"):
        return False
    ci = env.get("CI", "").strip().lower()
    return not ci or ci in ("0", "false", "no")


def entry_key(table: Mapping[str, Any], root: Path) -> str:
    """The cache key of one model's count: its table without ceilings, and the process it would be counted in."""
    from . import __version__

    counted = {k: v for k, v in table.items() if k not in CEILING_KEYS}
    identity = {
        "format": FORMAT,
        "tool": __version__,
        "python": sys.version,
        "executable": sys.executable,
        "platform": [sys.platform, platform.machine()],
        "path": [os.path.realpath(entry) if isinstance(entry, str) else repr(entry) for entry in sys.path],
        "cwd": os.getcwd(),
        "root": str(root),
        "entry": counted,
    }
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass
class CountRecord:
    report: Report
    dependencies: Dependencies


class CountCache:
    """The records in one cache directory; every method fails soft (a miss, or a skipped write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.records = directory / f"v{FORMAT}"
        self.write_error: str | None = None
        self._memo: dict[str, Any] = {}  # library facts, shared by the records checked in one run

    def path_for(self, key: str) -> Path:
        return self.records / f"{key}.json"

    def lookup(self, key: str) -> Report | None:
        """The cached Report when a record exists and every fact it depends on still holds."""
        record = self.read(key)
        if record is None or record.dependencies.changed(memo=self._memo) is not None:
            return None
        return record.report

    def read(self, key: str) -> CountRecord | None:
        path = self.path_for(key)
        try:
            with open(path, "rb") as file:
                raw = file.read(MAX_RECORD_BYTES + 1)
            if len(raw) > MAX_RECORD_BYTES:
                return None
            data = json.loads(raw)
            if data.get("format") != FORMAT or data.get("key") != key:
                return None
            return CountRecord(Report.from_dict(data["report"]), Dependencies.from_dict(data["dependencies"]))
        except Exception:  # missing, truncated, corrupt or from another version: recount and overwrite
            return None

    def save(self, key: str, name: str, report: Report, dependencies: Dependencies) -> None:
        """Write a record atomically; the first failure is kept in `write_error` and later writes are skipped."""
        if self.write_error is not None:
            return
        data = {
            "format": FORMAT,
            "key": key,
            "model": name,
            "report": report.to_dict(),
            "dependencies": dependencies.to_dict(),
        }
        try:
            self._prepare()
            write_atomic(self.path_for(key), json.dumps(data, sort_keys=True))
        except (OSError, ValueError) as exc:
            self.write_error = f"count cache {self.directory} not written: {exc}"

    def _prepare(self) -> None:
        """The directory, ignored by git before any record is in it (also when `--cache-dir` names an existing
        directory, or an earlier first write was interrupted)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
            if not (self.directory / name).is_file():
                write_atomic(self.directory / name, text)
        self.records.mkdir(exist_ok=True)
