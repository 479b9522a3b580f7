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

What every count of one environment read alike (torch's thousands of files, the installed distributions, the
environment variables its import looked at) is not repeated in every record: a record holds the facts about the
project's files, and names the rest by its sha256, kept once in `shared/<sha256>.json` (`split_shared`). A check
reads and re-checks each such set once however many records name it, so a hit on 200 models costs little more
than 200 small files.

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
from pytest_flopbudget._cache.file_roots import python_roots, under
from pytest_flopbudget._config.budget import NON_METRIC_BUDGET_KEYS
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._report import Report

CACHE_DIR_NAME = ".flopbudget_cache"
#: 2: signed records (`record_signing`); 3: reports in the `report/2` layout (keyed by metric); 4: reports that carry
#: peak memory (a record without it would read as not measured); 5: the facts outside the project in a shared file
FORMAT = 5
#: The sub-directory of a format's records that holds the shared fact sets, one file per sha256.
SHARED_DIR = "shared"
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
        "path": _real_sys_path(),
        "cwd": os.getcwd(),
        "root": str(root),
        "entry": counted,
    }
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


_REAL_SYS_PATH: dict[tuple[object, ...], list[str]] = {}


def _real_sys_path() -> list[str]:
    """`sys.path` with each entry's real path, resolved once per distinct `sys.path` (a check of 200 models asks
    for 400 keys; resolving every entry for each was a fifth of a cache hit). The working directory is part of
    the memo's key, since an entry "" resolves against it."""
    memo_key = (os.getcwd(), *sys.path)
    found = _REAL_SYS_PATH.get(memo_key)
    if found is None:
        found = [os.path.realpath(entry) if isinstance(entry, str) else repr(entry) for entry in sys.path]
        _REAL_SYS_PATH.clear()  # one sys.path at a time: a test that changes it never grows this
        _REAL_SYS_PATH[memo_key] = found
    return list(found)


@dataclass
class CountRecord:
    report: Report
    dependencies: Dependencies
    #: A model with a `curve`: its formula, counted in the same run as the report (under the same facts).
    formula: Formula | None = None
    #: The sha256 of the shared fact set that holds the rest of its facts (`split_shared`), if any.
    shared: str | None = None


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
        #: shared fact set's sha256 -> whether it still holds (None), or why it is no answer (a str, "" for a miss)
        self._shared: dict[str, str | None] = {}
        self._written: set[str] = set()  # shared sets this run wrote (or found there already)

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
        if record.shared is not None:
            problem = self._shared_problem(record.shared)
            if problem is not None:
                return Lookup(untrusted=problem or None)
        return Lookup(record.report, formula=record.formula)

    def _shared_problem(self, digest: str) -> str | None:
        """None when the shared fact set `digest` is there, authentic and still holds; else why not (UNTRUSTED, or
        "" for a plain miss). Read and checked once per run, however many records name it."""
        if digest not in self._shared:
            facts = self.read_shared(digest)
            if isinstance(facts, Dependencies):
                self._shared[digest] = "" if facts.changed(memo=self._memo) is not None else None
            else:
                self._shared[digest] = facts or ""
        return self._shared[digest]

    def read_shared(self, digest: str) -> Dependencies | str | None:
        """The shared fact set `digest`, if it is there, authentic and whole; else why not (a str) or None."""
        if self.key is None or not _is_digest(digest):
            return None
        data = self._read_signed(self.records / SHARED_DIR / f"{digest}.json")
        if not isinstance(data, dict):
            return data
        try:
            if data.get("format") != FORMAT or shared_digest(data["dependencies"]) != digest:
                return None
            return Dependencies.from_dict(data["dependencies"])
        except Exception:  # from another version, or damaged: a miss
            return None

    def _read_signed(self, path: Path) -> dict[str, Any] | str | None:
        """A signed JSON object without its signature; UNTRUSTED when the signature is not this user's; None when
        missing, unreadable, not a regular file, too big or not JSON."""
        try:
            raw = read_regular_file(path, MAX_RECORD_BYTES)
        except OSError:  # missing, unreadable, not a regular file (a FIFO, a device, a directory) or too big
            return None
        try:
            data = json.loads(raw)
        except ValueError:  # truncated or corrupt: recount and overwrite
            return None
        if not isinstance(data, dict):
            return None
        signature = data.pop(SIGNATURE, None)
        if not isinstance(signature, str) or not record_signing.verifies(self.key or b"", canonical(data), signature):
            return UNTRUSTED
        return data

    def read(self, key: str) -> CountRecord | str | None:
        """The record, if it is there, authentic and whole; else why it was not believed (a str), or None."""
        if self.key is None:
            return None
        data = self._read_signed(self.path_for(key))
        if not isinstance(data, dict):
            return data
        try:
            if data.get("format") != FORMAT or data.get("key") != key:
                return None
            formula = Formula.from_dict(data["formula"]) if data.get("formula") is not None else None
            shared = data.get("shared")
            if shared is not None and not _is_digest(shared):
                return None
            dependencies = Dependencies.from_dict(data["dependencies"])
            return CountRecord(Report.from_dict(data["report"]), dependencies, formula, shared)
        except Exception:  # from another version, or our own bug: recount and overwrite
            return None

    def save(
        self, key: str, name: str, report: Report, dependencies: Dependencies, formula: Formula | None = None
    ) -> None:
        """Write a signed record atomically; the first failure is kept in `write_error` and later writes skipped."""
        if self.write_error is not None or self.key is None:
            return
        own, shared = split_shared(dependencies)
        data: dict[str, Any] = {
            "format": FORMAT,
            "key": key,
            "model": name,
            "report": report.to_dict(),
            "dependencies": own.to_dict(),
            "shared": None,
        }
        if formula is not None:  # only for a model with a curve: every other record is as it was
            data["formula"] = formula.to_dict()
        try:
            self._prepare()
            if shared is not None:
                data["shared"] = self._save_shared(shared.to_dict())
            signed = {**data, SIGNATURE: record_signing.sign(self.key, canonical(data))}
            write_atomic(self.path_for(key), json.dumps(signed, sort_keys=True))
        except (OSError, ValueError) as exc:
            self.write_error = f"count cache {self.directory} not written: {exc}"

    def _save_shared(self, facts: dict[str, Any]) -> str:
        """Write the shared fact set `facts` (once: a file of that sha256 that this user signed is already it)
        and return its sha256."""
        digest = shared_digest(facts)
        if digest not in self._written and not isinstance(self.read_shared(digest), Dependencies):
            (self.records / SHARED_DIR).mkdir(exist_ok=True)
            data = {"format": FORMAT, "dependencies": facts}
            signed = {**data, SIGNATURE: record_signing.sign(self.key or b"", canonical(data))}
            write_atomic(self.records / SHARED_DIR / f"{digest}.json", json.dumps(signed, sort_keys=True))
        self._written.add(digest)
        return digest

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


def split_shared(dependencies: Dependencies) -> tuple[Dependencies, Dependencies | None]:
    """(the facts about the project, the rest): the rest is what counts made in one Python environment share, so a
    record names it by its sha256 instead of holding it. The rest is every library file, distribution, environment
    variable and distribution lookup, and every file and listing under the Python installation (site-packages and
    the standard library: the many paths an import probed there) or of this tool itself (a checkout of it, or an
    editable install, is outside site-packages). None when there is nothing to share."""
    libraries, stdlib = python_roots()
    roots = (*libraries, *stdlib, _TOOL_ROOT)
    own = Dependencies(
        files={path: fact for path, fact in dependencies.files.items() if not under(path, roots)},
        listings={path: fact for path, fact in dependencies.listings.items() if not under(path + os.sep, roots)},
        unstable=list(dependencies.unstable),
        uncacheable=dependencies.uncacheable,
    )
    shared = Dependencies(
        files={path: fact for path, fact in dependencies.files.items() if path not in own.files},
        libraries=dict(dependencies.libraries),
        distributions=list(dependencies.distributions),
        listings={path: fact for path, fact in dependencies.listings.items() if path not in own.listings},
        env=dict(dependencies.env),
        distribution_queries=dict(dependencies.distribution_queries),
    )
    return own, (None if shared.to_dict() == Dependencies().to_dict() else shared)


#: This tool's own package directory: every count imports it, wherever it is installed.
_TOOL_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep


def shared_digest(facts: Mapping[str, Any]) -> str:
    """The name of a shared fact set: the sha256 of its canonical JSON."""
    return hashlib.sha256(canonical(facts)).hexdigest()


def _is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
