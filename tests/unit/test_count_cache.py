"""CountCache: a record is used only while its key and every fact under it hold; any damage is a miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_flopbudget import count_cache
from pytest_flopbudget.count_cache import CountCache, cache_enabled, entry_key
from pytest_flopbudget.dependencies import Dependencies, file_digest
from pytest_flopbudget.report import Report

TABLE = {"target": "pkg.model:build", "inputs": [[1, 8]], "flops": "10k", "params": "1k"}


def report() -> Report:
    return Report(model="small")  # a Report must add up (totals = sum of layers): an empty one does


def test_ceilings_are_not_part_of_the_key_and_everything_that_counts_is(tmp_path: Path) -> None:
    key = entry_key(TABLE, tmp_path)
    assert entry_key({**TABLE, "flops": "20k", "max-increase": "2%", "max-skipped-ops": 0}, tmp_path) == key
    for changed in ({"inputs": [[2, 8]]}, {"target": "pkg.model:other"}, {"training": True}, {"execution": "real"},
                    {"method": "decode"}):  # fmt: skip
        assert entry_key({**TABLE, **changed}, tmp_path) != key
    assert entry_key(TABLE, tmp_path / "elsewhere") != key


def test_a_saved_count_is_used_until_a_file_it_read_changes(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("WIDTH = 4\n")
    cache = CountCache(tmp_path / ".flopbudget_cache")
    deps = Dependencies(files={str(model): file_digest(str(model))})
    cache.save("k", "small", report(), deps)
    assert cache.lookup("k") == report()
    assert cache.lookup("other-key") is None
    model.write_text("WIDTH = 5\n")
    assert CountCache(tmp_path / ".flopbudget_cache").lookup("k") is None  # the next run (a cache hashes once per run)
    assert (tmp_path / ".flopbudget_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (tmp_path / ".flopbudget_cache" / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55"
    )


@pytest.mark.parametrize(
    "damage",
    ["truncated", "not json", "other format", "other key", "bad report", "bad dependencies", "too big", "directory"],
)
def test_a_damaged_record_is_a_miss(tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CountCache(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    path = cache.path_for("k")
    data = json.loads(path.read_text())
    if damage == "truncated":
        path.write_text(path.read_text()[:40])
    elif damage == "not json":
        path.write_bytes(b"\xff\x00 nonsense")
    elif damage == "other format":
        path.write_text(json.dumps({**data, "format": 99}))
    elif damage == "other key":
        path.write_text(json.dumps({**data, "key": "j"}))
    elif damage == "bad report":
        path.write_text(json.dumps({**data, "report": {"flops": "many"}}))
    elif damage == "bad dependencies":
        path.write_text(json.dumps({**data, "dependencies": {"files": 3}}))
    elif damage == "too big":
        monkeypatch.setattr(count_cache, "MAX_RECORD_BYTES", 10)
    else:
        path.unlink()
        path.mkdir()
    assert cache.lookup("k") is None


def test_an_unwritable_cache_is_one_warning_and_no_partial_file(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    cache = CountCache(blocker / "cache")
    cache.save("k", "small", report(), Dependencies())
    assert cache.write_error is not None and str(blocker / "cache") in cache.write_error
    first = cache.write_error
    cache.save("j", "other", report(), Dependencies())
    assert cache.write_error == first
    assert blocker.read_text() == ""


def test_records_are_written_whole(tmp_path: Path) -> None:
    cache = CountCache(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    assert [p.name for p in cache.records.iterdir()] == ["k.json"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("setting", "env", "expected"),
    [
        (None, {}, True),
        (None, {"CI": "true"}, False),
        (None, {"CI": "false"}, True),
        (None, {"CI": "0"}, True),
        (None, {"FLOPBUDGET_NO_CACHE": "1"}, False),
        (None, {"FLOPBUDGET_NO_CACHE": "0"}, True),
        (True, {"CI": "true"}, True),
        (False, {}, False),
    ],
)
def test_when_the_cache_is_on(setting: bool | None, env: dict[str, str], expected: bool) -> None:
    assert cache_enabled(setting, env) is expected
