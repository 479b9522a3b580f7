"""`count()`: one entry point for every backend; torch and onnx are imported only when their backend is used.

Layout: `torch/` needs torch (the PyTorch backend), `onnx/` needs onnx and never torch (the ONNX backend); the
modules here need neither: `formulas.py` (the shape math both backends share), `registry.py` (formula tables and
the `FREE` sentinel), `tally.py` (what a count accumulates, and the skip reasons), `user_formulas.py`
(`register_formula`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from ..errors import CountingError
from ..report import Report


def count(
    model: Any,
    *example_inputs: Any,
    training: bool = False,
    execution: str = "fake",
    loss_fn: Callable[[Any], Any] | None = None,
    inputs: Mapping[str, Sequence[int]] | None = None,
    method: str = "forward",
    **forward_kwargs: Any,
) -> Report:
    """Count the FLOPs, MACs, parameters and skipped ops of one forward pass (or one training step).

    `model` is a `torch.nn.Module` (called with `example_inputs` and `forward_kwargs`), or an ONNX model given as a
    path or an `onnx.ModelProto` (with `inputs=` binding input names to shapes where the graph leaves them open).
    `method="decode"` counts that method of the model instead of forward (run on the count's private copy).
    """
    if _is_onnx(model):
        if example_inputs or forward_kwargs or training or method != "forward":
            raise CountingError(
                "an ONNX model takes input shapes as inputs={'name': [dims]}; positional example inputs, "
                "forward keyword arguments, training=True and method= apply to PyTorch models only"
            )
        from .onnx.backend import count_onnx

        return count_onnx(model, inputs=inputs)
    if inputs is not None:
        forward_kwargs["inputs"] = inputs
    if type(model).__module__.split(".")[0] in ("builtins",) or isinstance(model, (str, bytes)):
        raise CountingError(
            f"count() needs a torch.nn.Module, a path to an .onnx file or an onnx.ModelProto; "
            f"got {type(model).__name__} {model!r:.60}"
        )
    from .torch.backend import count_torch

    return count_torch(
        model, example_inputs, forward_kwargs, training=training, execution=execution, loss_fn=loss_fn, method=method
    )


def _is_onnx(model: Any) -> bool:
    if isinstance(model, (str, os.PathLike)):
        return str(model).lower().endswith(".onnx")
    return type(model).__name__ == "ModelProto" and type(model).__module__.startswith("onnx")
