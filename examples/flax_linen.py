"""Two Flax Linen models that docs/jax.md measures beside XLA's own cost analysis.

- `ScannedStack`: 12 pre-norm MLP layers run by `nn.scan` (one layer's parameters stacked 12 times), the way
  Linen writes deep models. This engine counts the scanned layer 12 times; XLA's `cost_analysis()` costs the
  `while` body once.
- `TabulateExample`: the model of flax's `Module.tabulate(..., compute_flops=True)` comparison (google/flax PR
  #4948): Dense 100->20, ReLU, BatchNorm with batch statistics, Dense 20->50, on a batch of 16.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["MLPLayer", "ScannedStack", "TabulateExample", "scanned_stack", "stack_inputs"]


class MLPLayer(nn.Module):
    """``x + down(relu(up(norm(x))))``, the step function `nn.scan` runs (carry in, carry out)."""

    width: int
    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array, _: None) -> tuple[jax.Array, None]:
        h = nn.Dense(self.hidden, name="up")(nn.LayerNorm(name="norm")(x))
        return x + nn.Dense(self.width, name="down")(jax.nn.relu(h)), None


class ScannedStack(nn.Module):
    """`depth` MLPLayers under `nn.scan` (module path `layers`), then a 10-way `head`."""

    width: int = 64
    hidden: int = 256
    depth: int = 12

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        layers = nn.scan(
            MLPLayer,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=self.depth,
        )(self.width, self.hidden, name="layers")
        x, _ = layers(x, None)
        return nn.Dense(10, name="head")(x)


def scanned_stack() -> ScannedStack:
    """The 12-layer stack as a zero-argument factory (`[tool.flopbudget.models]` targets)."""
    return ScannedStack()


def stack_inputs(batch: int = 8, width: int = 64) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((batch, width), jnp.float32)


class TabulateExample(nn.Module):
    """flax's tabulate comparison model (PR #4948), unchanged: train-mode BatchNorm (batch statistics, updated
    running averages)."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(20)(x)
        h = nn.relu(h)
        h = nn.BatchNorm(use_running_average=False)(h)
        return nn.Dense(50)(h)
