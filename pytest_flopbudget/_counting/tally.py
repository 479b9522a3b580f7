"""What a count accumulates, for both backends: costs per layer and phase, skipped ops and estimated ops.

A backend prices each op (a `Cost`, or the reason it cannot be priced) and hands it to one `Tally`, whose fields
are those a `Report` is built from (`report_fields()`). The ONNX backend also tallies each subgraph (an `If`
branch, a loop body, a function body) on its own and merges it into its parent, `times` over for a loop.

The skip reasons that every backend gives in the same words are the constants below; the JSON of a report holds
them as plain strings (`SkippedOp.reason`), so they must not change.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._metrics import Metric
from pytest_flopbudget._report import BothPhases, EstimatedOp, LayerCost, PhaseTotals, SkippedOp

#: The op has compute and no formula is registered for it (`register_formula` adds one).
NO_FORMULA = "no formula"
#: The torch formula read a size that only the data decides (an unbacked symbolic size in fake mode).
DATA_DEPENDENT_SHAPE = "data-dependent shape"
#: The ONNX formula needs a shape that shape inference left open.
UNKNOWN_SHAPE = "unknown shape after shape inference"
#: Shape inference gave the ONNX formula a negative dimension.
INVALID_SHAPE = "invalid shape after shape inference"


def formula_failed(detail: str) -> str:
    """The skip reason of a formula that raised: `detail` names the exception (each backend words it)."""
    return f"formula failed ({detail})"


@dataclass
class Tally(BothPhases):
    """Costs by layer and phase, and the ops that were skipped or estimated, with the layers they ran in."""

    layers: dict[str, LayerCost] = field(default_factory=dict)
    forward: PhaseTotals = field(default_factory=PhaseTotals)
    backward: PhaseTotals = field(default_factory=PhaseTotals)
    skipped: dict[str, SkippedOp] = field(default_factory=dict)
    estimated: dict[str, EstimatedOp] = field(default_factory=dict)
    #: op -> the layers already listed in its SkippedOp / EstimatedOp, so listing stays linear in the op count.
    _skip_layers: dict[str, set[str]] = field(default_factory=dict, repr=False)
    _estimate_layers: dict[str, set[str]] = field(default_factory=dict, repr=False)

    def add(self, path: str, op: str, cost: Cost, calls: int = 1, *, backward: bool = False) -> None:
        """`calls` runs of `op` in layer `path` that cost `cost` together, in the forward or the backward pass."""
        self.add_values(path, op, cost.values(), calls, backward=backward)

    def add_values(
        self, path: str, op: str, values: Mapping[Metric, int], calls: int = 1, *, backward: bool = False
    ) -> None:
        """`add` with the figures keyed by metric (`{"flops": 6, "macs": 3}`)."""
        layer = self.layers.get(path)
        if layer is None:  # not setdefault: a LayerCost per op would be built and dropped (this runs for every op)
            layer = self.layers[path] = LayerCost()
        layer.add_op(op, values, calls)
        (self.backward if backward else self.forward).add_all(values)

    def skip(self, path: str, op: str, reason: str, calls: int = 1) -> None:
        """`calls` runs of `op` in layer `path` that could not be priced; the first reason given for `op` stays."""
        self.layers.setdefault(path, LayerCost()).add_skipped(op, calls)
        self._note_skipped(op, reason, calls, (path,))

    def estimate(self, path: str, op: str, rule: str, calls: int = 1) -> None:
        """`op` in layer `path` ran on sizes that rest on `rule` (fake mode's data-dependent conventions)."""
        entry = self.estimated.setdefault(op, EstimatedOp(rule=rule))
        entry.calls += calls
        _list_layers(entry.layers, self._estimate_layers.setdefault(op, set()), (path,))

    def merge(self, other: Tally, times: int = 1) -> None:
        """Add everything `other` tallied, `times` over (a loop body's tally once per iteration)."""
        for path, layer in other.layers.items():
            target = self.layers.setdefault(path, LayerCost())
            for op, cost in layer.ops.items():
                target.add_op(op, {metric: value * times for metric, value in cost.values.items()}, cost.calls * times)
        for mine, theirs in ((self.forward, other.forward), (self.backward, other.backward)):
            mine.add_all(theirs.values, times)
        self.merge_skipped(other, times)
        for op, estimated in other.estimated.items():
            entry = self.estimated.setdefault(op, EstimatedOp(rule=estimated.rule))
            entry.calls += estimated.calls * times
            _list_layers(entry.layers, self._estimate_layers.setdefault(op, set()), estimated.layers)

    def merge_skipped(self, other: Tally, times: int = 1) -> None:
        """Add only the skipped ops of `other` (the cheaper `If` branch: its ops may run, its costs do not add)."""
        for op, entry in other.skipped.items():
            self._note_skipped(op, entry.reason, entry.calls * times, entry.layers)
        for path, layer in other.layers.items():
            for op, calls in layer.skipped.items():
                self.layers.setdefault(path, LayerCost()).add_skipped(op, calls * times)

    def forget(self, metric: Metric, recorded_for_it: Container[str] = ()) -> None:
        """Drop every figure of `metric`, for a count that could not measure all of it (a part is not a figure),
        and the ops in `recorded_for_it` that were tallied for that metric alone; layers left empty go too."""
        for phase in (self.forward, self.backward):
            phase.values.pop(metric, None)
        for path in list(self.layers):
            layer = self.layers[path]
            layer.values.pop(metric, None)
            for op in list(layer.ops):
                values = layer.ops[op].values
                values.pop(metric, None)
                if not values and op in recorded_for_it:
                    del layer.ops[op]
            if not (layer.values or layer.ops or layer.skipped):
                del self.layers[path]

    def report_fields(self) -> dict[str, Any]:
        """The `Report` fields this tally fills: `Report(**tally.report_fields(), ...)`."""
        return {
            "layers": self.layers,
            "forward": self.forward,
            "backward": self.backward,
            "skipped_ops": self.skipped,
            "estimated_ops": self.estimated,
        }

    def _note_skipped(self, op: str, reason: str, calls: int, paths: Iterable[str]) -> None:
        entry = self.skipped.setdefault(op, SkippedOp(reason=reason))
        entry.calls += calls
        _list_layers(entry.layers, self._skip_layers.setdefault(op, set()), paths)


def _list_layers(listed: list[str], seen: set[str], paths: Iterable[str]) -> None:
    """Append each path not yet in `listed` (`seen` mirrors it), keeping first-seen order."""
    for path in paths:
        if path not in seen:
            seen.add(path)
            listed.append(path)
