"""Reports and peer counts built by hand, for the matching's tests: figures given op by op, layer by layer."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerFigure, Unit
from pytest_flopbudget._metrics import FLOPS, MACS
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report


def report(layers: Mapping[str, Mapping[str, tuple[int, int]]]) -> Report:
    """A Report of `layer -> op -> (FLOPs, MACs)`."""
    costs = {}
    for path, ops in layers.items():
        cost = LayerCost()
        for op, (flops, macs) in ops.items():
            cost.add_op(op, {FLOPS: flops, MACS: macs})
        costs[path] = cost
    flops = sum(cost.flops for cost in costs.values())
    macs = sum(cost.macs for cost in costs.values())
    return Report(layers=costs, forward=PhaseTotals(flops=flops, macs=macs))


def peer_count(
    figures: list[tuple[str, str | None, int]] | list[PeerFigure],
    unit: Unit = "macs",
    total: int | None = None,
    **fields: object,
) -> PeerCount:
    """A peer's count of `(layer, op, value)` figures (or `PeerFigure`s); `total` defaults to their sum."""
    built = tuple(f if isinstance(f, PeerFigure) else PeerFigure(*f) for f in figures)
    return PeerCount(
        peer="toy",
        version="1.0",
        unit=unit,
        figures=built,
        total=sum(f.value for f in built) if total is None else total,
        **fields,  # type: ignore[arg-type]
    )


class ToyPeer:
    """The facts the matching reads of a peer."""

    def __init__(self, hooks: bool = False) -> None:
        self.name = "toy"
        self.title = "a toy counter"
        self.hooks = hooks
