"""A Flax NNX model whose layers are one `nnx.scan` over a stacked block: the JAX counterpart of the PyTorch
examples, checked by `flopbudget check` with the rest (`[tool.flopbudget.models.flax_stack]` in pyproject.toml).

XLA's cost analysis counts a scanned body once, whatever its length; the count here charges it `depth` times, to
the scanned module's path (`blocks.lin`). The factory builds the model under `nnx.eval_shape`, so no weight is
allocated.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import nnx

__all__ = ["Block", "Stack", "flax_stack"]


class Block(nnx.Module):
    """One layer: a linear map and a tanh."""

    def __init__(self, width: int, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(width, width, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return jnp.tanh(self.lin(x))


class Stack(nnx.Module):
    """`depth` blocks stacked by `nnx.vmap` and run by `nnx.scan`, between an input and an output projection."""

    def __init__(self, features: int, width: int, depth: int, classes: int, rngs: nnx.Rngs) -> None:
        self.proj = nnx.Linear(features, width, rngs=rngs)

        @nnx.split_rngs(splits=depth)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make(rngs: nnx.Rngs) -> Block:
            return Block(width, rngs)

        self.blocks = make(rngs)
        self.head = nnx.Linear(width, classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def body(x: Any, block: Block) -> Any:
            return block(x)

        return self.head(body(self.proj(x), self.blocks))


def flax_stack() -> Stack:
    """16 features, 12 blocks of width 64, 10 classes; abstract (no weight allocated)."""
    return nnx.eval_shape(lambda: Stack(16, 64, 12, 10, nnx.Rngs(0)))
