"""Equinox models: an `eqx.Module` is a pytree of arrays and submodules, called like a function.

Counted as Flax NNX modules are (`engine.count_nnx`): the module split into its floating-point arrays (the
parameters, `eqx.partition`; real arrays, or `jax.ShapeDtypeStruct`s from `eqx.filter_eval_shape`, which allocates
nothing) and the rest, traced as one function of the parameters and the inputs, so that a training count
differentiates the parameters and nothing else. Each submodule's call runs under the named scope of its attribute
path (`blocks.0.attn.q_proj`, as `jax.tree_util` spells the path), entered by wrapping `__call__` on the submodules'
classes for the duration of the trace, as NNX's are: Equinox's own scopes (`eqx.nn.Linear`) name a class, not a
layer. Parameters are counted per layer from the same paths; an Equinox model holds no buffers (its state, where it
has one, is passed in and out by the caller: `eqx.nn.State`, an input like any other).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_flopbudget._counting.jax.engine import (
    _import_jax,
    _path_text,
    bytes_by_layer,
    count_jax,
    params_by_layer,
    scoped_class_calls,
)
from pytest_flopbudget._counting.jax.names import NNX_SCOPE
from pytest_flopbudget._report import ROOT, Report


def count_equinox(
    module: Any,
    *args: Any,
    training: bool = False,
    model_name: str = "",
    symbolic_dims: Sequence[str] = (),
    symbolic_ranges: Mapping[str, tuple[int, int]] | None = None,
    **kwargs: Any,
) -> Report:
    """Count an Equinox module's call on `args` (arrays or `jax.ShapeDtypeStruct`s). `symbolic_dims`: as
    `count_jax`'s."""
    jax = _import_jax()
    import equinox as eqx

    params, static = eqx.partition(module, lambda leaf: _floating_array(jax, leaf))

    def forward(params: Any, *call_args: Any, **call_kwargs: Any) -> Any:
        merged = eqx.combine(params, static)
        # the model's own ops are the root layer's, under whatever scope Equinox names its class with (`eqx.nn.MLP`)
        with _scoped_calls(jax, eqx, merged), jax.named_scope(NNX_SCOPE + ROOT):
            return merged(*call_args, **call_kwargs)

    return count_jax(
        forward,
        (params, *args),
        kwargs,
        training=training,
        model_name=model_name or type(module).__name__,
        params=params_by_layer(jax, params),
        state_args=1,
        symbolic_dims=symbolic_dims,
        symbolic_ranges=symbolic_ranges,
        param_bytes=bytes_by_layer(jax, params),
        buffer_bytes={},
    )


def _floating_array(jax: Any, leaf: Any) -> bool:
    """A parameter: a floating-point array, or its `ShapeDtypeStruct` (`eqx.is_inexact_array` takes arrays only)."""
    dtype = getattr(leaf, "dtype", None)
    return hasattr(leaf, "shape") and dtype is not None and bool(jax.numpy.issubdtype(dtype, jax.numpy.inexact))


def _submodules(jax: Any, eqx: Any, root: Any) -> list[tuple[str, Any]]:
    """Every submodule of `root` (not `root` itself) with its dotted attribute path, outermost first."""
    found: list[tuple[str, Any]] = []

    def visit(node: Any, prefix: str) -> None:
        def is_module(leaf: Any) -> bool:
            return leaf is not node and isinstance(leaf, eqx.Module)

        for path, leaf in jax.tree_util.tree_flatten_with_path(node, is_leaf=is_module)[0]:
            if is_module(leaf):
                dotted = ".".join(part for part in (prefix, *(_path_text(key) for key in path)) if part)
                found.append((dotted, leaf))
                visit(leaf, dotted)

    visit(root, "")
    return found


def _scoped_calls(jax: Any, eqx: Any, merged: Any) -> contextlib.AbstractContextManager[None]:
    """While tracing, every call of a submodule of `merged` runs under the named scope of its path
    (`engine.scoped_class_calls`). Instances are matched by identity: `merged` is the module this trace built,
    whose submodules are the objects its `__call__` calls."""
    submodules = _submodules(jax, eqx, merged)
    paths = {id(node): path for path, node in submodules}
    return scoped_class_calls(jax, {type(node) for _, node in submodules}, lambda instance: paths.get(id(instance)))
