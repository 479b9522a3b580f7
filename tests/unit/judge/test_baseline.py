"""Baseline files (deterministic, atomic, never silently replaced) and the per-layer diff."""

from __future__ import annotations

import json
import os
import string
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._errors import BaselineError
from pytest_flopbudget._judge import baseline as baseline_module
from pytest_flopbudget._judge.baseline import (
    BaselineStore,
    baseline_filename,
    dumps,
    parse_baseline,
    read_baseline,
)
from pytest_flopbudget._judge.diff import diff_layers, metric_value, top_layers
from pytest_flopbudget._judge.verdict import Measurement, judge
from pytest_flopbudget._report import REPORT_FORMAT, EstimatedOp, LayerCost, OpCost, PhaseTotals, Report, SkippedOp
from pytest_flopbudget._run import EXIT_ERROR, Run


def make_report(layers: dict[str, tuple[int, int, int]], **extra: object) -> Report:
    costs = {
        path: LayerCost(flops=f, macs=m, params=p, ops={"aten.mm": OpCost(1, flops=f, macs=m)} if f else {})
        for path, (f, m, p) in layers.items()
    }
    return Report(
        layers=costs,
        forward=PhaseTotals(flops=sum(f for f, _, _ in layers.values()), macs=sum(m for _, m, _ in layers.values())),
        inputs=[{"shape": [1, 8], "dtype": "float32"}],
        versions={"torch": "2.x", "pytest-flopbudget": "0.1.0"},
        **extra,
    )


REPORT = make_report({"": (4, 0, 0), "fc1": (300, 150, 40), "fc2": (50, 25, 6)})


# -- file names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resnet50", "vit-tiny_v2", "tests.test_m.test_a[x-1]", "a=b,c+d@e"])
def test_safe_names_are_kept(name: str) -> None:
    assert baseline_filename(name) == f"{name}.json"


@pytest.mark.parametrize("name", ["a/b", "a\\b", "..", ".hidden", "vit tiny", "ü", "a:b", "", "x" * 300])
def test_unsafe_names_get_a_clean_name_and_a_hash(name: str) -> None:
    filename = baseline_filename(name)
    assert filename.endswith(".json")
    assert "/" not in filename and "\\" not in filename and not filename.startswith(".")
    assert len(filename) < 200


def test_distinct_names_never_share_a_file() -> None:
    names = ["a/b", "a_b", "a:b", "a b", "A_b", "a_b-3ec69c85", "", "..", "_", "-", "ffffffff"]
    names.append(baseline_filename("..").removesuffix(".json"))
    assert len({baseline_filename(n) for n in names}) == len(names)


def test_a_name_that_looks_hashed_gets_its_own_hash() -> None:
    assert baseline_filename("a/b") == "a_b-3ec69c85.json"
    assert baseline_filename("a_b-3ec69c85") != "a_b-3ec69c85.json"
    assert baseline_filename("a_b-3ec69c85").startswith("a_b-3ec69c85-")
    assert baseline_filename("a_b-3ec69c8") == "a_b-3ec69c8.json"  # 7 digits: not a hash, kept
    assert baseline_filename("a_b-3EC69C85") == "a_b-3EC69C85.json"  # upper case: never a hash we write


def test_the_repos_baselines_keep_their_plain_names() -> None:
    committed = sorted((Path(__file__).parents[3] / ".flopbudget").glob("*.json"))
    assert committed
    for path in committed:
        assert baseline_filename(path.stem) == path.name


_SAFE = st.text(alphabet=string.ascii_letters + string.digits + "._-[]=+,@", max_size=12)
_HEX8 = st.text(alphabet="0123456789abcdef", min_size=8, max_size=8)
_NAMES = st.one_of(
    st.text(max_size=20),
    _SAFE,
    st.builds(lambda a, h: f"{a}-{h}", _SAFE, _HEX8),  # looks like a hashed file name
    st.builds(lambda a, b: a + b, _SAFE, st.sampled_from(["/", "\\", ":", " ", "\n", "ü", ".", ".."])),
    st.text(alphabet="ab.", max_size=6),
    st.integers(140, 160).map(lambda n: "x" * n),
)


@settings(max_examples=400, deadline=None)
@given(_NAMES, _NAMES)
def test_baseline_filename_is_injective(a: str, b: str) -> None:
    assume(a != b)
    assert baseline_filename(a) != baseline_filename(b)


@settings(max_examples=300, deadline=None)
@given(_NAMES)
def test_a_file_name_taken_as_a_name_maps_elsewhere(name: str) -> None:
    """The name most likely to be confused with `name`'s file is that file's own stem: it never maps there."""
    filename = baseline_filename(name)
    stem = filename.removesuffix(".json")
    assert stem == name or baseline_filename(stem) != filename
    assert "/" not in filename and "\\" not in filename and not filename.startswith(".") and len(filename) < 200


# -- the file format -------------------------------------------------------------------------------------------


def test_dumps_is_deterministic_sorted_indented_with_trailing_newline() -> None:
    text = dumps(REPORT)
    assert text == dumps(Report.from_dict(json.loads(text)))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.splitlines()[1].startswith('  "')  # 2-space indent
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert json.dumps(data, sort_keys=True, indent=2) + "\n" == text


def test_baseline_holds_the_full_report() -> None:
    data = json.loads(dumps(REPORT))
    assert data["format"] == REPORT_FORMAT
    assert data["totals"] == {"flops": 354, "macs": 175, "params": 46}
    assert set(data["layers"]) == {"", "fc1", "fc2"}
    assert data["inputs"] == [{"dtype": "float32", "shape": [1, 8]}]
    assert data["versions"]["torch"] == "2.x"
    assert {"conventions", "skipped", "forward", "backward", "training", "backend"} <= set(data)


def test_store_round_trip(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "nested" / ".flopbudget")
    assert store.load("m") is None
    assert store.save("m", REPORT) is True
    assert store.exists("m")
    assert store.load("m").to_dict() == REPORT.to_dict()
    assert store.save("m", REPORT) is False  # unchanged: the file is not rewritten
    assert [p.name for p in store.directory.iterdir()] == ["m.json"]  # no temp files left behind


def test_saved_file_gets_the_usual_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        BaselineStore(tmp_path).save("m", REPORT)
    finally:
        os.umask(old)
    assert (tmp_path / "m.json").stat().st_mode & 0o777 == 0o644


def test_corrupt_baseline_is_an_error_naming_the_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ".flopbudget" / "m.json"
    path.parent.mkdir()
    path.write_text('{\n  "format": \n')
    with pytest.raises(BaselineError) as info:
        BaselineStore(tmp_path / ".flopbudget").load("m")
    message = str(info.value)
    assert message.startswith(".flopbudget/m.json:3: the baseline is not valid JSON")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        ('{"format": "someone-else/1"}\n', "format is 'someone-else/1'"),
        ("[1, 2]\n", "must be a JSON object"),
        (json.dumps({**json.loads(dumps(REPORT)), "layers": 3}), "layers must be an object, got 3"),
        (json.dumps({k: v for k, v in json.loads(dumps(REPORT)).items() if k != "totals"}), "missing field 'totals'"),
    ],
)
def test_foreign_baseline_is_an_error(tmp_path: Path, content: str, hint: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match="not a pytest-flopbudget baseline") as info:
        read_baseline(path)
    assert hint in str(info.value)
    assert "m.json" in str(info.value)


@pytest.mark.parametrize("content", ["not json at all", '{"format": "other/1"}\n', ""])
def test_save_never_replaces_a_file_it_cannot_read(tmp_path: Path, content: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(BaselineError):
        BaselineStore(tmp_path).save("m", REPORT)
    assert path.read_text() == content


def test_save_replaces_an_outdated_baseline(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", make_report({"fc1": (1, 1, 1)}))
    assert store.save("m", REPORT) is True
    assert store.load("m").flops == REPORT.flops


def test_interrupted_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.json"
    path.write_text("old\n")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_concurrent_writers_always_leave_a_valid_file(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    reports = [make_report({"fc": (i + 1, i, i)}) for i in range(8)]
    errors: list[BaseException] = []

    def write(report: Report) -> None:
        try:
            for _ in range(10):
                write_atomic(store.path_for("m"), dumps(report))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(r,)) for r in reports]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert store.load("m").to_dict() in [r.to_dict() for r in reports]
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


# -- hostile baselines: each one a one-line BaselineError naming the file, never a crash or a hang ----------------

GOOD: dict[str, Any] = json.loads(
    dumps(
        make_report(
            {"": (4, 0, 0), "fc": (6, 3, 2)},
            skipped_ops={"aten.x": SkippedOp(1, ["fc"])},
            estimated_ops={"aten.nonzero": EstimatedOp(1, ["fc"], "upper bound")},
        )
    )
)
GOOD["layers"]["fc"]["skipped"] = {"aten.x": 1}


def edited(change: Callable[[dict[str, Any]], object]) -> str:
    data = json.loads(json.dumps(GOOD))
    change(data)
    return json.dumps(data)


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], object]:
    def change(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return change


def _drop(path: tuple[str, ...]) -> Callable[[dict[str, Any]], object]:
    return lambda data: _get_in(data, path[:-1]).pop(path[-1])


def _raw(path: tuple[str, ...], token: str) -> str:
    """GOOD with the value at `path` written as `token`, which json.dumps would not write (`1e400`, a huge int)."""
    return edited(_set(path, "X")).replace('"X"', token)


def _get_in(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


HOSTILE_TEXTS = {
    "no totals": (edited(_drop(("totals",))), "missing field 'totals'"),
    "no totals.flops": (edited(_drop(("totals", "flops"))), "missing field 'totals.flops'"),
    "no layer macs": (
        edited(_drop(("layers", "fc", "metrics", "macs"))),
        "missing field \"layers['fc'].metrics.macs\"",
    ),
    "totals a list": (edited(_set(("totals",), [1, 2])), "totals must be an object, got an array"),
    "string total": (edited(_set(("totals", "flops"), "6")), "totals.flops must be an integer from 0 to 10^30, got"),
    "bool count": (edited(_set(("layers", "fc", "metrics", "params"), True)), "layers['fc'].metrics.params must be"),
    "float count": (edited(_set(("forward", "macs"), 3.0)), "forward.macs must be an integer from 0 to 10^30"),
    "negative": (edited(_set(("layers", "fc", "ops", "aten.mm", "calls"), -1)), "ops['aten.mm'].calls must be"),
    "over 10^30": (edited(_set(("backward", "flops"), 10**30 + 1)), "backward.flops must be an integer from 0"),
    "1e400": (_raw(("totals", "flops"), "1e400"), "totals.flops must be an integer from 0 to 10^30, got inf"),
    "Infinity": (_raw(("totals", "macs"), "Infinity"), "got inf"),
    "-Infinity": (_raw(("layers", "fc", "metrics", "flops"), "-Infinity"), "got -inf"),
    "NaN": (_raw(("layers", "fc", "skipped", "aten.x"), "NaN"), "got nan"),
    "5000 digits": (_raw(("totals", "params"), "9" * 5000), "an integer of 5000 digits"),
    "5000 digits in inputs": (_raw(("inputs",), "1" * 5000), "an integer of 5000 digits"),
    "arrays 5000 deep": (_raw(("inputs",), "[" * 5000 + "]" * 5000), "5001 deep"),
    "objects 100000 deep": ('{"a":' * 100_000 + "1" + "}" * 100_000, "100000 deep (at most 64)"),
    "unclosed 5000 deep": ("[" * 5000, "5000 deep"),
    "reason a number": (edited(_set(("skipped", "aten.x", "reason"), 5)), "skipped['aten.x'].reason must be a string"),
    "layer name a number": (edited(_set(("skipped", "aten.x", "layers"), [1])), "skipped['aten.x'].layers[0] must be"),
    "estimated a list": (edited(_set(("estimated",), [])), "estimated must be an object, got an array"),
    "rule missing": (edited(_drop(("estimated", "aten.nonzero", "rule"))), "field \"estimated['aten.nonzero'].rule"),
    "training a string": (edited(_set(("training",), "no")), "training must be true or false, got 'no'"),
    "train_mode 1": (edited(_set(("train_mode",), 1)), "train_mode must be true or false, got 1"),
    "version a number": (edited(_set(("versions", "torch"), 2)), "versions['torch'] must be a string, got 2"),
    "inputs an object": (edited(_set(("inputs",), {})), "inputs must be an array, got an object"),
    "layers a string": (edited(_set(("layers",), "x" * 1000)), "layers must be an object, got 'xxxx"),
    "format a control": (edited(_set(("format",), "\x1b[2J\n::stop")), "format is '\\x1b[2J\\n::stop'"),
    "a layer named with a newline": (edited(_set(("layers", "a\nb"), 3)), "layers['a\\nb'] must be an object, got 3"),
    "total not the sum": (
        edited(_set(("layers", "fc", "metrics", "params"), 3)),
        "total params 2 is not the sum of its layers",
    ),
    "unknown metric": (edited(_set(("layers", "fc", "metrics", "bytes"), 3)), "metrics has an unknown metric 'bytes'"),
    "op without metrics": (edited(_drop(("layers", "fc", "ops", "aten.mm", "metrics"))), "ops['aten.mm'].metrics\""),
}


@pytest.mark.parametrize(("text", "hint"), HOSTILE_TEXTS.values(), ids=list(HOSTILE_TEXTS))
def test_hostile_baseline_is_one_line_naming_the_file(tmp_path: Path, text: str, hint: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        read_baseline(path)
    message = str(info.value)
    assert message.startswith(str(path) + ":") and "\n" not in message and "\r" not in message
    assert hint in message
    assert len(message) < 400
    with pytest.raises(BaselineError):
        BaselineStore(tmp_path).save("m", REPORT)  # a corrupt file is never replaced
    assert path.read_text() == text


def test_the_good_baseline_of_those_tests_reads() -> None:
    report = parse_baseline(json.dumps(GOOD), "m.json")
    assert report.to_dict() == GOOD


def test_invalid_json_names_its_line() -> None:
    with pytest.raises(BaselineError, match=r"^m.json:2: the baseline is not valid JSON"):
        parse_baseline('{\n "a": nope}', "m.json")


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = edited(_set(("versions", "x"), "[" * 5000 + '\\"{' * 100))
    assert parse_baseline(text, "m.json").versions["x"].startswith("[[[")


def _within(seconds: float, call: Callable[[], object]) -> object:
    """`call()` in a daemon thread: a hang fails the test instead of the suite."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert box, f"still running after {seconds} s"
    return box[0]


def special_file(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling-loop":
        path.symlink_to(path)


SPECIAL = ["fifo", "dev-zero", "directory", "dangling-loop"]


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX special files")
@pytest.mark.parametrize("kind", SPECIAL)
def test_special_files_are_refused_without_reading_or_hanging(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "m.json"
    special_file(kind, path)
    store = BaselineStore(tmp_path)
    assert store.exists("m")
    for call in (lambda: store.load("m"), lambda: store.save("m", REPORT), lambda: read_baseline(path)):
        error = _within(60, call)
        assert isinstance(error, BaselineError), error
        assert str(error).startswith(str(path) + ":") and "\n" not in str(error)
    assert _within(60, lambda: store.text("m")) is None
    assert not path.is_file()  # still the special file: never replaced


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baseline_module, "MAX_BYTES", 1000)
    path = tmp_path / "m.json"
    path.write_text(dumps(REPORT) + " " * 2000)
    with pytest.raises(BaselineError, match="larger than"):
        read_baseline(path)
    with pytest.raises(BaselineError, match="larger than"):
        parse_baseline(path.read_text(), "m.json")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(BaselineError, match="not UTF-8"):
        read_baseline(path)


def test_a_report_that_would_not_read_back_is_not_written(tmp_path: Path) -> None:
    huge = make_report({"fc": (10**31, 1, 1)})
    with pytest.raises(BaselineError, match="not written"):
        BaselineStore(tmp_path).save("m", huge)
    assert not (tmp_path / "m.json").exists()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_FIELDS = [
    (), ("format",), ("totals",), ("totals", "flops"), ("totals", "params"), ("forward",), ("forward", "macs"),
    ("backward", "flops"), ("layers",), ("layers", "fc"), ("layers", "fc", "flops"), ("layers", "fc", "ops"),
    ("layers", "fc", "ops", "aten.mm"), ("layers", "fc", "ops", "aten.mm", "calls"), ("layers", "fc", "skipped"),
    ("layers", "fc", "skipped", "aten.x"), ("skipped",), ("skipped", "aten.x"), ("skipped", "aten.x", "layers"),
    ("skipped", "aten.x", "reason"), ("estimated",), ("estimated", "aten.nonzero", "calls"), ("training",),
    ("train_mode",), ("backend",), ("model",), ("inputs",), ("conventions",), ("conventions", "mac"), ("versions",),
    ("versions", "torch"),
]  # fmt: skip


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_FIELDS), _JSON, st.booleans())
def test_any_json_value_in_any_field_is_a_report_or_a_baseline_error(
    field: tuple[str, ...], value: object, drop: bool
) -> None:
    data: Any = json.loads(json.dumps(GOOD))
    if not field:
        data = value
    elif drop:
        _get_in(data, field[:-1]).pop(field[-1], None)
    else:
        _get_in(data, field[:-1])[field[-1]] = value
    text = json.dumps(data)  # floats: inf and nan are written as Infinity and NaN
    try:
        report = parse_baseline(text, "m.json")
    except BaselineError as exc:
        assert str(exc).startswith("m.json") and "\n" not in str(exc)
    else:
        assert parse_baseline(dumps(report), "m.json").to_dict() == report.to_dict()
        assert all(type(n) is int and 0 <= n <= 10**30 for n in (report.flops, report.macs, report.params))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{}",:0123456789.eE-+ \\naNIfinity', max_size=60) | st.text(max_size=40))
def test_any_text_is_a_report_or_a_baseline_error(text: str) -> None:
    try:
        parse_baseline(text, "m.json")
    except BaselineError as exc:
        assert "\n" not in str(exc)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.integers() | st.text(alphabet='[]{}"\\\\ab', max_size=6),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\\\', max_size=3), inner),
        max_leaves=20,
    )
)
def test_the_nesting_scan_agrees_with_the_parsed_depth(value: object) -> None:
    assert baseline_module._nesting(json.dumps(value)) == _depth(value)


# -- one bad baseline fails its own model only ------------------------------------------------------------------


def _measurement(name: str, macs: int) -> Measurement:
    report = Report(layers={"fc": LayerCost(flops=2 * macs, macs=macs)}, forward=PhaseTotals(flops=2 * macs, macs=macs))
    return Measurement(name, report, parse_budget({"macs": "1k"}, {}, Location(key=name)), Location(key=name), None)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "5000 digits", "arrays 5000 deep", "no totals", "1e400"])
def test_one_hostile_baseline_fails_only_its_own_model(tmp_path: Path, kind: str) -> None:
    store = BaselineStore(tmp_path)
    hostile = tmp_path / "bad.json"
    if kind in SPECIAL:
        special_file(kind, hostile)
    else:
        hostile.write_text(HOSTILE_TEXTS[kind][0])
    verdict = _within(60, lambda: judge(_measurement("bad", 5), store))
    assert not isinstance(verdict, BaseException), verdict
    run = Run(store, update=True)
    run.record(_measurement("bad", 5))
    run.record(_measurement("good", 5))
    result = _within(20, run.finish)
    assert not isinstance(result, BaseException), result
    assert result.written == ["good"] and store.load("good") is not None
    (error,) = result.update_errors
    assert "'bad'" in error and str(hostile) in error and "\n" not in error
    assert result.exit_code == EXIT_ERROR
    check = Run(store)
    check.record(_measurement("bad", 5))
    check.record(_measurement("good", 5))
    judged = check.finish()
    assert [v.name for v in judged.unreadable] == ["bad"]
    assert judged.exit_code == EXIT_ERROR


# -- the per-layer diff ----------------------------------------------------------------------------------------


def test_diff_lists_changed_added_and_removed_largest_first() -> None:
    baseline = make_report({"": (4, 0, 0), "a": (100, 50, 10), "b": (10, 5, 1), "gone": (30, 15, 3), "same": (7, 3, 1)})
    now = make_report({"": (4, 0, 0), "a": (300, 150, 10), "b": (5, 2, 1), "new": (30, 15, 3), "same": (7, 3, 1)})
    diff = diff_layers(baseline, now, "flops")
    assert [(c.path, c.status, c.baseline, c.now, c.delta) for c in diff.changes] == [
        ("a", "changed", 100, 300, 200),
        ("gone", "removed", 30, None, -30),
        ("new", "added", None, 30, 30),
        ("b", "changed", 10, 5, -5),
    ]
    assert diff.changes[0].percent == pytest.approx(200.0)
    assert diff.changes[2].percent is None
    assert (diff.baseline_total, diff.now_total, diff.delta) == (151, 346, 195)
    assert diff.count("added") == 1 and diff.count("removed") == 1
    shown, rest = diff.top(2)
    assert [c.path for c in shown] == ["a", "gone"] and [c.path for c in rest] == ["new", "b"]


def test_diff_on_params_and_skipped() -> None:
    baseline = make_report({"a": (1, 1, 10)})
    now = make_report({"a": (1, 1, 12)}, skipped_ops={"aten.x": SkippedOp(3, ["a"])})
    now.layers["a"].skipped["aten.x"] = 3
    assert [(c.path, c.delta) for c in diff_layers(baseline, now, "params").changes] == [("a", 2)]
    assert [(c.path, c.delta) for c in diff_layers(baseline, now, "skipped").changes] == [("a", 3)]
    assert metric_value(now, "skipped") == 3
    assert diff_layers(baseline, baseline, "flops").changes == ()


def test_top_layers_and_unknown_metric() -> None:
    assert top_layers(REPORT, "flops", 2) == [("fc1", 300), ("fc2", 50)]
    assert REPORT.layer_metric("macs")["fc2"] == 25
    with pytest.raises(ValueError, match="unknown metric"):
        metric_value(REPORT, "gflops")


# -- a curve model's baseline keeps its formula ----------------------------------------------------------------------


def _formula(attn: str = "140*seq**2") -> Any:
    from pytest_flopbudget._curve.formula import Formula, Holds
    from pytest_flopbudget._curve.polynomial import parse
    from pytest_flopbudget._metrics import FLOPS

    dims = ("seq",)
    return Formula(
        dims=dims,
        totals={FLOPS: parse(f"{attn} + 64*seq", dims)},
        layers={"h.0.attn": {FLOPS: parse(attn, dims)}, "head": {FLOPS: parse("64*seq", dims)}},
        holds=Holds(step={"seq": 1}, ranges={"seq": (16, 512)}, samples=9, verified=6),
        point={"seq": 128},
    )


def test_a_baseline_keeps_the_formula_and_reads_it_back(tmp_path: Path) -> None:
    from pytest_flopbudget._judge.baseline import baseline_formula

    store = BaselineStore(tmp_path)
    report = make_report({"h.0.attn": (100, 50, 0)})
    assert store.save("gpt", report, _formula())
    data = json.loads(store.path_for("gpt").read_text())
    assert data["formula"] == {"flops": "140*seq**2 + 64*seq"}
    assert data["curve"]["layers"]["h.0.attn"] == {"flops": "140*seq**2"}
    assert store.load("gpt").to_dict() == report.to_dict()  # the Report reader ignores the formula's keys
    assert baseline_formula(store, "gpt").to_dict() == _formula().to_dict()
    assert not store.save("gpt", report, _formula())  # the same count and formula: nothing to write
    assert store.save("gpt", report, _formula("280*seq**2"))  # a changed formula is a changed baseline


def test_an_old_baseline_without_a_formula_reads_as_none(tmp_path: Path) -> None:
    from pytest_flopbudget._judge.baseline import baseline_formula

    store = BaselineStore(tmp_path)
    store.save("gpt", make_report({"a": (1, 1, 1)}))
    assert "curve" not in json.loads(store.path_for("gpt").read_text())
    assert baseline_formula(store, "gpt") is None
    assert baseline_formula(store, "missing") is None


def test_a_malformed_formula_in_a_baseline_is_an_error_naming_the_file(tmp_path: Path) -> None:
    from pytest_flopbudget._judge.baseline import baseline_formula

    store = BaselineStore(tmp_path)
    store.save("gpt", make_report({"a": (1, 1, 1)}), _formula())
    path = store.path_for("gpt")
    path.write_text(path.read_text().replace('"140*seq**2 + 64*seq"', '"__import__(1)"'))
    with pytest.raises(BaselineError, match=r"gpt\.json: its formula cannot be read"):
        baseline_formula(store, "gpt")


def test_judge_compares_a_formula_with_the_baseline_formula(tmp_path: Path) -> None:
    from pytest_flopbudget._judge.verdict import FindingKind

    store = BaselineStore(tmp_path)
    report = make_report({"h.0.attn": (100, 50, 0)})
    store.save("gpt", report, _formula())
    measurement = Measurement("gpt", report, formula=_formula("280*seq**2"))
    verdict = judge(measurement, store)
    assert verdict.baseline_formula is not None
    assert [f.message for f in verdict.findings if f.kind == FindingKind.FORMULA] == [
        "FLOPs formula changed: seq**2 term of h.0.attn +100.0%"
    ]
    assert Measurement.from_dict(measurement.to_dict()).formula.to_dict() == _formula("280*seq**2").to_dict()


# -- versions ---------------------------------------------------------------------------------------------------


def test_the_baseline_records_the_versions_it_was_counted_with(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", REPORT)
    assert json.loads(store.path_for("m").read_text())["versions"] == {"pytest-flopbudget": "0.1.0", "torch": "2.x"}


def test_new_library_versions_alone_do_not_rewrite_a_baseline(tmp_path: Path) -> None:
    """Upgrading torch or this tool does not touch every committed baseline: the count is the same."""
    store = BaselineStore(tmp_path)
    store.save("m", REPORT)
    before = store.path_for("m").read_text()
    upgraded = make_report({"": (4, 0, 0), "fc1": (300, 150, 40), "fc2": (50, 25, 6)})
    upgraded.versions = {"torch": "2.y", "pytest-flopbudget": "0.2.0", "transformers": "5.0.0"}
    assert store.save("m", upgraded) is False
    assert store.path_for("m").read_text() == before
    grown = make_report({"": (4, 0, 0), "fc1": (600, 300, 40), "fc2": (50, 25, 6)})
    grown.versions = upgraded.versions
    assert store.save("m", grown) is True  # a count that moved is written with the versions it was counted with
    assert store.load("m").versions == upgraded.versions


def test_how_it_was_counted_is_not_a_library_version(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("m", REPORT)
    real = make_report({"": (4, 0, 0), "fc1": (300, 150, 40), "fc2": (50, 25, 6)})
    real.versions = {**REPORT.versions, "execution": "real"}
    assert store.save("m", real) is True
