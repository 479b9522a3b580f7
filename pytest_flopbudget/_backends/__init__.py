"""Backends: one module per kind of model, behind one protocol, chosen in one place.

`protocol.py` says what a backend does (accepts a target or a model object, loads an entry into a model and its
inputs, counts it), `registry.py` finds every backend (bundled or installed, through the entry-point group
`pytest_flopbudget.backends`) and orders them, `dispatch.py` picks the backend and holds the public `count()` and
`count_entry()`, `formulas.py` is `register_formula` over the backends' formula tables, and each implementation is
a module of its own: `torch_models.py` (PyTorch, `package.module:factory` targets), `jax_models.py` (Flax and JAX,
the same spelling, chosen by the loaded object through `references.py`) and `onnx_files.py` (`.onnx` files). Each
imports its framework, through `counting/torch`, `counting/jax` or `counting/onnx`, only when it loads or counts,
so an ONNX-only project never imports torch, and neither imports jax.
"""

from __future__ import annotations

from pytest_flopbudget._backends.dispatch import (
    backend_for,
    backend_for_model,
    backend_for_target,
    count,
    count_entry,
    entry_counter,
)
from pytest_flopbudget._backends.protocol import Backend, CountOptions, Loaded
from pytest_flopbudget._backends.registry import backend_named, backends

__all__ = [
    "Backend",
    "CountOptions",
    "Loaded",
    "backend_for",
    "backend_for_model",
    "backend_for_target",
    "backend_named",
    "backends",
    "count",
    "count_entry",
    "entry_counter",
]
