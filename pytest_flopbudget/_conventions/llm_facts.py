"""What the LLM stacks' formulas need, read off a counted Report: matmul MACs by kind, parameters by kind, tokens.

Every op of the report falls in exactly one `Part` (so the parts' FLOPs add up to the report's), decided from
facts the report holds, never from layer names:

- `attention`: a fused attention kernel (an op named `*attention*` or `*scaled_dot_product*` with MACs), or a
  batched matmul (`bmm`, `matmul`, `einsum`, `dot_general`) in a layer that owns no parameters (QKᵀ and AV of an
  attention written out by hand);
- `lm_head`: the matmuls of the layer that projects onto the vocabulary: its MACs are the tokens times the token
  embedding table's size (vocabulary x width), once per forward (three times in a training step);
- `dense`: every other op with MACs (the weight matmuls: projections, MLPs, convolutions);
- `embedding`: the embedding lookups and their backward (ops named `*embedding*`, Flax's `Embed`, a gather, in a
  layer that owns parameters; `is_lookup`);
- `norms`: the ops of a layer that owns parameters and runs no matmul or lookup (RMSNorm, LayerNorm);
- `other`: the rest (activations, residual and rotary adds, the loss).

The forward MACs a convention prices are the report's own in an inference count. In a training count the report
keeps one total per op across forward and backward, and the phases' totals: a fused attention's forward is its
own op (`..._backward` is another), the lm_head's backward is exactly 2x its forward (the gradients of its
input and its weight), a hand-written attention's is taken as 2x too (said in the notes), and the dense
matmuls' forward is what remains of the forward phase's MACs.
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import TYPE_CHECKING

from pytest_flopbudget._conventions.profile import ConventionError

if TYPE_CHECKING:
    from pytest_flopbudget._report import Report

#: An embedding lookup, as each framework names it: PyTorch's `aten.embedding` (and its backward), Flax's
#: `nnx.Embed` / `linen.Embed` composites, a gather (`gather` in a jaxpr, TensorFlow's `ResourceGather` and
#: `GatherV2` of a Keras `Embedding`).
_LOOKUPS = ("embedding", "embed", "gather", "resourcegather", "gatherv2", "take")


def is_lookup(op: str) -> bool:
    """Whether `op` (a report's op name) is an embedding lookup in some framework's words."""
    short = op.rsplit(".", 1)[-1].lower()
    return "embedding" in short or short in _LOOKUPS


#: Ops that multiply two activations (a hand-written attention's QKᵀ and AV) when their layer owns no weights.
_BATCHED = ("bmm", "baddbmm", "matmul", "einsum", "dot_general")


@dataclasses.dataclass(frozen=True)
class Part:
    """One kind of op: its exact FLOPs and MACs over every phase, the MACs of its forward, and its parameters."""

    flops: int = 0
    macs: int = 0
    forward_macs: int = 0
    params: int = 0
    layers: int = 0

    @property
    def rest(self) -> int:
        """What the part's ops cost beyond their multiply-accumulates (bias adds; an attention's scale, softmax)."""
        return self.flops - 2 * self.macs


@dataclasses.dataclass(frozen=True)
class Facts:
    """A report's figures by kind (see the module's docstring), and the tokens it ran on."""

    model: str
    training: bool
    flops: int
    dense: Part
    attention: Part
    lm_head: Part
    embedding: Part
    norms: Part
    other: Part
    #: Embedding tables other than the largest (the token table): learned positions, token types.
    position_params: int
    #: Tokens (batch x sequence) and sequences (batch) of the first integer input, None without one.
    tokens: int | None
    sequences: int | None
    notes: tuple[str, ...] = ()

    @property
    def parts(self) -> dict[str, Part]:
        return {
            "dense": self.dense,
            "attention": self.attention,
            "lm_head": self.lm_head,
            "embedding": self.embedding,
            "norms": self.norms,
            "other": self.other,
        }

    @property
    def params(self) -> int:
        return sum(part.params for part in self.parts.values())

    @property
    def times(self) -> int:
        """How many times a convention prices the forward matmuls: 3 for a training step, 1 for inference."""
        return 3 if self.training else 1

    def need_tokens(self, convention: str) -> int:
        if self.tokens is None:
            raise ConventionError(
                f"{convention}: the convention is per token, and {self.model or 'the model'} has no integer input "
                f"(token ids) to read the tokens from; count it with one, e.g. --input 1,seq:int64"
            )
        return self.tokens

    def sequence_length(self) -> int | None:
        if self.tokens is None or not self.sequences:
            return None
        return self.tokens // self.sequences


def facts_of(report: Report) -> Facts:
    """The facts of `report` (see the module's docstring)."""
    training = report.training and not report.phases
    tokens, sequences = _tokens(report.inputs)
    embedding_layers = {
        path: cost.params
        for path, cost in report.layers.items()
        if cost.params and any(is_lookup(name) and not op.macs for name, op in cost.ops.items())
    }
    table = max(embedding_layers.values(), default=0)
    times = 3 if training else 1
    lm_head_paths = _lm_head_paths(report, tokens, table, times)
    totals: dict[str, dict[str, int]] = {
        kind: {"flops": 0, "macs": 0, "forward_macs": 0, "params": 0, "layers": 0}
        for kind in ("dense", "attention", "lm_head", "embedding", "norms", "other")
    }
    unfused_training = False
    for path, cost in report.layers.items():
        kinds_here: set[str] = set()
        is_norm = cost.params > 0 and path not in embedding_layers and not any(op.macs for op in cost.ops.values())
        for name, op in cost.ops.items():
            short = name.rsplit(".", 1)[-1].lower()
            forward = op.macs
            if op.macs and path in lm_head_paths:
                kind = "lm_head"
                forward = op.macs // times
            elif op.macs and ("attention" in short or "scaled_dot_product" in short):
                kind = "attention"
                forward = 0 if "backward" in short else op.macs
            elif op.macs and cost.params == 0 and any(short.startswith(b) for b in _BATCHED):
                kind = "attention"
                forward = op.macs // times
                unfused_training = unfused_training or training
            elif op.macs:
                kind = "dense"
                forward = 0  # the forward phase's remainder, below
            elif is_lookup(name):
                kind = "embedding"
            elif is_norm:
                kind = "norms"
            else:
                kind = "other"
            total = totals[kind]
            total["flops"] += op.flops
            total["macs"] += op.macs
            total["forward_macs"] += forward if training else op.macs
            kinds_here.add(kind)
        owner = (
            "lm_head"
            if path in lm_head_paths
            else "embedding"
            if path in embedding_layers
            else "norms"
            if is_norm
            else "dense"
            if "dense" in kinds_here
            else "other"
        )
        totals[owner]["params"] += cost.params
        for kind in kinds_here:
            totals[kind]["layers"] += 1
    if training:
        known = totals["attention"]["forward_macs"] + totals["lm_head"]["forward_macs"]
        totals["dense"]["forward_macs"] = max(report.forward.macs - known, 0)
    notes = []
    if unfused_training:
        notes.append(
            "the attention's matmuls are not one fused kernel: their forward is taken as a third of their training "
            "MACs (a backward of 2x the forward)"
        )
    if tokens is not None and table and not lm_head_paths:
        notes.append("no layer projects onto the vocabulary (tokens x the token table's size): no lm_head found")
    parts = {kind: Part(**figures) for kind, figures in totals.items()}
    return Facts(
        model=report.model,
        training=training,
        flops=report.flops,
        position_params=sum(embedding_layers.values()) - table,
        tokens=tokens,
        sequences=sequences,
        notes=tuple(notes),
        **parts,
    )


def _lm_head_paths(report: Report, tokens: int | None, table: int, times: int) -> set[str]:
    """The layers whose matmuls are the projection onto the vocabulary: tokens x (vocabulary x width) MACs per
    forward, the size of the token embedding table (`table`). Tied or not, the shapes say which layer it is."""
    if not tokens or not table:
        return set()
    found = set()
    for path, cost in report.layers.items():
        macs = sum(op.macs for op in cost.ops.values())
        if macs and macs == times * tokens * table:
            found.add(path)
    if len(found) > 1:  # a block's matmul of the same size: the head sits outside the repeated blocks
        outside = {path for path in found if not any(part.isdigit() for part in path.split("."))}
        found = outside or found
    return found


def _tokens(inputs: list[object]) -> tuple[int | None, int | None]:
    """Tokens (the element count) and sequences (the first dim) of the first integer input."""
    for spec in inputs:
        if not isinstance(spec, dict):
            continue
        dtype = str(spec.get("dtype", ""))
        shape = spec.get("shape")
        integer = dtype.startswith("int") or dtype.startswith("uint")
        if integer and isinstance(shape, list) and shape and all(isinstance(size, int) for size in shape):
            return prod(shape), shape[0]
    return None, None
