"""The itemised difference between two figures of one model: ours and another counter's (or another convention's).

An `Explanation` holds both totals and the `Item`s that account for their difference: each item is one layer's
op (or one layer, where a figure is per layer only) with our figure, theirs, and the reason they differ. The
items partition the part of the two counts that differs, so they sum *exactly* to the difference of the totals
(`Explanation.residual` is zero by construction, and the tests hold it there); a part no rule accounts for is an
item too, with the reason `unexplained`, never left out.

The same structure serves a convention profile (ours next to the figure a stack's convention gives, with the
itemised delta): only who produced `theirs` differs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_flopbudget._display import html_of

#: Why two counters differ on one op. Each reason is a short phrase, the same in the table and in the JSON.
NOT_SUPPORTED = "op not supported"
COUNTED_AS_ZERO = "counted as zero"
MACS_VS_FLOPS = "MACs vs FLOPs"
BIAS_ADD = "bias add"
RESIDUAL_ADD_MISSED = "residual add missed by hooks"
MISSED_BY_HOOKS = "missed by hooks"
FUSED_ATTENTION = "fused attention"
CAUSAL_HALVING = "causal halving"
PADDING_TAPS = "padding taps"
SCAN_ONCE = "scan counted once"
PER_ELEMENT = "per-element cost"
OTHER_FORMULA = "different formula"
COUNTED_TWICE = "counted twice"
TRANSCENDENTAL = "transcendental, not in flops"
REDUCTION = "reduction as n - m adds"
BY_PRIMITIVES = "priced by its primitives"
LOOP_COUNTER = "loop counter"
LAYER_RULE = "layer priced by rule"
INCOMPLETE_SHAPE = "dropped: unknown dim"
UNUSED = "unused result dropped"
WE_SKIPPED = "skipped by us"
UNEXPLAINED = "unexplained"
#: Why a stack's convention (a profile, `_conventions/`) differs from the exact count.
OUTSIDE_CONVENTION = "outside the convention"
EMBEDDINGS_OUT = "embeddings out"
PER_PARAMETER = "priced per parameter"
BACKWARD_RULE = "backward is not 2x forward"
LM_HEAD_LAST = "lm_head last token"

#: Each reason, and what it means (docs/explain.md repeats these).
REASONS: dict[str, str] = {
    NOT_SUPPORTED: "the peer has no formula for the op (it warned, or its table and patches miss it): zero",
    COUNTED_AS_ZERO: "the peer prices the op at zero by design (an activation, a pool, a copy)",
    MACS_VS_FLOPS: "the peer counts a multiply-accumulate as 1, we count 2 FLOPs",
    BIAS_ADD: "we count the bias add (1 FLOP per output element), the peer does not",
    RESIDUAL_ADD_MISSED: "`x + y` in a block's own forward: no hooked module or patched function sees it",
    MISSED_BY_HOOKS: "the op runs in a module's own forward, where the peer's module hooks do not look",
    FUSED_ATTENTION: "one fused attention kernel ran, which the peer counts as zero",
    CAUSAL_HALVING: "the peer halves causal attention's QK^T and AV, we count them dense",
    PADDING_TAPS: "the peer counts a convolution's valid taps only, we count the padded ones too",
    SCAN_ONCE: "the peer counts a loop's body once, we count every iteration",
    PER_ELEMENT: "both count the op, with different costs per element",
    OTHER_FORMULA: "both count the multiply-accumulate op, with different formulas (not a unit or a bias)",
    COUNTED_TWICE: "the peer counts the op twice (a module hook and a patched function)",
    TRANSCENDENTAL: "the peer reports exp, tanh, rsqrt, ... apart as transcendentals, not in its flops (XLA)",
    REDUCTION: "the peer counts a reduction of n inputs into m outputs as n - m adds, we count n (1 per input)",
    BY_PRIMITIVES: "the peer costs a named composite (a norm layer, softmax) by the primitives it is made of, we "
    "price it by the shared rule of the op it names",
    LOOP_COUNTER: "the peer counts a loop's own counter (an add and a compare), which the program does not write",
    LAYER_RULE: "we price the layer (a Keras batch norm, activation) by the shared rule, the peer the ops it runs",
    INCOMPLETE_SHAPE: "the peer drops an op whose shapes have an unknown dim (an unknown batch)",
    UNUSED: "the op's result is never read, and the peer's compiler drops it (jax's dead-code elimination)",
    WE_SKIPPED: "we skip the op (a loop without a static trip count: listed in our skipped ops), the peer counts it",
    UNEXPLAINED: "a difference no rule accounts for",
    OUTSIDE_CONVENTION: "the convention prices matmuls only: norms, activations, softmax, residual and rotary adds, "
    "the loss are left out",
    EMBEDDINGS_OUT: "the convention leaves out the embedding lookup (and the scatter-add of its backward)",
    PER_PARAMETER: "the convention prices 2 FLOPs per parameter per token (6 in training), whatever the layer does "
    "with it: a norm's weights, a gathered embedding table, a bias",
    BACKWARD_RULE: "the convention prices a training step's matmuls at 3x the forward; the counted backward differs "
    "(a fused attention's backward recomputes QK^T; a first layer computes no input gradient)",
    LM_HEAD_LAST: "the convention computes the lm_head on the last token of each sequence only (a prefill samples "
    "one token)",
}


@dataclasses.dataclass(frozen=True)
class Item:
    """One difference: our figure and theirs for one op of one layer (`op` None: the layer as a whole; `layer`
    None: outside any layer), and why they differ. `theirs` is in the peer's unit, as its total is."""

    layer: str | None
    op: str | None
    ours: int
    theirs: int
    reason: str
    #: The peer's name for the op where it differs from ours (`conv`, `F.linear`, `Conv2d`).
    their_op: str | None = None
    #: One more clause of why, where it helps (`fvcore warned: aten::add_`).
    detail: str = ""

    @property
    def difference(self) -> int:
        return self.ours - self.theirs

    def to_dict(self) -> dict[str, Any]:
        where: dict[str, Any] = {"layer": self.layer}
        if self.op is not None:
            where["op"] = self.op
        if self.their_op is not None:
            where["their_op"] = self.their_op
        return {
            **where,
            "ours": self.ours,
            "theirs": self.theirs,
            "difference": self.difference,
            "reason": self.reason,
            **({"detail": self.detail} if self.detail else {}),
        }


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Our FLOPs against a peer's figure, and the items that account for the difference."""

    peer: str
    title: str
    version: str
    #: The peer's unit (`macs` or `flops`); ours are FLOPs.
    unit: str
    ours: int
    theirs: int
    items: tuple[Item, ...]
    notes: tuple[str, ...] = ()

    @property
    def difference(self) -> int:
        return self.ours - self.theirs

    @property
    def residual(self) -> int:
        """What the items leave unaccounted for: zero, always (a non-zero value is a bug of the matching)."""
        return self.difference - sum(item.difference for item in self.items)

    def by_reason(self) -> dict[str, int]:
        """The difference each reason accounts for, largest first."""
        totals: dict[str, int] = {}
        for item in self.items:
            totals[item.reason] = totals.get(item.reason, 0) + item.difference
        return dict(sorted(totals.items(), key=lambda pair: -abs(pair[1])))

    def _repr_html_(self) -> str | None:
        """What Jupyter shows: the totals and the itemised difference as a table (`explain/notebook.py`, plugged
        in by the package root: `display.use_html`)."""
        return html_of(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "peer": self.peer,
            "title": self.title,
            "version": self.version,
            "unit": self.unit,
            "ours": self.ours,
            "theirs": self.theirs,
            "difference": self.difference,
            "by_reason": self.by_reason(),
            "items": [item.to_dict() for item in self.items],
            "notes": list(self.notes),
        }


#: The JSON layout of `flopbudget explain --format json`.
FORMAT = "pytest-flopbudget/explain/1"
