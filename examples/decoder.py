"""Decoder-only language models (Llama-style and GPT-2-style) written from scratch.

Both are built so that they can be instantiated under ``with torch.device("meta"):``: nothing in
``__init__`` reads tensor data, and rotary tables are derived from positions inside ``forward``.
That lets the plugin's tests count FLOPs for 7B/70B configurations without allocating weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "GPT",
    "GPTMLP",
    "GPTAttention",
    "GPTBlock",
    "GPTConfig",
    "Llama",
    "LlamaAttention",
    "LlamaBlock",
    "LlamaConfig",
    "LlamaMLP",
    "RMSNorm",
    "gpt_inputs",
    "llama_inputs",
]


# --------------------------------------------------------------------------------------------
# Llama
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlamaConfig:
    """Llama hyper-parameters. ``n_kv_heads < n_heads`` gives grouped-query attention."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    mlp_hidden: int
    max_seq: int
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2 != 0:
            raise ValueError(f"rotary embeddings need an even head_dim, got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def tiny(cls) -> LlamaConfig:
        """Small enough to run a real forward in a unit test; still exercises GQA (4 q / 2 kv heads)."""
        return cls(vocab_size=128, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=160, max_seq=64)

    @classmethod
    def llama_7b(cls) -> LlamaConfig:
        """Llama-2-7B shapes: 6,738,415,616 parameters (untied embeddings, no GQA)."""
        return cls(
            vocab_size=32000,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=32,
            mlp_hidden=11008,
            max_seq=4096,
        )

    @classmethod
    def llama_70b(cls) -> LlamaConfig:
        """Llama-2-70B shapes: 68,976,648,192 parameters (8 kv heads, i.e. GQA group size 8)."""
        return cls(
            vocab_size=32000,
            d_model=8192,
            n_layers=80,
            n_heads=64,
            n_kv_heads=8,
            mlp_hidden=28672,
            max_seq=4096,
        )


class RMSNorm(nn.Module):
    """Root-mean-square norm (no mean subtraction, no bias).

    The statistics are computed in float32 so half-precision inputs do not lose accuracy in the
    squared mean; the result is cast back to the input dtype before the learned scale.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Map (x1, x2) -> (-x2, x1) on the two halves of the last dim: a 90-degree rotation per pair."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary_cos_sin(
    seq_len: int, head_dim: int, theta: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary angle tables of shape (seq_len, head_dim), computed on the fly.

    Deriving them from ``torch.arange`` in ``forward`` (instead of a precomputed buffer) keeps the
    model meta-device friendly and independent of ``max_seq``.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    positions = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate query/key vectors of shape (batch, heads, seq, head_dim) by their position's angle."""
    return x * cos + _rotate_half(x) * sin


class LlamaAttention(nn.Module):
    """Causal self-attention with rotary positions and grouped-query k/v heads."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        self.rope_theta = config.rope_theta
        kv_dim = config.n_kv_heads * config.head_dim
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.k_proj = nn.Linear(config.d_model, kv_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, kv_dim, bias=False)
        self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, seq, _ = x.shape
        q = self.q_proj(x).view(bsz, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)

        cos, sin = rotary_cos_sin(seq, self.head_dim, self.rope_theta, x.device, q.dtype)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)

        # Each kv head serves a contiguous group of query heads; repeat so shapes line up for SDPA.
        groups = self.n_heads // self.n_kv_heads
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)

        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).reshape(bsz, seq, self.n_heads * self.head_dim)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    """SwiGLU feed-forward: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.d_model, config.mlp_hidden, bias=False)
        self.up_proj = nn.Linear(config.d_model, config.mlp_hidden, bias=False)
        self.down_proj = nn.Linear(config.mlp_hidden, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """Pre-norm residual block: attention then SwiGLU MLP, each behind its own RMSNorm."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.d_model, config.rms_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.d_model, config.rms_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Llama decoder: token ids ``[batch, seq]`` -> logits ``[batch, seq, vocab]``.

    ``lm_head`` is untied from ``embed_tokens`` as in the released Llama checkpoints, which is
    why the 7B parameter count includes the vocabulary matrix twice.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(LlamaBlock(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


# --------------------------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPTConfig:
    """GPT-2 hyper-parameters; the MLP width is fixed at ``4 * d_model`` as in GPT-2."""

    vocab: int
    n_ctx: int
    d_model: int
    n_layers: int
    n_heads: int
    ln_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")

    @classmethod
    def tiny(cls) -> GPTConfig:
        """Small enough to run a real forward in a unit test."""
        return cls(vocab=128, n_ctx=64, d_model=64, n_layers=2, n_heads=4)

    @classmethod
    def gpt2_small(cls) -> GPTConfig:
        """GPT-2 small (124M): 124,439,808 unique parameters with the tied lm_head counted once."""
        return cls(vocab=50257, n_ctx=1024, d_model=768, n_layers=12, n_heads=12)


class GPTAttention(nn.Module):
    """Causal self-attention with one fused q/k/v projection (``c_attn``), as in GPT-2."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.d_model = config.d_model
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, seq, _ = x.shape
        head_dim = self.d_model // self.n_heads
        q, k, v = self.c_attn(x).split(self.d_model, dim=-1)
        q = q.view(bsz, seq, self.n_heads, head_dim).transpose(1, 2)
        k = k.view(bsz, seq, self.n_heads, head_dim).transpose(1, 2)
        v = v.view(bsz, seq, self.n_heads, head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).reshape(bsz, seq, self.d_model)
        return self.c_proj(out)


class GPTMLP(nn.Module):
    """4x-wide feed-forward with GPT-2's tanh-approximated GELU."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class GPTBlock(nn.Module):
    """Pre-LN residual block: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.ln_eps)
        self.attn = GPTAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.ln_eps)
        self.mlp = GPTMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 decoder: token ids ``[batch, seq]`` (seq <= n_ctx) -> logits ``[batch, seq, vocab]``.

    ``lm_head.weight`` *is* ``wte.weight`` (weight tying). The parameter is shared, so
    ``model.parameters()`` yields it once, but the output projection still costs its own matmul
    FLOPs -- a useful case for a FLOP counter that must not conflate parameters with compute.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab, config.d_model)
        self.wpe = nn.Embedding(config.n_ctx, config.d_model)
        self.h = nn.ModuleList(GPTBlock(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.ln_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        if seq > self.config.n_ctx:
            raise ValueError(f"sequence length {seq} exceeds n_ctx {self.config.n_ctx}")
        positions = torch.arange(seq, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# --------------------------------------------------------------------------------------------
# Example inputs
# --------------------------------------------------------------------------------------------


def llama_inputs(
    config: LlamaConfig, batch: int = 1, seq: int = 16, device: torch.device | str | None = None
) -> tuple[torch.Tensor]:
    """All-zero token ids: FLOPs depend only on shapes, so the token values are irrelevant."""
    if seq > config.max_seq:
        raise ValueError(f"seq {seq} exceeds config.max_seq {config.max_seq}")
    return (torch.zeros(batch, seq, dtype=torch.long, device=device),)


def gpt_inputs(
    config: GPTConfig, batch: int = 1, seq: int = 16, device: torch.device | str | None = None
) -> tuple[torch.Tensor]:
    """All-zero token ids; ``seq`` must not exceed ``n_ctx`` (learned positions stop there)."""
    if seq > config.n_ctx:
        raise ValueError(f"seq {seq} exceeds config.n_ctx {config.n_ctx}")
    return (torch.zeros(batch, seq, dtype=torch.long, device=device),)
