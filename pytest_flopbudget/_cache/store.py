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

Records are believed only when this user wrote them on this machine (`record_signing`: an HMAC under a key kept
outside the project), so a record committed with `git add -f` or planted by a pull request is a miss that says so.
Only regular files are opened (a FIFO or device in the cache's place is a miss, never a hang).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_flopbudget._atomic_file import read_regular_file, write_atomic
from pytest_flopbudget._cache import signing as record_signing
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._config.budget import NON_METRIC_BUDGET_KEYS
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._report import Report

CACHE_DIR_NAME = ".flopbudget_cache"
#: 2: signed records (`record_signing`); 3: reports in the `report/2` layout (keyed by metric); 4: reports that carry
#: peak memory (a record without it would read as not measured)
FORMAT = 4
#: The key of a record's signature: an HMAC-SHA256 of `canonical(record without it)`.
SIGNATURE = "hmac-sha256"
#: Why a record that is there was not believed (printed as `NAME: cached count not trusted: ...`).
UNTRUSTED = "its record was not written by flopbudget for this user on this machine"
#: Records bigger than this are not read (a hostile or corrupt cache must not cost memory); a miss instead.
MAX_RECORD_BYTES = 64 * 1024 * 1024
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by pytest-flopbudget.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Created by pytest-flopbudget automatically.\n*\n"
#: Keys of a model's table that judge a count but do not change it: editing a ceiling (a model's, a phase's, one at
#: a point of the curve, a degree) must not recount.
CEILING_KEYS = frozenset({*(metric.key for metric in METRICS), *NON_METRIC_BUDGET_KEYS})


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
    from pytest_flopbudget._version import __version__

    counted = {k: v for k, v in table.items() if k not in CEILING_KEYS}
    identity = {
        "format": FORMAT,
        "tool": __version__,
        # a record counted before a metric existed lacks its figure: a new metric is a new key
        "metrics": [str(metric) for metric in METRICS.counted],
        "python": sys.version,
        "executable": sys.executable,
        "flags": list(sys.flags),  # -O / PYTHONOPTIMIZE: `if __debug__:` code and asserts run or not
        "hash seed": os.environ.get("PYTHONHASHSEED"),  # the order of a set of strings (hashed with the rest)
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
    #: A model with a `curve`: its formula, counted in the same run as the report (under the same facts).
    formula: Formula | None = None


@dataclass
class Lookup:
    """What the cache answered for one key: the Report on a hit; on a miss, why a record that was there was not
    believed (`untrusted`), or None when there was none or it was damaged or stale (a plain recount)."""

    report: Report | None = None
    untrusted: str | None = None
    formula: Formula | None = None


class CountCache:
    """The records in one cache directory; every method fails soft (a miss, or a skipped write).

    `key` signs and authenticates records; without one (`record_signing.load_key` failed) nothing is read or
    written and `write_error` says why.
    """

    def __init__(self, directory: Path, key: bytes | None = None, *, key_error: str | None = None) -> None:
        self.directory = directory
        self.records = directory / f"v{FORMAT}"
        self.key = key
        self.write_error: str | None = key_error if key is None else None
        if key is None and key_error is None:
            self.write_error = "count cache off: no key to sign its records"
        self._memo: dict[str, Any] = {}  # library facts, shared by the records checked in one run

    @classmethod
    def for_user(cls, directory: Path, env: Mapping[str, str]) -> CountCache:
        """The cache in `directory`, with this user's signing key (made on first use)."""
        path = record_signing.key_path(env)
        try:
            return cls(directory, record_signing.load_key(path))
        except record_signing.KeyProblem as exc:
            return cls(directory, key_error=f"count cache off: {exc}")

    def path_for(self, key: str) -> Path:
        return self.records / f"{key}.json"

    def lookup(self, key: str) -> Lookup:
        """The cached Report when a trusted record exists and every fact it depends on still holds."""
        record = self.read(key)
        if not isinstance(record, CountRecord):
            return Lookup(untrusted=record)
        if record.dependencies.changed(memo=self._memo) is not None:
            return Lookup()
        return Lookup(record.report, formula=record.formula)

    def read(self, key: str) -> CountRecord | str | None:
        """The record, if it is there, authentic and whole; else why it was not believed (a str), or None."""
        if self.key is None:
            return None
        try:
            raw = read_regular_file(self.path_for(key), MAX_RECORD_BYTES)
        except OSError:  # missing, unreadable, not a regular file (a FIFO, a device, a directory) or too big
            return None
        try:
            data = json.loads(raw)
        except ValueError:  # truncated or corrupt: recount and overwrite
            return None
        if not isinstance(data, dict):
            return None
        signature = data.pop(SIGNATURE, None)
        if not isinstance(signature, str) or not record_signing.verifies(self.key, canonical(data), signature):
            return UNTRUSTED
        try:
            if data.get("format") != FORMAT or data.get("key") != key:
                return None
            formula = Formula.from_dict(data["formula"]) if data.get("formula") is not None else None
            return CountRecord(Report.from_dict(data["report"]), Dependencies.from_dict(data["dependencies"]), formula)
        except Exception:  # from another version, or our own bug: recount and overwrite
            return None

    def save(
        self, key: str, name: str, report: Report, dependencies: Dependencies, formula: Formula | None = None
    ) -> None:
        """Write a signed record atomically; the first failure is kept in `write_error` and later writes skipped."""
        if self.write_error is not None or self.key is None:
            return
        data: dict[str, Any] = {
            "format": FORMAT,
            "key": key,
            "model": name,
            "report": report.to_dict(),
            "dependencies": dependencies.to_dict(),
        }
        if formula is not None:  # only for a model with a curve: every other record is as it was
            data["formula"] = formula.to_dict()
        try:
            signed = {**data, SIGNATURE: record_signing.sign(self.key, canonical(data))}
            self._prepare()
            write_atomic(self.path_for(key), json.dumps(signed, sort_keys=True))
        except (OSError, ValueError) as exc:
            self.write_error = f"count cache {self.directory} not written: {exc}"

    def discard(self, key: str) -> None:
        """Remove the record for `key`, if any: one that must not answer again (a model now uncacheable)."""
        with contextlib.suppress(OSError):
            path = self.path_for(key)
            if stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()

    def _prepare(self) -> None:
        """The directory, ignored by git before any record is in it (also when `--cache-dir` names an existing
        directory, or an earlier first write was interrupted)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
            if not (self.directory / name).is_file():
                write_atomic(self.directory / name, text)
        self.records.mkdir(exist_ok=True)


def canonical(data: Mapping[str, Any]) -> bytes:
    """The bytes a record's signature covers: its JSON with sorted keys, ASCII only, so that reading and writing
    it again gives the same bytes."""
    return json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")
