"""Backends: one module per kind of model, behind one protocol, chosen in one place.

`protocol.py` says what a backend does (accepts a target or a model object, loads an entry into a model and its
inputs, counts it), `dispatch.py` picks the backend and holds the public `count()` and `count_entry()`, and each
implementation is a module of its own: `torch_models.py` (PyTorch, `package.module:factory` targets) and
`onnx_files.py` (`.onnx` files). Each imports its framework, through `counting/torch` or `counting/onnx`, only
when it loads or counts, so an ONNX-only project never imports torch.
"""

from __future__ import annotations

from pytest_flopbudget._backends.dispatch import (
    BACKENDS,
    backend_for,
    backend_for_model,
    backend_for_target,
    count,
    count_entry,
    entry_counter,
)
from pytest_flopbudget._backends.protocol import Backend, CountOptions, Loaded

__all__ = [
    "BACKENDS",
    "Backend",
    "CountOptions",
    "Loaded",
    "backend_for",
    "backend_for_model",
    "backend_for_target",
    "count",
    "count_entry",
    "entry_counter",
]
