"""A small decoder with a KV cache and no Hugging Face `generate`: the decode-step protocol's test model.

`forward(ids)` is the prefill; `decode_step(token, keys, values)` attends one new token over `keys`/`values`
(one tensor pair per layer, `layers x batch x heads x context x head_dim`), as docs/generation.md describes.
"""

from __future__ import annotations

import torch
from torch import nn

LAYERS, HEADS, HEAD_DIM, VOCAB = 2, 4, 8, 32
WIDTH = HEADS * HEAD_DIM


class CachedDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.qkv = nn.ModuleList(nn.Linear(WIDTH, 3 * WIDTH) for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def _attend(self, x: torch.Tensor, layer: int, past: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = (t.view(batch, length, HEADS, HEAD_DIM).transpose(1, 2) for t in self.qkv[layer](x).chunk(3, dim=-1))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        weights = (q @ k.transpose(-1, -2)).softmax(-1)
        return x + (weights @ v).transpose(1, 2).reshape(batch, length, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in range(LAYERS):
            x = self._attend(x, layer, None)
        return self.head(x[:, -1])

    def decode_step(self, token: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        x = self.embed(token)
        for layer in range(LAYERS):
            x = self._attend(x, layer, (keys[layer], values[layer]))
        return self.head(x[:, -1])


def decoder() -> CachedDecoder:
    return CachedDecoder().eval()


def decode_inputs(model: CachedDecoder, context: int) -> dict[str, torch.Tensor]:
    """One decode step's inputs with a cache of `context` tokens."""
    cache = torch.zeros(LAYERS, 1, HEADS, context, HEAD_DIM)
    return {"token": torch.zeros(1, 1, dtype=torch.int64), "keys": cache, "values": cache.clone()}


def tiny_llama() -> nn.Module:
    """transformers' Llama from a small config (random weights, eager attention so FlopCounterMode sees it): the
    Hugging Face `generate` counterpart of `decoder()`. transformers is imported here, by the tests that have it."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, attn_implementation="eager",
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()
