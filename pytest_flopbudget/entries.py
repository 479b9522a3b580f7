"""Turn a `ModelEntry` into a counted Report: import the target, build the inputs, count.

This is where the user's code runs, so every failure is caught and rephrased as one line naming the pyproject
key to fix (`pyproject.toml:5: tool.flopbudget.models.x.target: cannot import 'pkg.models': ...`). torch is
imported only here and only for PyTorch targets, so an ONNX-only project never loads it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .config import InputSpec, ModelEntry
from .errors import CountingError, FlopBudgetError
from .report import Report
from .source import LocatedError, Problem, Source


def import_object(reference: str, root: Path, source: Source) -> Any:
    """`"package.module:attr.attr"` -> the object, importing with `root` on `sys.path` as a user would expect."""
    module_name, _, attributes = reference.partition(":")
    root_text = str(root)
    if root_text not in sys.path:
        sys.path.insert(0, root_text)
    importlib.invalidate_caches()  # files written since the last import (generated models) must be found
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's to fix, reported in one line
        raise _problem(source, f"cannot import {module_name!r}: {_describe(exc)}") from None
    for attribute in attributes.split("."):
        try:
            obj = getattr(obj, attribute)
        except AttributeError:
            raise _problem(source, f"{module_name!r} has no attribute {attributes!r}") from None
    return obj


def load_model(entry: ModelEntry, root: Path) -> Any:
    """The nn.Module for a PyTorch target (calling a factory), or the resolved path of an .onnx target."""
    source = entry.source_of("target")
    if entry.is_onnx:
        path = (root / entry.target).resolve()
        if not path.is_file():
            raise _problem(source, f"no such ONNX file: {path}")
        return str(path)
    import torch

    obj = import_object(entry.target, root, source)
    if isinstance(obj, torch.nn.Module):
        return obj
    if not callable(obj):
        raise _problem(source, f"{entry.target} is a {type(obj).__name__}, not a torch.nn.Module or a factory")
    try:
        model = obj()
    except Exception as exc:  # the factory is user code
        raise _problem(source, f"{entry.target}() raised {_describe(exc)}") from None
    if not isinstance(model, torch.nn.Module):
        raise _problem(source, f"{entry.target}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def build_inputs(entry: ModelEntry, root: Path) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword example inputs for a PyTorch target.

    Generated inputs are meta tensors under fake execution (no memory, whatever the batch size) and zeros
    under real execution: FLOPs depend on shapes, not values.
    """
    spec = entry.inputs
    source = entry.source_of("inputs")
    if spec is None:
        return (), {}
    if isinstance(spec, str):
        function = import_object(spec, root, source)
        try:
            value = function() if callable(function) else function
        except Exception as exc:  # user code
            raise _problem(source, f"{spec}() raised {_describe(exc)}") from None
        if isinstance(value, Mapping):
            return (), dict(value)
        if isinstance(value, (tuple, list)):
            return tuple(value), {}
        return (value,), {}
    device = "meta" if entry.execution == "fake" else "cpu"
    if isinstance(spec, dict):
        return (), {name: _tensor(s, device) for name, s in spec.items()}
    return tuple(_tensor(s, device) for s in spec), {}


def count_entry(entry: ModelEntry, root: Path) -> Report:
    """Count one configured model. Inference models run in eval() under no_grad, as they would be served.

    Raises `LocatedError` for a bad target or inputs and `CountingError` (prefixed with the model's table) when
    the model itself fails to run.
    """
    from .counting import count

    model = load_model(entry, root)
    if entry.is_onnx:
        inputs = {name: list(s.shape) for name, s in entry.inputs.items()} if isinstance(entry.inputs, dict) else None
        return _counted(entry, lambda: count(model, inputs=inputs))
    args, kwargs = build_inputs(entry, root)
    if entry.training:
        return _counted(entry, lambda: count(model, *args, training=True, execution=entry.execution, **kwargs))
    with _inference(model):
        return _counted(entry, lambda: count(model, *args, execution=entry.execution, **kwargs))


def _counted(entry: ModelEntry, run: Any) -> Report:
    try:
        return run()
    except FlopBudgetError as exc:
        raise CountingError(f"{entry.source.where()}: {exc}") from None
    except Exception as exc:  # a backend bug must still read as one line naming the model
        raise CountingError(f"{entry.source.where()}: counting failed: {_describe(exc)}") from None


@contextlib.contextmanager
def _inference(model: Any) -> Iterator[None]:
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _tensor(spec: InputSpec, device: str) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype)
    return torch.zeros(spec.shape, dtype=dtype, device=device)


def _problem(source: Source, message: str) -> LocatedError:
    return LocatedError([Problem(source, message)])


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
