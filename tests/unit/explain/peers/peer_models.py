"""The founding cases' models, small enough for a real forward in a unit test, and a shorthand for the figures."""

from __future__ import annotations

from typing import Any

from pytest_flopbudget._explain.items import Explanation
from pytest_flopbudget._explain.run import explain_model


def conv_1x1(bias: bool = False) -> tuple[Any, tuple[Any, ...]]:
    """Conv2d(1, 1, 1) on one pixel: 1 MAC, so 2 FLOPs (3 with the bias)."""
    import torch

    return torch.nn.Conv2d(1, 1, 1, bias=bias), (torch.ones(1, 1, 1, 1),)


def qwen2_tiny() -> tuple[Any, tuple[Any, ...]]:
    """A Qwen2 decoder from a config (random weights, nothing downloaded): 2 layers, 64 wide, 4 query heads of 16
    and 2 key-value heads, MLP 128, vocabulary 128, on 16 tokens."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(config), (torch.zeros(1, 16, dtype=torch.long),)


def explained(model: Any, args: tuple[Any, ...], peer: str) -> Explanation:
    return explain_model(model, args, {}, peer)


def by_reason(explanation: Explanation) -> dict[str, int]:
    """The difference each reason accounts for; none may be unexplained, and the items sum to the difference."""
    assert explanation.residual == 0
    assert all(item.reason != "unexplained" for item in explanation.items), explanation.items
    return explanation.by_reason()


def tiny_net() -> tuple[Any, tuple[Any, ...]]:
    """A convolution with a bias, batch norm, ReLU, a residual add, a max pool and a linear head, on 1x3x8x8.

    conv 3 -> 8, 3x3, padding 1: 8*8*8 = 512 outputs of 27 taps: 13,824 MACs, 27,648 + 512 (bias) = 28,160 FLOPs;
    bn: 512 elements at 4 = 2,048; relu 512; the add `y + h` 512; the 2x2 max pool: 128 windows of 4 = 512;
    fc 128 -> 10: 1,280 MACs, 2,560 + 10 = 2,570. Ours: 34,314 FLOPs.
    """
    import torch
    from torch import nn

    class TinyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.conv(x)
            y = self.relu(self.bn(h)) + h
            return self.fc(self.pool(y).flatten(1))

    torch.manual_seed(0)
    return TinyNet(), (torch.zeros(1, 3, 8, 8),)
