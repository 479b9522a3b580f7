"""Zero-argument factories for `[tool.flopbudget.models]`, whose targets are `"module:callable"` called with none.

The decoders take a config object, so `gpt_tiny` and `llama_tiny` wrap their tiny configurations. The vision
models with millions of weights are built on the meta device: a count needs shapes only, and skipping the random
initialisation of their weights (0.3 s for ResNet-18, 0.9 s for ViT-B/16 on one CPU core) keeps
`flopbudget check` quick enough for a pre-commit hook. The counts are identical either way.
"""

from __future__ import annotations

import torch

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig
from examples.resnet import ResNet, resnet18, resnet50
from examples.vit import VisionTransformer, vit_b_16

__all__ = ["gpt_tiny", "llama_tiny", "resnet18_on_meta", "resnet50_on_meta", "vit_b_16_on_meta"]


def gpt_tiny() -> GPT:
    """GPT-2 layout, 2 layers of width 64 (112,384 parameters); token ids up to 64 positions."""
    return GPT(GPTConfig.tiny())


def llama_tiny() -> Llama:
    """Llama layout with grouped-query attention, 2 layers of width 64 (102,720 parameters)."""
    return Llama(LlamaConfig.tiny())


def resnet18_on_meta() -> ResNet:
    """ResNet-18 with meta (shape-only) weights."""
    with torch.device("meta"):
        return resnet18()


def resnet50_on_meta() -> ResNet:
    """ResNet-50 with meta (shape-only) weights."""
    with torch.device("meta"):
        return resnet50()


def vit_b_16_on_meta() -> VisionTransformer:
    """ViT-B/16 at 224x224 with meta (shape-only) weights."""
    with torch.device("meta"):
        return vit_b_16()
