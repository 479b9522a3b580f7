"""The Llama decoder of `examples/decoder.py` written in Flax NNX: the same math and the same module names.

Each class is the twin of the PyTorch class of the same name (`LlamaConfig` is shared): RMSNorm in float32,
rotary positions computed in `__call__`, grouped-query attention (k/v heads repeated), a SwiGLU MLP and an untied
`lm_head`. Module attributes are named as the PyTorch ones, so a count's layer paths (`layers.0.self_attn.q_proj`)
are the same in both frameworks and the figures compare key by key: MACs, FLOPs and parameters are identical in
every layer (`tests/unit/counting/jax/test_jax_twins.py`; `jax.nn.silu`, `jnp.mean`, `jax.nn.dot_product_attention`
and `nnx.Embed` are priced by the shared rules, docs/jax.md). Where PyTorch's code runs other math than the
obvious JAX spelling (`1.0 / t` is `t.reciprocal() * 1.0` in PyTorch), this twin runs PyTorch's.

`ScannedLlama` is the same model with its blocks stacked (`nnx.vmap`) and run by `nnx.scan`, as large Flax models
are written: the jaxpr holds one block, so a 32-layer model traces as fast as a 1-layer one. Its layer paths
read `layers.self_attn.q_proj` (every step's work under the scanned module). Build either under `nnx.eval_shape`
(`abstract_llama`) and no weight is allocated: a Llama-7B counts without its 27 GB of float32 weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from examples.decoder import LlamaConfig

__all__ = [
    "Llama",
    "LlamaAttention",
    "LlamaBlock",
    "LlamaMLP",
    "RMSNorm",
    "ScannedLlama",
    "abstract_llama",
    "token_ids",
]


class RMSNorm(nnx.Module):
    """Root-mean-square norm, statistics in float32, as `examples.decoder.RMSNorm`."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        self.eps = eps
        self.weight = nnx.Param(jnp.ones((dim,), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf**2, axis=-1, keepdims=True) + self.eps)
        return normed.astype(x.dtype) * self.weight[...]


def _rotate_half(x: jax.Array) -> jax.Array:
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate((-x2, x1), axis=-1)


def rotary_cos_sin(seq_len: int, head_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """Rotary angle tables (seq_len, head_dim), computed on the fly as `examples.decoder.rotary_cos_sin`."""
    # PyTorch's `1.0 / t` runs `t.reciprocal() * 1.0` (torch.Tensor.__rtruediv__): the same two ops here
    inv_freq = jnp.reciprocal(theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)) * 1.0
    freqs = jnp.outer(jnp.arange(seq_len, dtype=jnp.float32), inv_freq)
    emb = jnp.concatenate((freqs, freqs), axis=-1)
    return jnp.cos(emb), jnp.sin(emb)


class LlamaAttention(nnx.Module):
    """Causal self-attention with rotary positions and grouped-query k/v heads (`jax.nn.dot_product_attention`,
    the XLA implementation: explicit scores, causal mask and softmax)."""

    def __init__(self, config: LlamaConfig, rngs: nnx.Rngs) -> None:
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.rope_theta = config.rope_theta
        d, kv = config.d_model, config.n_kv_heads * config.head_dim
        self.q_proj = nnx.Linear(d, d, use_bias=False, rngs=rngs)
        self.k_proj = nnx.Linear(d, kv, use_bias=False, rngs=rngs)
        self.v_proj = nnx.Linear(d, kv, use_bias=False, rngs=rngs)
        self.o_proj = nnx.Linear(d, d, use_bias=False, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        bsz, seq, _ = x.shape
        # [batch, seq, heads, head_dim]: the layout jax.nn.dot_product_attention takes
        q = self.q_proj(x).reshape(bsz, seq, self.n_heads, self.head_dim)
        k = self.k_proj(x).reshape(bsz, seq, self.n_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(bsz, seq, self.n_kv_heads, self.head_dim)

        cos, sin = rotary_cos_sin(seq, self.head_dim, self.rope_theta)
        cos, sin = cos[:, None, :], sin[:, None, :]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin

        groups = self.n_heads // self.n_kv_heads
        if groups > 1:
            k = jnp.repeat(k, groups, axis=2)
            v = jnp.repeat(v, groups, axis=2)

        out = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.reshape(bsz, seq, self.n_heads * self.head_dim))


class LlamaMLP(nnx.Module):
    """SwiGLU feed-forward: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: LlamaConfig, rngs: nnx.Rngs) -> None:
        self.gate_proj = nnx.Linear(config.d_model, config.mlp_hidden, use_bias=False, rngs=rngs)
        self.up_proj = nnx.Linear(config.d_model, config.mlp_hidden, use_bias=False, rngs=rngs)
        self.down_proj = nnx.Linear(config.mlp_hidden, config.d_model, use_bias=False, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nnx.Module):
    """Pre-norm residual block: attention then SwiGLU MLP, each behind its own RMSNorm."""

    def __init__(self, config: LlamaConfig, rngs: nnx.Rngs) -> None:
        self.input_layernorm = RMSNorm(config.d_model, config.rms_eps)
        self.self_attn = LlamaAttention(config, rngs)
        self.post_attention_layernorm = RMSNorm(config.d_model, config.rms_eps)
        self.mlp = LlamaMLP(config, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nnx.Module):
    """Token ids ``[batch, seq]`` -> logits ``[batch, seq, vocab]``; blocks in a Python loop (`layers.0`, ...)."""

    def __init__(self, config: LlamaConfig, rngs: nnx.Rngs) -> None:
        self.embed_tokens = nnx.Embed(config.vocab_size, config.d_model, rngs=rngs)
        self.layers = nnx.List([LlamaBlock(config, rngs) for _ in range(config.n_layers)])
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = nnx.Linear(config.d_model, config.vocab_size, use_bias=False, rngs=rngs)

    def __call__(self, input_ids: jax.Array) -> jax.Array:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


class ScannedLlama(nnx.Module):
    """`Llama` with its blocks stacked on a leading axis and run by `nnx.scan` (one block in the jaxpr)."""

    def __init__(self, config: LlamaConfig, rngs: nnx.Rngs) -> None:
        self.embed_tokens = nnx.Embed(config.vocab_size, config.d_model, rngs=rngs)

        @nnx.split_rngs(splits=config.n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def stacked(rngs: nnx.Rngs) -> LlamaBlock:
            return LlamaBlock(config, rngs)

        self.layers = stacked(rngs)
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = nnx.Linear(config.d_model, config.vocab_size, use_bias=False, rngs=rngs)

    def __call__(self, input_ids: jax.Array) -> jax.Array:
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(x: jax.Array, block: LlamaBlock) -> jax.Array:
            return block(x)

        return self.lm_head(self.norm(run(self.embed_tokens(input_ids), self.layers)))


def abstract_llama(config: LlamaConfig, scanned: bool = True) -> Any:
    """The model built under `nnx.eval_shape`: every parameter a `ShapeDtypeStruct`, none allocated."""
    model: Callable[..., Any] = ScannedLlama if scanned else Llama
    return nnx.eval_shape(lambda: model(config, nnx.Rngs(0)))


def token_ids(batch: int, seq: int) -> jax.ShapeDtypeStruct:
    """Abstract int32 token ids: a count reads shapes only."""
    return jax.ShapeDtypeStruct((batch, seq), jnp.int32)
