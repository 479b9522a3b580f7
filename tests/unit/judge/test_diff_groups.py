"""Repeated blocks of a per-layer diff grouped into one row, and only when they changed alike."""

from __future__ import annotations

from pytest_flopbudget._judge.diff import LayerChange
from pytest_flopbudget._judge.diff_groups import group_changes


def test_thirty_two_identical_blocks_are_one_group() -> None:
    changes = [LayerChange(f"layers.{i}.mlp.up", 100, 150) for i in range(32)]
    groups = group_changes(changes)
    assert len(groups) == 1
    (group,) = groups
    assert group.label == "layers.{0..31}.mlp.up x32"
    assert (group.baseline, group.now, group.delta, group.status) == (3200, 4800, 1600, "changed")


def test_blocks_that_changed_differently_stay_apart() -> None:
    changes = [LayerChange(f"h.{i}.attn", 100, 200) for i in range(4)]
    changes += [LayerChange("h.4.attn", 100, 300), LayerChange("h.5.attn", None, 50), LayerChange("h.6.attn", None, 50)]
    labels = {group.label: group for group in group_changes(changes)}
    assert set(labels) == {"h.{0..3}.attn x4", "h.4.attn", "h.{5..6}.attn x2"}
    assert labels["h.{5..6}.attn x2"].baseline is None and labels["h.{5..6}.attn x2"].now == 100
    assert group_changes(changes)[0].label == "h.{0..3}.attn x4"  # the largest group change first


def test_non_numeric_names_and_single_rows_are_untouched() -> None:
    changes = [LayerChange("encoder.conv", 10, 20), LayerChange("decoder.conv", 10, 20), LayerChange("", 5, 6)]
    groups = group_changes(changes)
    assert [g.label for g in groups] == ["decoder.conv", "encoder.conv", "(model)"]
    assert all(len(g.changes) == 1 for g in groups)


def test_a_removed_group_has_no_figure_now() -> None:
    groups = group_changes([LayerChange(f"blocks.{i}.proj", 7, None) for i in (0, 2, 5)])
    assert [(g.label, g.baseline, g.now, g.delta) for g in groups] == [("blocks.{0,2,5}.proj x3", 21, None, -21)]
