"""XLA's cost analysis as a peer: `jax.jit(f).lower(...).cost_analysis()["flops"]`, the figure flax's
`tabulate(compute_flops=True)` prints, against our JAX count of the same program.

The entry is counted as `flopbudget count` counts it, and the jaxpr that count walked is lowered whole (the figure
XLA reports: the markers of named composites lower to nothing, so this is the model's own HLO) and equation by
equation (`xla_walk.py`), so each layer's op has XLA's figure next to ours. The differences are XLA's rules:
a loop body costed once (`scan counted once`, and the loop's own counter), transcendentals (`exp`, `tanh`,
`rsqrt`, `logistic`, ...) reported apart from flops, a reduction of n inputs into m outputs as n - m adds, and a
named composite (a Flax norm layer, `jax.nn.softmax`) costed by its primitives where we price it by the shared
rule. Where XLA's whole figure is not the sum of its ops alone, the rest is an `unexplained` item.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from pytest_flopbudget._explain.peers.protocol import PeerError, Unit
from pytest_flopbudget._report import Report

#: Reductions, which XLA counts as n - m adds (n inputs into m outputs).
REDUCTIONS = frozenset(
    {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin"}
)


class Xla:
    name = "xla"
    distribution = "jax"
    framework = "jax"
    unit: Unit = "flops"
    title = "XLA's cost analysis (HloCostAnalysis, jaxlib)"

    def is_installed(self) -> bool:
        return importlib.util.find_spec("jax") is not None

    def version(self) -> str:
        return metadata.version("jaxlib")

    def explain(self, backend: Any, loaded: Any) -> Explanation:
        from pytest_flopbudget._counting.jax.engine import captured_traces

        with captured_traces() as traces:
            ours = backend.count(loaded)
        if len(traces) != 1:
            raise PeerError(f"the count traced {len(traces)} programs; XLA's cost analysis compares one")
        traced, namer = traces[0]
        return self.compare(ours, traced, namer)

    def compare(self, ours: Report, traced: Any, namer: Any) -> Explanation:
        """Our `ours` (a count of `traced`, with the layers `namer` gives) against XLA's cost analysis of it."""
        import jax
        import jax.extend

        from pytest_flopbudget._explain.peers.xla_walk import XlaWalk, cost_of

        specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in traced.jaxpr.invars]
        try:
            total, transcendentals = cost_of(jax.jit(jax.extend.core.jaxpr_as_fun(traced)).lower(*specs))
        except Exception as exc:
            raise PeerError(f"XLA could not lower the program: {type(exc).__name__}: {exc}"[:300]) from None
        walk = XlaWalk(jax, namer)
        walk.walk_program(traced)
        found = items(ours, walk)
        accounted = sum(op.once for op in walk.live.ops.values()) + sum(walk.live.loops.values())
        if total != accounted:
            found.append(
                Item(None, None, 0, total - accounted, reasons.UNEXPLAINED,
                     detail="XLA's figure for the whole program is not the sum of its ops costed alone")
            )  # fmt: skip
        notes = (
            [f"XLA also reports {transcendentals:,} transcendentals, apart from its flops"] if transcendentals else []
        )
        failed = dict.fromkeys([*walk.failed, *walk.live.failed])
        notes += [f"XLA could not cost {op} in {layer or 'the model'} alone: {why}" for layer, op, why in failed]
        if ours.skipped_ops:
            notes.append(f"we skipped {ours.skipped_calls} op calls (no formula): our figure leaves them out")
        return Explanation(
            peer=self.name,
            title=self.title,
            version=self.version(),
            unit=self.unit,
            ours=ours.flops,
            theirs=total,
            items=tuple(found),
            notes=tuple(notes),
        )


def items(report: Report, walk: Any) -> list[Item]:
    """One item per difference: XLA's rule against ours at our multiplicity; the work jax drops as dead code; loop
    bodies costed once; loops we skip; then the loops' own counters."""
    found: list[Item] = []
    written, live = walk.ops, walk.live.ops
    keys = list(written)
    keys += [key for key in live if key not in written]
    keys += [(path, op) for path, layer in report.layers.items() for op in layer.ops if (path, op) not in keys]
    for layer, op in keys:
        cost = report.layers.get(layer)
        ours = cost.ops[op].flops if cost is not None and op in cost.ops else 0
        theirs, kept = written.get((layer, op)), live.get((layer, op))
        if theirs is None:
            if ours:
                found.append(Item(layer, op, ours, 0, reasons.UNEXPLAINED, detail="XLA's walk met no such op"))
            continue
        if ours != theirs.full:
            reason, detail = _rule_reason(op, ours, theirs)
            found.append(Item(layer, op, ours, theirs.full, reason, detail=detail))
        full = kept.full if kept is not None else 0
        if theirs.full != full:
            found.append(
                Item(layer, op, theirs.full, full, reasons.UNUSED, detail="its result is not read: jax drops it")
            )
        once = (kept.once - kept.unseen) if kept is not None else 0
        if full != once:
            found.append(
                Item(layer, op, full, once, reasons.SCAN_ONCE,
                     detail=f"XLA costs the loop body once: {once:,} of {full:,}")
            )  # fmt: skip
        if kept is not None and kept.unseen:
            found.append(
                Item(layer, op, 0, kept.unseen, reasons.WE_SKIPPED,
                     detail="in a while loop without a static trip count, which we skip (see our skipped ops)")
            )  # fmt: skip
    for layer, flops in walk.live.loops.items():
        found.append(
            Item(layer, "while", 0, flops, reasons.LOOP_COUNTER, detail="the HLO while's counter: an add and a compare")
        )
    return found


def _rule_reason(op: str, ours: int, theirs: Any) -> tuple[str, str]:
    if theirs.composite:
        extra = f", and {theirs.transcendentals:,} transcendentals apart" if theirs.transcendentals else ""
        return reasons.BY_PRIMITIVES, f"XLA: {theirs.full:,} flops over its primitives{extra}"
    if theirs.full == 0 and theirs.transcendentals:
        return reasons.TRANSCENDENTAL, f"{theirs.transcendentals:,} transcendentals"
    if op in REDUCTIONS:
        outputs = ours - theirs.full
        return reasons.REDUCTION, f"{outputs:,} output{'s' if outputs != 1 else ''}"
    if ours == 0:
        return reasons.PER_ELEMENT, "we count it free"
    return reasons.PER_ELEMENT, _ratio(ours, theirs.full)


def _ratio(ours: int, theirs: int) -> str:
    if theirs and ours % theirs == 0:
        return f"ours is {ours // theirs}x theirs"
    if ours and theirs % ours == 0:
        return f"theirs is {theirs // ours}x ours"
    return ""


PEER = Xla()
