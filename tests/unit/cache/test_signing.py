"""The per-user key that signs count-cache records: made once, private, outside the project; a key that is unsafe or
unusable turns the cache off with one line instead of trusting records."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pytest_flopbudget._cache import signing as record_signing
from pytest_flopbudget._cache.store import CountCache


def test_the_key_is_made_once_private_and_outside_the_project(tmp_path: Path) -> None:
    path = record_signing.key_path({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert path == tmp_path / "xdg" / "flopbudget" / "key"
    key = record_signing.load_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert record_signing.load_key(path) == key
    assert [p.name for p in path.parent.iterdir()] == ["key"]  # no temporary file left
    assert record_signing.key_path({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache" / "flopbudget" / "key"


@pytest.mark.parametrize("problem", ["readable by others", "damaged", "fifo", "directory"])
def test_a_key_that_is_unsafe_or_unusable_turns_the_cache_off_with_one_line(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "flopbudget" / "key"
    path.parent.mkdir()
    if problem == "readable by others":
        path.write_text("ab" * 32 + "\n")
        path.chmod(0o644)
    elif problem == "damaged":
        path.write_text("not hex\n")
        path.chmod(0o600)
    elif problem == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir()
    cache = CountCache.for_user(tmp_path / "cache", {"XDG_CACHE_HOME": str(tmp_path)})
    assert cache.key is None
    assert cache.write_error is not None and cache.write_error.startswith("count cache off: ")
    assert str(path) in cache.write_error and "\n" not in cache.write_error


def test_a_key_that_cannot_be_made_turns_the_cache_off(tmp_path: Path) -> None:
    (tmp_path / "flopbudget").write_text("a file where the key's directory would go")
    cache = CountCache.for_user(tmp_path / "cache", {"XDG_CACHE_HOME": str(tmp_path)})
    assert cache.key is None and f"count cache's key {tmp_path / 'flopbudget' / 'key'}" in (cache.write_error or "")
