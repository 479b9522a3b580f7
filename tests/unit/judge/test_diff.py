"""Per-layer differences between two reports (`judge/diff.py`): what changed where, largest change first."""

from __future__ import annotations

import pytest

from pytest_flopbudget._judge.diff import LayerChange, diff_layers, top_layers
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def report(layers: dict[str, tuple[int, int]]) -> Report:
    """A Report from layer path -> (flops, params); MACs are half the FLOPs, params the sum of the layers'."""
    costs = {path: LayerCost(flops=fl, macs=fl // 2, params=p) for path, (fl, p) in layers.items()}
    total = sum(fl for fl, _ in layers.values())
    return Report(layers=costs, forward=PhaseTotals(flops=total, macs=total // 2))


BEFORE = report({"": (10, 0), "fc1": (100, 5), "act": (8, 0), "fc2": (40, 3)})  # 8 params
AFTER = report({"": (10, 0), "fc1": (400, 20), "fc2": (30, 3), "extra": (12, 6)})  # 29 params


def test_changes_are_sorted_by_size_and_unchanged_layers_left_out() -> None:
    diff = diff_layers(BEFORE, AFTER)
    # fc1 +300, extra +12 (added), fc2 -10, act -8 (removed); the root did not change
    assert [(c.path, c.baseline, c.now, c.delta) for c in diff.changes] == [
        ("fc1", 100, 400, 300),
        ("extra", None, 12, 12),
        ("fc2", 40, 30, -10),
        ("act", 8, None, -8),
    ]
    assert [c.status for c in diff.changes] == ["changed", "added", "changed", "removed"]
    assert (diff.count("added"), diff.count("removed"), diff.count("changed")) == (1, 1, 2)
    # totals: 158 -> 452 FLOPs, +294, 294/158 = 186.07...%
    assert (diff.metric, diff.baseline_total, diff.now_total, diff.delta) == ("flops", 158, 452, 294)
    assert diff.percent == pytest.approx(100 * 294 / 158)


def test_each_metric_is_diffed_on_its_own() -> None:
    macs = diff_layers(BEFORE, AFTER, "macs")
    assert [(c.path, c.delta) for c in macs.changes] == [("fc1", 150), ("extra", 6), ("fc2", -5), ("act", -4)]
    params = diff_layers(BEFORE, AFTER, "params")
    # act has no parameters and fc2 kept its 3: neither is a change in parameters
    assert [(c.path, c.delta) for c in params.changes] == [("fc1", 15), ("extra", 6)]
    assert (params.baseline_total, params.now_total) == (8, 29)


def test_changes_are_ordered_by_size_then_path() -> None:
    diff = diff_layers(report({"b": (1, 0), "a": (1, 0)}), report({"b": (3, 0), "a": (0, 0)}))
    assert [(c.path, c.delta) for c in diff.changes] == [("b", 2), ("a", -1)]  # by size, whatever the sign
    diff = diff_layers(report({"b": (1, 0), "a": (1, 0)}), report({"b": (3, 0), "a": (3, 0)}))
    assert [c.path for c in diff.changes] == ["a", "b"]  # ties on |delta|: by path


def test_percentages_need_a_baseline() -> None:
    assert LayerChange("x", 50, 75).percent == 50.0
    assert LayerChange("x", 50, 25).percent == -50.0
    assert LayerChange("x", None, 10).percent is None  # added
    assert LayerChange("x", 0, 10).percent is None  # nothing to compare with
    assert LayerChange("x", 10, None).delta == -10
    assert diff_layers(report({}), report({"a": (5, 0)})).percent is None


def test_top_splits_the_largest_changes_from_the_rest() -> None:
    shown, rest = diff_layers(BEFORE, AFTER).top(2)
    assert [c.path for c in shown] == ["fc1", "extra"]
    assert [c.path for c in rest] == ["fc2", "act"]


def test_top_layers_ranks_exclusive_costs_and_skips_zeros() -> None:
    now = report({"": (0, 0), "b": (30, 0), "a": (30, 0), "c": (50, 0), "d": (5, 0)})
    assert top_layers(now) == [("c", 50), ("a", 30), ("b", 30), ("d", 5)]
    assert top_layers(now, n=2) == [("c", 50), ("a", 30)]
    assert top_layers(now, "params") == []  # every layer has 0 parameters
