"""`print(report)` shows the per-layer table `flopbudget count` prints; `repr(report)` stays one short line."""

from __future__ import annotations

import pytest

from pytest_flopbudget._render.table import format_layer_table
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report, SkippedOp


def report_of(layers: dict[str, LayerCost], **fields: object) -> Report:
    flops = sum(cost.flops for cost in layers.values())
    macs = sum(cost.macs for cost in layers.values())
    return Report(layers=layers, forward=PhaseTotals(flops=flops, macs=macs), **fields)  # type: ignore[arg-type]


def test_str_is_the_layer_table_at_depth_two() -> None:
    layers = {
        "stem": LayerCost(flops=200, macs=100, params=10),
        "blocks.0.conv": LayerCost(flops=600, macs=300, params=30),
        "blocks.0.conv.inner": LayerCost(flops=100, macs=50, params=5),
        "head": LayerCost(flops=100, macs=50, params=5),
    }
    report = report_of(layers, model="Net")
    text = str(report)
    assert text == format_layer_table(report, depth=2, title="Net (torch, inference)")
    lines = text.splitlines()
    assert lines[0] == "Net (torch, inference)"
    rows = [line.split()[0] for line in lines[3:-3]]
    assert rows == ["(model)", "stem", "blocks", "blocks.0", "head"]  # depth 2: blocks.0.conv is rolled up
    assert lines[4].split() == ["stem", "200", "100", "10", "20.0%"]
    assert lines[-2] == "total: 1,000 FLOPs, 500 MACs, 50 params (1.00 kFLOPs, 500 MACs)"
    assert lines[-1].startswith("skipped ops: none")


def test_str_of_a_training_count_names_its_mode_and_skipped_ops() -> None:
    layers = {"fc": LayerCost(flops=10, macs=5, params=1, skipped={"aten.foo": 2})}
    report = report_of(layers, model="M", backend="onnx", training=True, skipped_ops={"aten.foo": SkippedOp(2, ["fc"])})
    text = str(report)
    assert text.splitlines()[0] == "M (onnx, training step (forward + backward))"
    assert "skipped ops: 2 call(s) not counted, the totals are a lower bound:" in text
    assert "  aten.foo x2 (no formula) in fc" in text


def test_str_makes_hostile_names_inert() -> None:
    report = report_of({"\x1b[2J": LayerCost(flops=1)}, model="::stop-commands::x")
    text = str(report)
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert not any(line.lstrip().startswith("::") for line in text.splitlines())


def test_repr_is_one_short_line_whatever_the_size() -> None:
    layers = {f"blocks.{i}": LayerCost(flops=2, macs=1, params=1) for i in range(10_000)}
    report = report_of(layers, model="Big")
    assert repr(report) == (
        "Report(model='Big', backend='torch', training=False, flops=20000, macs=10000, params=10000, layers=10000)"
    )
    report.skipped_ops = {"aten.foo": SkippedOp(3, [""])}
    assert repr(report).endswith("layers=10000, skipped=3)")
    assert repr(report_of({}, model="a\nb\u202e")) == (
        "Report(model='a\\nb\\u202e', backend='torch', training=False, flops=0, macs=0, params=0, layers=0)"
    )


def test_str_is_drawn_by_the_renderer_the_package_root_plugs_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """report.py imports no presentation: `str()` uses `render.table.report_text`, wired by the package root;
    without a renderer it is the one-line repr."""
    from pytest_flopbudget import _report as report_module
    from pytest_flopbudget._render.table import report_text

    report = report_of({"fc": LayerCost(flops=10, macs=5, params=1)}, model="M")
    assert str(report) == report_text(report)
    monkeypatch.setattr(report_module, "_text_renderer", None)
    assert str(report) == repr(report)


def test_table_takes_a_depth_and_a_title() -> None:
    """`report.table()` is `str(report)`; a depth and a title draw what `flopbudget count --depth` would."""
    from pytest_flopbudget._render.table import format_layer_table

    report = report_of(
        {"enc": LayerCost(flops=10, macs=5, params=1), "enc.fc": LayerCost(flops=6, macs=3, params=1)}, model="M"
    )
    assert report.table() == str(report)
    assert report.table(depth=None, title="== M") == format_layer_table(report, depth=None, title="== M")
    assert report.table(depth=1, title="t") != report.table(depth=None, title="t")
