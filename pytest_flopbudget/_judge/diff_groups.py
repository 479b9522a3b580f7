"""Repeated blocks of a per-layer diff as one row: `layers.{0..31}.mlp.up x32` instead of 32 identical rows.

A change made to every block of a transformer shows up on every block; listed one by one it fills the table (and
pushes every other change under the "more changed layers" line) while saying one thing. Layers whose paths differ
only in their indices (the grouping of `judge.formula_diff`) and that carry the same change (the same figures
before and after) become one group; everything else, a non-numeric name included, stays a group of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_flopbudget._judge.diff import LayerChange
from pytest_flopbudget._judge.formula_diff import group_label, layer_group


@dataclass(frozen=True)
class ChangeGroup:
    """Layers that changed alike; figures are the group's sums, so the rows of a table still add up to its total."""

    changes: tuple[LayerChange, ...]

    @property
    def label(self) -> str:
        """`layers.{0..31}.mlp.up x32`, or the one layer's path as a single row always showed it."""
        paths = [change.path for change in self.changes]
        if len(paths) == 1:
            return group_label(paths)
        return f"{group_label(paths)} x{len(paths)}"  # ASCII, as the rest of the terminal text

    @property
    def status(self) -> str:
        return self.changes[0].status

    @property
    def baseline(self) -> int | None:
        return None if self.status == "added" else sum(change.baseline or 0 for change in self.changes)

    @property
    def now(self) -> int | None:
        return None if self.status == "removed" else sum(change.now or 0 for change in self.changes)

    @property
    def delta(self) -> int:
        return sum(change.delta for change in self.changes)


def group_changes(changes: Sequence[LayerChange]) -> list[ChangeGroup]:
    """`changes` as groups, largest absolute change (of the whole group) first, as `LayerDiff.changes` is ordered."""
    groups: dict[tuple[str, int | None, int | None], list[LayerChange]] = {}
    for change in changes:
        groups.setdefault((layer_group(change.path), change.baseline, change.now), []).append(change)
    found = [ChangeGroup(tuple(members)) for members in groups.values()]
    found.sort(key=lambda group: (-abs(group.delta), group.changes[0].path))
    return found
