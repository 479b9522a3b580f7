"""Vision Transformer (ViT-B/16 and a tiny variant) written from scratch.

Attention goes through ``nn.MultiheadAttention(batch_first=True)`` called as self-attention
with ``need_weights=False``. That combination keeps each block eligible for PyTorch's fused
inference kernel (``aten._native_multi_head_attention``) in eval mode under ``no_grad``, so the
plugin's tests can check that FLOPs hidden inside a fused op are still counted.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "Encoder",
    "EncoderBlock",
    "VisionTransformer",
    "vit_b_16",
    "vit_inputs",
    "vit_tiny",
    "vit_tiny_inputs",
]

_LN_EPS = 1e-6


class EncoderBlock(nn.Module):
    """Pre-LN transformer block: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``.

    The MLP is a plain ``Sequential`` (no dropout modules) because dropout is 0 in these
    configs and would only add no-op entries to per-module reports.
    """

    def __init__(self, hidden_dim: int, num_heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden_dim, eps=_LN_EPS)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=0.0, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden_dim, eps=_LN_EPS)
        self.mlp = nn.Sequential(
            nn.Linear(hidden_dim, mlp_dim),
            nn.GELU(),
            nn.Linear(mlp_dim, hidden_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        # Passing the *same* tensor as query, key and value is one of the fast-path conditions.
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Adds learned position embeddings, runs the blocks, applies the final LayerNorm."""

    def __init__(self, seq_length: int, num_layers: int, hidden_dim: int, num_heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim))
        self.layers = nn.ModuleList(EncoderBlock(hidden_dim, num_heads, mlp_dim) for _ in range(num_layers))
        self.ln = nn.LayerNorm(hidden_dim, eps=_LN_EPS)
        nn.init.normal_(self.pos_embedding, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return self.ln(x)


class VisionTransformer(nn.Module):
    """Patchify with a strided conv, prepend a class token, encode, classify from the class token."""

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        mlp_dim: int,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError(f"image_size {image_size} is not divisible by patch_size {patch_size}")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim

        # A conv whose kernel equals its stride is exactly a per-patch linear projection.
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        seq_length = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(seq_length, num_layers, hidden_dim, num_heads, mlp_dim)
        self.head = nn.Linear(hidden_dim, num_classes)

        self._init_weights()

    def _init_weights(self) -> None:
        """Fan-in scaled patch projection and a zero head, so a fresh model starts from uniform logits."""
        fan_in = self.conv_proj.in_channels * self.patch_size * self.patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1.0 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.conv_proj(x)  # (n, hidden, h/p, w/p)
        x = x.flatten(2).transpose(1, 2)  # (n, patches, hidden)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.head(x[:, 0])


def vit_b_16(num_classes: int = 1000, image_size: int = 224) -> VisionTransformer:
    """ViT-B/16: 86,567,656 parameters at 224px with the 1000-class head."""
    return VisionTransformer(
        image_size=image_size,
        patch_size=16,
        num_layers=12,
        num_heads=12,
        hidden_dim=768,
        mlp_dim=3072,
        num_classes=num_classes,
    )


def vit_tiny(num_classes: int = 10, image_size: int = 32) -> VisionTransformer:
    """A 2-layer, 64-wide ViT for fast tests; 4 heads (even) keeps the fused MHA path available."""
    return VisionTransformer(
        image_size=image_size,
        patch_size=8,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        mlp_dim=128,
        num_classes=num_classes,
    )


def vit_inputs(image_size: int = 224) -> tuple[torch.Tensor]:
    """One image at ViT-B/16's native resolution."""
    return (torch.randn(1, 3, image_size, image_size),)


def vit_tiny_inputs(image_size: int = 32) -> tuple[torch.Tensor]:
    """One image sized for ``vit_tiny``."""
    return (torch.randn(1, 3, image_size, image_size),)
