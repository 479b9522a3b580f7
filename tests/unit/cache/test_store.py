"""CountCache: a record is used only while its key and every fact under it hold; any damage is a miss."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from pytest_flopbudget._cache import signing as record_signing
from pytest_flopbudget._cache import store as count_cache
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._cache.digests import file_digest
from pytest_flopbudget._cache.store import CEILING_KEYS, UNTRUSTED, CountCache, cache_enabled, entry_key
from pytest_flopbudget._config.budget import NON_METRIC_BUDGET_KEYS
from pytest_flopbudget._report import Report

TABLE = {"target": "pkg.model:build", "inputs": [[1, 8]], "flops": "10k", "params": "1k"}
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


def cache_in(directory: Path, key: bytes = KEY) -> CountCache:
    return CountCache(directory, key)


def report() -> Report:
    return Report(model="small")  # a Report must add up (totals = sum of layers): an empty one does


def test_ceilings_are_not_part_of_the_key_and_everything_that_counts_is(tmp_path: Path) -> None:
    key = entry_key(TABLE, tmp_path)
    assert entry_key({**TABLE, "flops": "20k", "max-increase": "2%", "max-skipped-ops": 0}, tmp_path) == key
    for changed in ({"inputs": [[2, 8]]}, {"target": "pkg.model:other"}, {"training": True}, {"execution": "real"},
                    {"method": "decode"}):  # fmt: skip
        assert entry_key({**TABLE, **changed}, tmp_path) != key
    assert entry_key(TABLE, tmp_path / "elsewhere") != key


def test_editing_a_phase_budget_does_not_recount(tmp_path: Path) -> None:
    """A generation's per-phase ceilings, the budgets on the curve and warn-increase judge a count: editing them
    keeps the key, so the saved count is a hit (every non-metric budget key is a ceiling key)."""
    generation = {**TABLE, "generate": {"max-new-tokens": 4}, "phases": {"prefill": {"flops": "1M"}}}
    cache = cache_in(tmp_path / ".flopbudget_cache")
    cache.save(entry_key(generation, tmp_path), "small", report(), Dependencies())
    edited = {
        **generation,
        "phases": {"prefill": {"flops": "2M"}, "decode": {"flops": "10k"}},
        "warn-increase": "1%",
        "max-degree": {"seq": 1},
        "at": [{"seq": 64, "flops": "1M"}],
    }
    assert entry_key(edited, tmp_path) == entry_key(generation, tmp_path)
    assert cache_in(tmp_path / ".flopbudget_cache").lookup(entry_key(edited, tmp_path)).report == report()
    assert set(NON_METRIC_BUDGET_KEYS) <= CEILING_KEYS
    assert entry_key({**generation, "generate": {"max-new-tokens": 8}}, tmp_path) != entry_key(generation, tmp_path)


def test_a_saved_count_is_used_until_a_file_it_read_changes(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("WIDTH = 4\n")
    cache = cache_in(tmp_path / ".flopbudget_cache")
    deps = Dependencies(files={str(model): file_digest(str(model))})
    cache.save("k", "small", report(), deps)
    assert cache.lookup("k").report == report()
    assert cache.lookup("other-key").report is None
    model.write_text("WIDTH = 5\n")
    again = cache_in(tmp_path / ".flopbudget_cache").lookup("k")  # the next run (a cache hashes once per run)
    assert again.report is None and again.untrusted is None
    assert (tmp_path / ".flopbudget_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (
        (tmp_path / ".flopbudget_cache" / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )


@pytest.mark.parametrize(
    "damage",
    ["truncated", "not json", "other format", "other key", "bad report", "bad dependencies", "too big", "directory"],
)
def test_a_damaged_record_is_a_miss(tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = cache_in(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    path = cache.path_for("k")
    data = json.loads(path.read_text())
    del data["hmac-sha256"]

    def signed(document: dict[str, object]) -> None:  # damage a valid signature covers: our bug, or another version
        signature = record_signing.sign(KEY, count_cache.canonical(document))
        path.write_text(json.dumps({**document, "hmac-sha256": signature}))

    if damage == "truncated":
        path.write_text(path.read_text()[:40])
    elif damage == "not json":
        path.write_bytes(b"\xff\x00 nonsense")
    elif damage == "other format":
        signed({**data, "format": 99})
    elif damage == "other key":
        signed({**data, "key": "j"})
    elif damage == "bad report":
        signed({**data, "report": {"flops": "many"}})
    elif damage == "bad dependencies":
        signed({**data, "dependencies": {"files": 3}})
    elif damage == "too big":
        monkeypatch.setattr(count_cache, "MAX_RECORD_BYTES", 10)
    else:
        path.unlink()
        path.mkdir()
    assert cache.lookup("k").report is None


def test_an_unwritable_cache_is_one_warning_and_no_partial_file(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    cache = cache_in(blocker / "cache")
    cache.save("k", "small", report(), Dependencies())
    assert cache.write_error is not None and str(blocker / "cache") in cache.write_error
    first = cache.write_error
    cache.save("j", "other", report(), Dependencies())
    assert cache.write_error == first
    assert blocker.read_text() == ""


def test_records_are_written_whole(tmp_path: Path) -> None:
    cache = cache_in(tmp_path)
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


# -- records are believed only when this user wrote them here ----------------------------------------------------------


def test_a_record_signed_with_another_key_is_untrusted_and_says_so(tmp_path: Path) -> None:
    """A record from another machine (another key), or edited by hand, is a miss with a reason, never a hit."""
    CountCache(tmp_path, OTHER_KEY).save("k", "small", report(), Dependencies())
    found = cache_in(tmp_path).lookup("k")
    assert found.report is None and found.untrusted == UNTRUSTED
    cache = cache_in(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    assert cache.lookup("k").report == report()
    path = cache.path_for("k")
    path.write_text(path.read_text().replace('"model": "small"', '"model": "smaIl"'))  # same length, one byte
    assert cache_in(tmp_path).lookup("k") == count_cache.Lookup(None, UNTRUSTED)


def test_an_unsigned_record_is_untrusted(tmp_path: Path) -> None:
    """A record in the old, unsigned shape (what someone could write by hand or commit) is not believed."""
    cache = cache_in(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    path = cache.path_for("k")
    data = json.loads(path.read_text())
    del data["hmac-sha256"]
    path.write_text(json.dumps(data))
    assert cache_in(tmp_path).lookup("k").untrusted == UNTRUSTED


def test_without_a_key_nothing_is_read_or_written(tmp_path: Path) -> None:
    cache = CountCache(tmp_path / "c", key_error="count cache off: the key is damaged")
    cache.save("k", "small", report(), Dependencies())
    assert not (tmp_path / "c").exists()
    assert cache.lookup("k").report is None
    assert cache.write_error == "count cache off: the key is damaged"


def test_a_fifo_in_place_of_a_record_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    cache = cache_in(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    path = cache.path_for("k")
    path.unlink()
    os.mkfifo(path)
    answers: list[object] = []
    worker = threading.Thread(target=lambda: answers.append(cache.lookup("k")), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "lookup blocked on a FIFO"
    assert answers == [count_cache.Lookup()]
    cache.discard("k")  # not a regular file: left alone
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_discard_removes_a_record(tmp_path: Path) -> None:
    cache = cache_in(tmp_path)
    cache.save("k", "small", report(), Dependencies())
    cache.discard("k")
    assert not cache.path_for("k").exists()
    cache.discard("k")  # and nothing there is fine


# -- what every count of one environment read is kept once -----------------------------------------------------------


UNSET = "FLOPBUDGET_TEST_NEVER_SET"


def lookups(cache: CountCache, models: int) -> None:
    """One check's lookups: one cache, a record per model; every one a hit."""
    assert all(cache.lookup(f"k{number}").report is not None for number in range(models))


def environment(tmp_path: Path, size: int) -> Dependencies:
    """What importing a large library reads: `size` library files (their size and mtime), as torch's are."""
    library = tmp_path / f"site-packages-{size}"
    library.mkdir(exist_ok=True)
    facts: dict[str, list[int]] = {}
    for number in range(size):
        path = library / f"m{number}.py"
        path.write_text("")
        facts[str(path)] = [0, path.stat().st_mtime_ns]
    return Dependencies(libraries=facts, env={UNSET: None})


def model_facts(tmp_path: Path, name: str, shared: Dependencies) -> Dependencies:
    model = tmp_path / f"{name}.py"
    if not model.exists():
        model.write_text(f"# {name}\n")
    own = Dependencies(files={str(model): file_digest(str(model))})
    own.merge(shared)
    return own


def test_the_facts_outside_the_project_are_kept_once_for_every_record(tmp_path: Path) -> None:
    shared = environment(tmp_path, 50)
    cache = cache_in(tmp_path / "cache")
    for name in ("a", "b", "c"):
        cache.save(name, name, report(), model_facts(tmp_path, name, shared))
    assert len(list((cache.records / count_cache.SHARED_DIR).iterdir())) == 1
    record = json.loads(cache.path_for("a").read_text())
    assert list(record["dependencies"]["files"]) == [str(tmp_path / "a.py")] and not record["dependencies"]["libraries"]
    fresh = cache_in(tmp_path / "cache")
    reads = []
    read_shared = fresh.read_shared
    fresh.read_shared = lambda digest: reads.append(digest) or read_shared(digest)  # type: ignore[method-assign]
    assert all(fresh.lookup(name).report == report() for name in ("a", "b", "c"))
    assert len(reads) == 1, "the shared facts are read and checked once per run"


def test_a_changed_shared_fact_is_a_miss_for_every_record_that_names_it(tmp_path: Path) -> None:
    shared = environment(tmp_path, 5)
    cache = cache_in(tmp_path / "cache")
    for name in ("a", "b"):
        cache.save(name, name, report(), model_facts(tmp_path, name, shared))
    (tmp_path / "site-packages-5" / "m3.py").write_text("upgraded")
    fresh = cache_in(tmp_path / "cache")
    assert fresh.lookup("a") == count_cache.Lookup() and fresh.lookup("b") == count_cache.Lookup()


@pytest.mark.parametrize("damage", ["removed", "truncated", "another key", "another set"])
def test_a_missing_or_damaged_shared_file_is_a_miss(tmp_path: Path, damage: str) -> None:
    cache = cache_in(tmp_path / "cache")
    cache.save("a", "a", report(), model_facts(tmp_path, "a", environment(tmp_path, 5)))
    (path,) = (cache.records / count_cache.SHARED_DIR).iterdir()
    if damage == "removed":
        path.unlink()
    elif damage == "truncated":
        path.write_text(path.read_text()[:50])
    elif damage == "another key":  # planted: the right content, signed by someone else
        data = json.loads(path.read_text())
        del data[count_cache.SIGNATURE]
        signature = record_signing.sign(OTHER_KEY, count_cache.canonical(data))
        path.write_text(json.dumps({**data, count_cache.SIGNATURE: signature}))
    else:  # this user's own signature over other facts, under this name: not the set the record named
        data = {"format": count_cache.FORMAT, "dependencies": Dependencies(env={"X": None}).to_dict()}
        signature = record_signing.sign(KEY, count_cache.canonical(data))
        path.write_text(json.dumps({**data, count_cache.SIGNATURE: signature}))
    found = cache_in(tmp_path / "cache").lookup("a")
    assert found.report is None
    assert found.untrusted == (UNTRUSTED if damage == "another key" else None)


def test_the_project_files_stay_in_the_record_and_the_installation_is_shared(tmp_path: Path) -> None:
    from pytest_flopbudget._cache.file_roots import python_roots

    library = python_roots()[0][0]
    deps = Dependencies(
        files={str(tmp_path / "model.py"): "ab", library + "absent_probe": "", str(tmp_path / "gone.json"): ""},
        listings={str(tmp_path): "cd", library.rstrip(os.sep): "ef"},
        env={"HOME": None},
    )
    own, shared = count_cache.split_shared(deps)
    assert own.files == {str(tmp_path / "model.py"): "ab", str(tmp_path / "gone.json"): ""}
    assert own.listings == {str(tmp_path): "cd"} and own.env == {}
    assert shared is not None and shared.files == {library + "absent_probe": ""} and shared.env == {"HOME": None}
    assert count_cache.split_shared(Dependencies(files={str(tmp_path / "model.py"): "ab"}))[1] is None


def test_a_hit_costs_per_model_not_per_model_times_what_they_share(tmp_path: Path) -> None:
    """200 models that share an environment of thousands of facts: the lookups grow with the models; 8 times the
    shared facts adds their one check, not one per model (with the facts in every record it took about 8x)."""
    from growth import growth

    def hits(size: int):  # type: ignore[no-untyped-def]
        directory = tmp_path / f"cache-{size}"
        shared = environment(tmp_path, size)
        writer = cache_in(directory)
        for number in range(200):
            writer.save(f"k{number}", f"m{number}", report(), model_facts(tmp_path, f"m{number}", shared))
        return lambda: lookups(cache_in(directory), 200)

    assert growth(hits, 250, factor=8) < 3, "every record re-read the shared facts"


def test_a_hit_grows_linearly_with_the_models(tmp_path: Path) -> None:
    from growth import assert_linear

    shared = environment(tmp_path, 1000)

    def hits(models: int):  # type: ignore[no-untyped-def]
        directory = tmp_path / f"cache-{models}"
        writer = cache_in(directory)
        for number in range(models):
            writer.save(f"k{number}", f"m{number}", report(), model_facts(tmp_path, f"m{number}", shared))
        return lambda: lookups(cache_in(directory), models)

    assert_linear(hits, 25)
