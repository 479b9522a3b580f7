"""Baseline files (deterministic, atomic, never silently replaced) and the per-layer diff."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from pytest_flopbudget.baseline import BaselineStore, baseline_filename, dumps, read_baseline, write_atomic
from pytest_flopbudget.diff import diff_layers, metric_value, top_layers
from pytest_flopbudget.errors import BaselineError
from pytest_flopbudget.report import REPORT_FORMAT, LayerCost, OpCost, PhaseTotals, Report, SkippedOp


def make_report(layers: dict[str, tuple[int, int, int]], **extra: object) -> Report:
    costs = {
        path: LayerCost(flops=f, macs=m, params=p, ops={"aten.mm": OpCost(1, f, m)} if f else {})
        for path, (f, m, p) in layers.items()
    }
    return Report(
        params=sum(p for _, _, p in layers.values()),
        layers=costs,
        forward=PhaseTotals(sum(f for f, _, _ in layers.values()), sum(m for _, m, _ in layers.values())),
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
    names = ["a/b", "a_b", "a:b", "a b", "A_b"]
    assert len({baseline_filename(n) for n in names}) == len(names)


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
        (json.dumps({**json.loads(dumps(REPORT)), "layers": 3}), "malformed field"),
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
