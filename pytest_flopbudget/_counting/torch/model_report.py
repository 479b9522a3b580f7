"""The Report of a counted PyTorch model: the tally's per-layer figures plus what the model holds (each module's own
parameters and their bytes, its buffers' bytes, a Keras model's weights), its inputs, the versions it was counted
with, and whether its train mode changes what an inference count ran.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._counting.torch.keras_layers import keras_params
from pytest_flopbudget._counting.torch.library_versions import model_library_versions
from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, PARAM_BYTES, PARAMS
from pytest_flopbudget._report import LayerCost, Report, conventions_with


def build_report(
    model: torch.nn.Module,
    tally: Tally,
    tracker: ModulePathTracker,
    training: bool,
    execution: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    counted: torch.nn.Module | None = None,
    bytes_measured: bool = True,
) -> Report:
    layers = tally.layers
    seen: set[int] = set()
    # A Keras model is built by its first call, which ran on the copy: its weights are read there.
    keras = keras_params(counted) if counted is not None else None
    for path, own in (keras or {}).items():
        layers.setdefault(path, LayerCost()).add(PARAMS, own)
    for path, module in () if keras is not None else model.named_modules():
        own = own_bytes = 0
        for param in module.parameters(recurse=False):
            if id(param) not in seen:
                seen.add(id(param))
                own += param.numel()
                own_bytes += param.numel() * param.element_size()
        if own:
            layer = layers.setdefault(path, LayerCost())
            layer.add(PARAMS, own)
            layer.add(PARAM_BYTES, own_bytes)
        buffer_bytes = _own_buffer_bytes(module, seen)
        if buffer_bytes:
            layers.setdefault(path, LayerCost()).add(BUFFER_BYTES, buffer_bytes)
    # Keras weights are counted, not their dtypes: their bytes are not measured
    optional = frozenset({BYTES} if keras is not None else {BYTES, PARAM_BYTES, BUFFER_BYTES})
    if not bytes_measured:
        optional = optional - {BYTES}
    return Report(
        **tally.report_fields(),
        training=training,
        train_mode=not training and _train_mode_matters(model),
        backend="torch",
        model=type(model).__name__,
        inputs=[_describe(v) for v in tree_flatten((args, kwargs))[0]],
        versions={
            "torch": torch.__version__,
            "execution": execution,
            **_tool_version(),
            **model_library_versions(model),
        },
        conventions=conventions_with(optional),
        optional_metrics=optional,
    )


def _own_buffer_bytes(module: torch.nn.Module, seen: set[int]) -> int:
    """The bytes of the module's own buffers not counted on an earlier module (a shared buffer counts once), each
    at its dtype's element size; non-persistent buffers (a rotary embedding's `inv_freq`) are in: they are memory
    the model holds while it runs, though its state_dict leaves them out."""
    total = 0
    for buffer in module._buffers.values():  # what `buffers(recurse=False)` walks, without its generator chain
        if buffer is not None and id(buffer) not in seen:
            seen.add(id(buffer))
            total += buffer.numel() * buffer.element_size()
    return total


def _train_mode_matters(model: torch.nn.Module) -> bool:
    """An inference count of a model whose train mode changes what runs: batch norm computing batch statistics,
    dropout. (Only these standard modules are known to depend on the mode; others may read `self.training` too.)"""
    from torch.nn.modules.batchnorm import _NormBase
    from torch.nn.modules.dropout import _DropoutNd

    return any(module.training and isinstance(module, (_NormBase, _DropoutNd)) for module in model.modules())


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return type(value).__name__


def _tool_version() -> dict[str, str]:
    from pytest_flopbudget._version import __version__

    return {"pytest-flopbudget": __version__}
