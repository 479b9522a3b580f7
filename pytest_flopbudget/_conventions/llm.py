"""The LLM training and serving stacks' conventions, as profiles: megatron, megatron-causal, palm, torchtitan,
maxtext, vllm.

Each profile prices the parts of a count (`llm_facts.py`) as its stack's formula does, and itemises the
difference from the exact count part by part: a part's ops beyond their multiply-accumulates (bias adds, an
attention kernel's softmax), its matmuls against the convention's price, the masked half a causal convention
drops, the parameters a per-parameter convention prices. The items sum exactly to ours - theirs, by construction:
every part's exact FLOPs is split into items whose `ours` add up to it (or a zero difference, left out).

A training Report is judged against the convention's training figure (3x the forward matmuls; 6 per parameter
per token); an inference Report against its forward figure (1x; 2 per parameter per token). The formulas, their
sources and the reading of L, H, Q and T are in docs/conventions-profiles.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_flopbudget._conventions.llm_facts import Facts, Part, facts_of
from pytest_flopbudget._conventions.profile import ConventionError
from pytest_flopbudget._explain.items import (
    BACKWARD_RULE,
    BIAS_ADD,
    CAUSAL_HALVING,
    EMBEDDINGS_OUT,
    LM_HEAD_LAST,
    OUTSIDE_CONVENTION,
    PER_PARAMETER,
    Explanation,
    Item,
)

if TYPE_CHECKING:
    from pytest_flopbudget._report import Report

#: Where each formula is written (the commit read for this version); docs/conventions-profiles.md quotes them.
MEGATRON_SOURCE = (
    "Narayanan et al. 2021, arXiv:2104.04473 appendix 'Floating-point operations' "
    "(72·B·s·l·h²(1 + s/6h + V/12lh) without recomputation); "
    "NVIDIA/Megatron-LM megatron/training/training.py num_floating_point_operations"
)
MEGATRON_CAUSAL_SOURCE = (
    "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/training.py "
    "num_floating_point_operations (core attention: seq_length / 2, 'causal mask')"
)
PALM_SOURCE = (
    "Chowdhery et al. 2022, arXiv:2204.02311 appendix B (6N + 12·L·H·Q·T); "
    "https://github.com/karpathy/nanoGPT/blob/master/model.py GPT.estimate_mfu and get_num_params"
)
TORCHTITAN_SOURCE = (
    "https://github.com/pytorch/torchtitan torchtitan/utils.py (later torchtitan/models/utils.py) "
    "get_num_flop_per_token and get_num_params(model, exclude_embedding=True)"
)
MAXTEXT_SOURCE = (
    "https://github.com/AI-Hypercomputer/maxtext/blob/main/src/MaxText/maxtext_utils.py "
    "calculate_tflops_training_per_device and calculate_prefill_tflops_per_device"
)
VLLM_SOURCE = (
    "https://github.com/vllm-project/vllm vllm/model_executor/layers/logits_processor.py LogitsProcessor "
    "(logits of the sampled positions only: the last token of each prefill)"
)


@dataclasses.dataclass(frozen=True)
class Priced:
    """One part of the count against the convention: our exact FLOPs, theirs, why they differ, and a detail."""

    ours: int
    theirs: int
    reason: str
    what: str
    detail: str = ""
    #: False for a step between two conventions (dense attention to its causal half): its `ours` is the dense
    #: convention's figure, not a part of our count.
    counted: bool = True


@dataclasses.dataclass(frozen=True)
class LlmProfile:
    """A profile whose figure is the sum of `price(facts)`'s parts; `apply` meets the `Profile` protocol."""

    name: str
    title: str
    source: str
    price: Callable[[Facts, str], list[Priced]]
    #: The convention exists for inference only (vllm) or gives a figure for both.
    inference_only: bool = False

    def apply(self, report: Report) -> Explanation:
        facts = facts_of(report)
        if self.inference_only and facts.training:
            raise ConventionError(
                f"{self.name}: an inference convention; count {report.model or 'the model'} without --training"
            )
        priced = self.price(facts, self.name)
        ours = sum(part.ours for part in priced if part.counted)
        if ours != facts.flops:  # every op is in one part: a mismatch is a bug of the reading, never shown
            raise AssertionError(f"{self.name}: parts add up to {ours}, the count is {facts.flops}")
        items = tuple(
            Item(layer=None, op=part.what, ours=part.ours, theirs=part.theirs, reason=part.reason, detail=part.detail)
            for part in priced
            if part.ours != part.theirs
        )
        return Explanation(
            peer=self.name,
            title=self.title,
            version="training" if facts.training else "inference",
            unit="flops",
            ours=facts.flops,
            # a step between conventions replaces its `ours` (the dense figure, priced by an item before it)
            theirs=sum(part.theirs if part.counted else part.theirs - part.ours for part in priced),
            items=items,
            notes=(*facts.notes, *_derived(facts)),
        )


# -- the parts, priced ---------------------------------------------------------------------------------------------


def _matmuls(part: Part, what: str, theirs: int, reason: str, rest_reason: str, detail: str = "") -> list[Priced]:
    """A matmul part: its ops beyond the MACs (a bias add, a softmax) against 0, its MACs at 2 FLOPs each against
    the convention's `theirs`."""
    return [
        Priced(part.rest, 0, rest_reason, what, "beyond the multiply-accumulates"),
        Priced(2 * part.macs, theirs, reason, what, detail),
    ]


def _left_out(facts: Facts) -> list[Priced]:
    """The parts a matmul-only convention does not price: embeddings, norms, everything elementwise."""
    return [
        Priced(facts.embedding.flops, 0, EMBEDDINGS_OUT, "embeddings"),
        Priced(facts.norms.flops, 0, OUTSIDE_CONVENTION, "norms"),
        Priced(facts.other.flops, 0, OUTSIDE_CONVENTION, "other ops", "activations, residual and rotary adds, loss"),
    ]


def _attention(facts: Facts, causal: bool) -> list[Priced]:
    """Attention's matmuls: dense at 2 FLOPs per forward MAC, 3x in training; `causal` halves that (the masked
    upper triangle of QKᵀ and AV), as a second item: the dense figure against its half."""
    attention, times = facts.attention, facts.times
    dense = 2 * times * attention.forward_macs
    parts = _matmuls(attention, "attention", dense, BACKWARD_RULE, OUTSIDE_CONVENTION, _backward_detail(facts))
    if causal:
        parts.append(
            Priced(dense, dense // 2, CAUSAL_HALVING, "attention", "dense figure against its half", counted=False)
        )
    return parts


def _backward_detail(facts: Facts) -> str:
    return "3x the forward's MACs, 2 FLOPs each" if facts.training else ""


def _megatron(facts: Facts, causal: bool) -> list[Priced]:
    times = facts.times
    return [
        *_matmuls(
            facts.dense,
            "weight matmuls",
            2 * times * facts.dense.forward_macs,
            BACKWARD_RULE,
            BIAS_ADD,
            _backward_detail(facts),
        ),
        *_matmuls(
            facts.lm_head,
            "lm_head",
            2 * times * facts.lm_head.forward_macs,
            BACKWARD_RULE,
            BIAS_ADD,
            _backward_detail(facts),
        ),
        *_attention(facts, causal),
        *_left_out(facts),
    ]


def megatron(facts: Facts, name: str) -> list[Priced]:
    """Classic Megatron: every GEMM at 2 FLOPs per MAC, 3x in training; lm_head in, embeddings out, attention
    dense. Needs no token count: the matmuls' MACs are the count's."""
    return _megatron(facts, causal=False)


def megatron_causal(facts: Facts, name: str) -> list[Priced]:
    """Megatron today (and MaxText's training figure): classic, with attention's QKᵀ and AV halved."""
    return _megatron(facts, causal=True)


def _per_parameter(facts: Facts, name: str, per_token: int, embedding_priced: int) -> list[Priced]:
    """`per_token` FLOPs per parameter per token on every part's parameters (the token table's `embedding_priced`
    of them), with the attention at the dense 2x forward MACs (3x in training): PaLM's and torchtitan's
    `6N + 12·L·H·Q·T` (12·L·H·Q·T·tokens = 6 x the forward attention MACs, see docs)."""
    tokens = facts.need_tokens(name)
    price = per_token * tokens
    detail = f"{per_token} per parameter per token"
    dense, lm_head, norms, other = facts.dense, facts.lm_head, facts.norms, facts.other
    return [
        *_matmuls(dense, "weight matmuls", price * dense.params, PER_PARAMETER, BIAS_ADD, detail),
        *_matmuls(lm_head, "lm_head", price * lm_head.params, PER_PARAMETER, BIAS_ADD, detail),
        *_attention(facts, causal=False),
        Priced(
            facts.embedding.flops,
            price * embedding_priced,
            PER_PARAMETER if embedding_priced else EMBEDDINGS_OUT,
            "embeddings",
            f"{embedding_priced:,} parameters priced" if embedding_priced else "",
        ),
        Priced(
            norms.flops,
            price * norms.params,
            PER_PARAMETER if norms.params else OUTSIDE_CONVENTION,
            "norms",
            f"{norms.params:,} parameters, {detail}",
        ),
        Priced(
            other.flops,
            price * other.params,
            OUTSIDE_CONVENTION,
            "other ops",
            "activations, residual and rotary adds, loss",
        ),
    ]


def palm(facts: Facts, name: str) -> list[Priced]:
    """PaLM appendix B as nanoGPT computes it: N = every parameter but the position-embedding tables (nanoGPT's
    `get_num_params()` subtracts `wpe` only: the token table stays, as the tied lm_head's weight)."""
    table = facts.embedding.params - facts.position_params
    return _per_parameter(facts, name, 6 if facts.training else 2, table)


def torchtitan(facts: Facts, name: str) -> list[Priced]:
    """torchtitan: N = parameters less every embedding table (`exclude_embedding=True`): norms and lm_head in."""
    return _per_parameter(facts, name, 6 if facts.training else 2, 0)


def maxtext(facts: Facts, name: str) -> list[Priced]:
    """MaxText: training as megatron-causal (weights 3x, logits in, attention halved); a prefill (inference) as
    its `calculate_prefill_tflops_per_device`: 2 per parameter (all of them, embeddings in) per token, plus the
    causal attention (half the dense forward)."""
    if facts.training:
        return _megatron(facts, causal=True)
    tokens = facts.need_tokens(name)
    price = 2 * tokens
    detail = "2 per parameter per token"
    dense, lm_head, norms, other, embedding = facts.dense, facts.lm_head, facts.norms, facts.other, facts.embedding
    return [
        *_matmuls(dense, "weight matmuls", price * dense.params, PER_PARAMETER, BIAS_ADD, detail),
        *_matmuls(lm_head, "lm_head", price * lm_head.params, PER_PARAMETER, BIAS_ADD, detail),
        *_attention(facts, causal=True),
        Priced(embedding.flops, price * embedding.params, PER_PARAMETER, "embeddings", detail),
        Priced(
            norms.flops, price * norms.params, PER_PARAMETER if norms.params else OUTSIDE_CONVENTION, "norms", detail
        ),
        Priced(other.flops, price * other.params, OUTSIDE_CONVENTION, "other ops"),
    ]


def vllm(facts: Facts, name: str) -> list[Priced]:
    """vLLM's prefill: the exact forward, but the lm_head runs on the last token of each sequence only."""
    tokens = facts.need_tokens(name)
    sequences = facts.sequences or 1
    lm_head = facts.lm_head
    everything_else = facts.flops - lm_head.flops
    return [
        Priced(everything_else, everything_else, LM_HEAD_LAST, "everything but the lm_head"),
        Priced(
            lm_head.flops,
            lm_head.flops * sequences // tokens,
            LM_HEAD_LAST,
            "lm_head",
            f"{sequences} of {tokens} tokens",
        ),
    ]


def _derived(facts: Facts) -> tuple[str, ...]:
    """L, H·Q, T and N as read off the count (docs: "Reading L, H, Q, T")."""
    layers, seq = facts.attention.layers, facts.sequence_length()
    if not (layers and seq and facts.tokens):
        return ()
    # forward attention MACs = L x (QKᵀ + AV) = L x 2·H·Q·T² per sequence = 2·L·H·Q·T x tokens
    width, rest = divmod(facts.attention.forward_macs, 2 * layers * seq * facts.tokens)
    heads_width = f"{width:,}" if not rest else f"{facts.attention.forward_macs / (2 * layers * seq * facts.tokens):g}"
    n = facts.params - facts.position_params
    return (f"read off the count: L = {layers} attention layers, H·Q = {heads_width}, T = {seq}, N (palm) = {n:,}",)


PROFILES: tuple[LlmProfile, ...] = (
    LlmProfile(
        "megatron",
        "classic Megatron-LM: 3x forward matmul FLOPs, lm_head in, embeddings out, dense attention",
        MEGATRON_SOURCE,
        megatron,
    ),
    LlmProfile(
        "megatron-causal",
        "Megatron-LM today: classic, with causal attention's QK^T and AV halved",
        MEGATRON_CAUSAL_SOURCE,
        megatron_causal,
    ),
    LlmProfile("palm", "PaLM / nanoGPT: 6N + 12·L·H·Q·T per token, N without position embeddings", PALM_SOURCE, palm),
    LlmProfile(
        "torchtitan", "torchtitan: 6·(params - embedding params) + 12·L·H·Q·T per token", TORCHTITAN_SOURCE, torchtitan
    ),
    LlmProfile("maxtext", "MaxText: weight matmuls and logits 3x, causal attention halved", MAXTEXT_SOURCE, maxtext),
    LlmProfile(
        "vllm",
        "vLLM prefill: the exact forward with the lm_head on the last token only",
        VLLM_SOURCE,
        vllm,
        inference_only=True,
    ),
)
