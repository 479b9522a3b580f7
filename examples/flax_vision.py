"""A ResNet bottleneck and a ViT encoder layer in Flax NNX, twins of `examples.resnet.Bottleneck` and
`examples.vit.EncoderBlock`: the same math (BatchNorm in evaluation mode with eps 1e-5, LayerNorm eps 1e-6, exact
erf GELU) and the same module names, so a count's layer paths (`conv2`, `downsample.0`, `mlp.2`) can be compared
key by key with the PyTorch count (`tests/unit/counting/jax/test_jax_twins.py`).

Two modules exist only to carry a PyTorch name: `ReLU` (PyTorch's Bottleneck calls one `nn.ReLU` module, `relu`,
three times) and `GELU` (`mlp.1` of the encoder's `nn.Sequential`). Images are NHWC, Flax's layout.
MACs, FLOPs and parameters are identical to PyTorch's in every layer: `nnx.BatchNorm`, `nnx.LayerNorm`, the exact
`jax.nn.gelu` and the attention are priced by the shared rules (docs/jax.md, "Named composites");
nnx.MultiHeadAttention's projections are its submodules (`self_attention.query`, ...) where PyTorch's fused kernel
charges them to `self_attention`, so the test compares that subtree as one.
"""

from __future__ import annotations

import jax
from flax import nnx

__all__ = ["GELU", "Bottleneck", "EncoderBlock", "ReLU"]


class ReLU(nnx.Module):
    """`max(x, 0)` as a module, so its work is charged to the path PyTorch's `nn.ReLU` has."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.relu(x)


class GELU(nnx.Module):
    """The exact (erf) GELU, PyTorch's `nn.GELU()` default (`jax.nn.gelu` defaults to the tanh form)."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.gelu(x, approximate=False)


def _batch_norm(channels: int, rngs: nnx.Rngs) -> nnx.BatchNorm:
    # PyTorch's BatchNorm2d in eval(): running statistics, eps 1e-5 (its momentum 0.1 is Flax's 0.9)
    return nnx.BatchNorm(channels, use_running_average=True, epsilon=1e-5, momentum=0.9, rngs=rngs)


class Bottleneck(nnx.Module):
    """1x1 reduce -> 3x3 (stride here, ResNet v1.5) -> 1x1 expand, with a projection shortcut when the shape
    changes (`downsample.0` conv, `downsample.1` BatchNorm, as PyTorch's `nn.Sequential` names them)."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int, rngs: nnx.Rngs) -> None:
        width, out = planes, planes * self.expansion
        self.conv1 = nnx.Conv(inplanes, width, (1, 1), use_bias=False, rngs=rngs)
        self.bn1 = _batch_norm(width, rngs)
        self.conv2 = nnx.Conv(width, width, (3, 3), strides=stride, padding=((1, 1), (1, 1)), use_bias=False, rngs=rngs)
        self.bn2 = _batch_norm(width, rngs)
        self.conv3 = nnx.Conv(width, out, (1, 1), use_bias=False, rngs=rngs)
        self.bn3 = _batch_norm(out, rngs)
        self.relu = ReLU()
        downsample = None
        if stride != 1 or inplanes != out:
            projection = nnx.Conv(inplanes, out, (1, 1), strides=stride, use_bias=False, rngs=rngs)
            downsample = nnx.List([projection, _batch_norm(out, rngs)])
        self.downsample = nnx.data(downsample)

    def __call__(self, x: jax.Array) -> jax.Array:
        identity = x
        for layer in self.downsample or ():
            identity = layer(identity)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class EncoderBlock(nnx.Module):
    """Pre-LN transformer block: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``."""

    def __init__(self, hidden_dim: int, num_heads: int, mlp_dim: int, rngs: nnx.Rngs) -> None:
        self.ln_1 = nnx.LayerNorm(hidden_dim, epsilon=1e-6, rngs=rngs)
        self.self_attention = nnx.MultiHeadAttention(num_heads, hidden_dim, decode=False, rngs=rngs)
        self.ln_2 = nnx.LayerNorm(hidden_dim, epsilon=1e-6, rngs=rngs)
        self.mlp = nnx.List(
            [nnx.Linear(hidden_dim, mlp_dim, rngs=rngs), GELU(), nnx.Linear(mlp_dim, hidden_dim, rngs=rngs)]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attention(self.ln_1(x))
        y = self.ln_2(x)
        for layer in self.mlp:
            y = layer(y)
        return x + y
