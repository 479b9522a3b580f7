"""Pair our count with a peer's, layer by layer and op by op, and say why each pair differs.

Within a layer our ops and the peer's figures are paired by kind (`kinds.py`: `aten.convolution` with fvcore's
`conv`, thop's `Conv2d`, calflops' `F.conv2d`); a layer's lone unpaired op takes the peer's unpaired figures.
Each pair is then split into the parts a rule recognises, from the figures and from what the peer said:

- a multiply-accumulate op (convolution, matmul, attention) is 2 FLOPs per MAC plus the rest (a bias add, the
  softmax inside attention): a peer in MACs gives the MAC part once (`MACs vs FLOPs`), and a rest it does not
  count is a `bias add` (or, in attention, the scale and softmax it counts as zero);
- an op the peer prices at zero is `op not supported` where the peer said so (fvcore's warnings, a leaf module
  type thop or ptflops has no rule for), `fused attention` where the forward ran a fused attention kernel,
  `residual add missed by hooks` / `missed by hooks` where its hooks cannot see the op, else `counted as zero`;
- both counting the op with different results is `per-element cost`; a module hook and a patched function
  pricing the same op is `counted twice`.

Every figure of either side lands in exactly one item or in a part both agree on, so the items sum exactly to the
difference of the totals; what no rule accounts for is an `unexplained` item, never dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from pytest_flopbudget._explain.kinds import FUSED_ATTENTION, is_multiply_accumulate, kind
from pytest_flopbudget._explain.peers.protocol import ModelFacts, PeerCount, PeerFigure
from pytest_flopbudget._report import Report


class PeerFacts(Protocol):
    """What the matching reads of a peer besides its figures."""

    name: str
    title: str
    hooks: bool


@dataclasses.dataclass
class _Layer:
    """One layer's pairing: our ops (op -> FLOPs, MACs) and the peer's figures."""

    path: str
    ours: dict[str, tuple[int, int]]
    theirs: list[PeerFigure]


@dataclasses.dataclass(frozen=True)
class _Pair:
    """Our op (or the ops a module hook prices together, `ops`) and the peer's figures for it."""

    ops: tuple[str, ...]
    flops: int
    macs: int
    theirs: tuple[PeerFigure, ...]

    @property
    def label(self) -> str:
        return " + ".join(self.ops)

    @property
    def multiply_accumulate(self) -> bool:
        return self.macs > 0 and any(is_multiply_accumulate(op) for op in self.ops)

    @property
    def attention(self) -> bool:
        return any(kind(op) == "attention" for op in self.ops)


def explain(report: Report, count: PeerCount, peer: PeerFacts, facts: ModelFacts | None = None) -> Explanation:
    """Our `report` against the peer's `count` of the same model and inputs; `facts` says what the model's real
    forward ran (`torch_tools.model_facts`)."""
    facts = facts or ModelFacts()
    found: list[Item] = []
    for layer in _layers(report, count):
        found.extend(_layer_items(layer, count, peer, facts))
    ours_total = report.flops
    layered = sum(layer.flops for layer in report.layers.values())
    if ours_total != layered:
        found.append(
            Item(None, None, ours_total - layered, 0, reasons.UNEXPLAINED, detail="our total is not our layers' sum")
        )
    gap = count.total - sum(figure.value for figure in count.figures)
    if gap:
        found.append(
            Item(None, None, 0, gap, reasons.UNEXPLAINED, detail=f"{peer.name}'s total is not the sum of its layers")
        )
    return Explanation(
        peer=peer.name,
        title=peer.title,
        version=count.version,
        unit=count.unit,
        ours=ours_total,
        theirs=count.total,
        items=tuple(found),
        notes=count.notes,
    )


def _layers(report: Report, count: PeerCount) -> list[_Layer]:
    layers: dict[str, _Layer] = {}
    for path, cost in report.layers.items():
        layers[path] = _Layer(path, {op: (c.flops, c.macs) for op, c in cost.ops.items()}, [])
    for figure in count.figures:
        layers.setdefault(figure.layer, _Layer(figure.layer, {}, [])).theirs.append(figure)
    return list(layers.values())


def _layer_items(layer: _Layer, count: PeerCount, peer: PeerFacts, facts: ModelFacts) -> list[Item]:
    pairs, twice, unpaired = _pair(layer)
    twice_op = pairs[0].label if len(pairs) == 1 else None
    found = [
        Item(layer.path, twice_op, 0, figure.value, reasons.COUNTED_TWICE, figure.op,
             f"{peer.name} prices the module in its hook and again in {figure.op}")
        for figure in twice
    ]  # fmt: skip
    found += [
        Item(layer.path, None, 0, figure.value, reasons.UNEXPLAINED, figure.op,
             f"{peer.name} counts it where we count no op")
        for figure in unpaired
    ]  # fmt: skip
    for pair in pairs:
        zero = _zero_reason(layer.path, pair, count, peer, facts)
        found.extend(_split(layer.path, pair, count.unit, zero))
    return found


def _pair(layer: _Layer) -> tuple[list[_Pair], list[PeerFigure], list[PeerFigure]]:
    """Our ops with the peer's figures for them; the figures that count an op a second time; the figures no op of
    ours takes.

    A module hook's figure prices the module's whole forward: it pairs with all our ops in the layer together, and
    a patched function's figure in the same layer counts one of them again (ptflops). Otherwise figures pair by
    kind, and a lone op left unpaired takes the figures left over.
    """
    counted = [op for op, (flops, _) in layer.ours.items() if flops]
    free = [op for op, (flops, _) in layer.ours.items() if not flops]
    figures = [figure for figure in layer.theirs if figure.value]
    modules = [figure for figure in figures if figure.module]
    if modules:
        twice = [figure for figure in figures if not figure.module]
        ops = tuple(counted) or tuple(free[:1])
        if not ops:
            return [], twice, modules
        return [_group(layer, ops, modules)], twice, []
    groups: dict[str, list[str]] = {}  # our ops by kind: an aten.mm and an aten.bmm in one layer pair together
    for op in counted:
        groups.setdefault(kind(op), []).append(op)
    paired: dict[str, list[PeerFigure]] = {op_kind: [] for op_kind in groups}
    left = []
    for figure in figures:
        figure_kind = kind(figure.op) if figure.op is not None else None
        if figure_kind in paired:
            paired[figure_kind].append(figure)
        else:
            left.append(figure)
    if left and not groups and len(free) == 1:  # an op we count as free, which the peer prices
        return [_group(layer, (free[0],), left)], [], []
    if left:
        unpaired = [op_kind for op_kind in groups if not paired[op_kind]]
        taker = unpaired[0] if len(unpaired) == 1 else next(iter(groups)) if len(groups) == 1 else None
        if taker is None:
            return [_group(layer, tuple(groups[k]), paired[k]) for k in groups], [], left
        paired[taker].extend(left)
    return [_group(layer, tuple(groups[k]), paired[k]) for k in groups], [], []


def _group(layer: _Layer, ops: tuple[str, ...], theirs: list[PeerFigure]) -> _Pair:
    flops = sum(layer.ours.get(op, (0, 0))[0] for op in ops)
    macs = sum(layer.ours.get(op, (0, 0))[1] for op in ops)
    return _Pair(ops, flops, macs, tuple(theirs))


def _zero_reason(layer: str, pair: _Pair, count: PeerCount, peer: PeerFacts, facts: ModelFacts) -> tuple[str, str]:
    """Why the peer has nothing for our op(s) in `layer`: the reason and a detail clause."""
    unsupported = count.unsupported.get(layer, {})
    named = sorted(name for name in unsupported if any(kind(name) == kind(op) for op in pair.ops))
    if named or (peer.hooks and unsupported):
        names = named or sorted(unsupported)
        calls = ", ".join(f"{name} ({unsupported[name]} call{'s' if unsupported[name] != 1 else ''})" for name in names)
        return reasons.NOT_SUPPORTED, f"{peer.name} has no rule for {calls}"
    fused = sorted(name for name in facts.seen.get(layer, {}) if name in FUSED_ATTENTION)
    if fused and pair.attention:
        return reasons.FUSED_ATTENTION, f"{peer.name} saw one {fused[0]} and counted it as zero"
    add = all(kind(op) == "add" for op in pair.ops)
    if peer.hooks and add and layer in facts.containers:
        return reasons.RESIDUAL_ADD_MISSED, f"`x + y` in {layer or 'the model'}'s own forward"
    if count.hooked is not None and layer not in count.hooked:
        return reasons.MISSED_BY_HOOKS, f"{peer.name} hooks no module whose forward runs it"
    if peer.hooks and count.hooked is None and not pair.theirs:
        return reasons.NOT_SUPPORTED, f"{peer.name} patches no function that runs it"
    return reasons.COUNTED_AS_ZERO, f"{peer.name} prices it at zero"


def _split(layer: str, pair: _Pair, unit: str, zero: tuple[str, str]) -> list[Item]:
    """The items of one pair: our FLOPs (of which `macs` multiply-accumulates) against the peer's figure."""
    flops, macs, op = pair.flops, pair.macs, pair.label
    theirs = sum(figure.value for figure in pair.theirs)
    their_op = ", ".join(sorted({f.op for f in pair.theirs if f.op is not None})) or None
    if theirs == 0:
        return [Item(layer, op, flops, 0, zero[0], their_op, zero[1])] if flops else []
    if not pair.multiply_accumulate:
        if theirs == flops:
            return []
        return [Item(layer, op, flops, theirs, reasons.PER_ELEMENT, their_op, _ratio(flops, theirs))]
    per_mac = 1 if unit == "macs" else 2
    mac_part = per_mac * macs
    if theirs < mac_part:  # fewer multiply-accumulates than ours: a formula of its own, not a unit or a bias
        return [Item(layer, op, flops, theirs, reasons.OTHER_FORMULA, their_op, _ratio(flops, theirs))]
    found = []
    if per_mac == 1:
        found.append(
            Item(layer, op, 2 * macs, macs, reasons.MACS_VS_FLOPS, their_op, f"{macs:,} MAC{'s' if macs != 1 else ''}")
        )
    rest, their_rest = flops - 2 * macs, theirs - mac_part
    if rest != their_rest:
        if their_rest == 0 and pair.attention:
            found.append(
                Item(layer, op, rest, 0, reasons.COUNTED_AS_ZERO, their_op, "the scale and softmax inside attention")
            )
        elif their_rest == 0:
            found.append(Item(layer, op, rest, 0, reasons.BIAS_ADD, their_op, "1 FLOP per output element"))
        else:
            found.append(Item(layer, op, rest, their_rest, reasons.OTHER_FORMULA, their_op, _ratio(rest, their_rest)))
    return found


def _ratio(ours: int, theirs: int) -> str:
    if theirs and ours % theirs == 0:
        return f"ours is {ours // theirs}x theirs"
    if ours and theirs % ours == 0:
        return f"theirs is {theirs // ours}x ours"
    return f"ours is {ours / theirs:.3g}x theirs" if theirs else ""


def split(
    layer: str,
    op: str,
    flops: int,
    macs: int,
    theirs: int,
    unit: str,
    zero: tuple[str, str],
    their_op: str | None = None,
) -> list[Item]:
    """The items of one op of ours (`flops`, of which `macs` multiply-accumulates) against a figure of theirs in
    `unit`, by the rules above (`zero`: the reason and detail where theirs is 0); a convention profile's items."""
    figure = PeerFigure(layer, their_op, theirs)
    return _split(layer, _Pair((op,), flops, macs, (figure,) if theirs else ()), unit, zero)
