"""Counting a PyTorch model at the ATen level, on fake tensors by default.

The model's forward (and, for a training step, the backward) runs under a `TorchDispatchMode` (`CountingMode`,
dispatch_mode.py) that sees every ATen op after autograd and composite decomposition, i.e. the ops that would
really run. Under `FakeTensorMode` (execution.py) those ops only propagate shapes: no arithmetic and no weight
memory. The forward that runs is that of a private structural
copy of the model whose parameters and buffers are the stand-ins from the start (`model_copy.py`), so nothing the
forward writes (caches, flags, in-place weight updates, `module.to(dtype)`) can reach the caller's model. It is
called with a private copy of the inputs, made the same way, so nothing it writes to them (a Hugging Face cache's
new keys and values, an in-place update of an input tensor) reaches the caller's inputs either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten

from pytest_flopbudget._counting import signals
from pytest_flopbudget._counting.keras_rules import Call, reprice
from pytest_flopbudget._counting.torch.defer_dynamo import deferred_dynamo
from pytest_flopbudget._counting.torch.dispatch_mode import CountingMode, is_free
from pytest_flopbudget._counting.torch.execution import (
    by_identity,
    convert_by_replacing,
    execution_context,
    quiet_fake_tensor_log,
    warn_shared,
)
from pytest_flopbudget._counting.torch.failures import explain, unknown_value_needed
from pytest_flopbudget._counting.torch.generation import Generation
from pytest_flopbudget._counting.torch.keras_layers import keras_layers_of, keras_paths, keras_recording
from pytest_flopbudget._counting.torch.known_inputs import InputValues
from pytest_flopbudget._counting.torch.model_copy import ModelCopy
from pytest_flopbudget._counting.torch.model_report import build_report
from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._counting.torch.peak_memory import LiveBytes, PeakMemory
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, PEAK_MEMORY
from pytest_flopbudget._report import Report, conventions_with


@signals.delivering
def count_torch(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    training: bool = False,
    execution: str = "fake",
    loss_fn: Callable[[Any], Any] | None = None,
    method: str = "forward",
    peak: LiveBytes | None = None,
    generation: Generation | None = None,
) -> Report:
    """Every count follows the live tensor bytes of the counted call (peak_memory.py): the Report's `peak_memory`;
    `peak`, if given, is the tracker to use (to read its details afterwards). With `generation` the call is a
    generation (generation.py): the Report gets its phases."""
    if not isinstance(model, torch.nn.Module):
        raise CountingError(
            f"count() needs a torch.nn.Module, a path to an .onnx file or an onnx.ModelProto; "
            f"got {type(model).__name__}"
        )
    check_method(model, method)
    if generation is not None and execution != "fake":
        raise CountingError('generate counts on fake tensors only (execution = "fake")')
    if execution not in ("fake", "real"):
        raise CountingError(f"execution={execution!r} is not supported; use 'fake' (default) or 'real'")

    mode: CountingMode | None = None
    tracker: ModulePathTracker | None = None
    live = peak if peak is not None else LiveBytes()
    try:
        with (
            signals.delivered_during_count(),
            deferred_dynamo(),
            quiet_fake_tensor_log(),
            execution_context(execution) as context,
        ):
            stand_in = by_identity(context.tensor)
            copier = ModelCopy(context.parameter, stand_in)
            with context.outside():  # objects deep-copied for real, as they were made
                counted = copier.copy(model)
                shared_by_model = len(copier.shared)
                # forward writes to what it is passed as freely as to its module: it gets private inputs too
                fake_args, fake_kwargs = copier.copy_inputs(args, kwargs)
            warn_shared(copier.shared[:shared_by_model], "model attribute(s)")
            warn_shared(copier.shared[shared_by_model:], "input value(s)")
            if execution == "fake":
                convert_by_replacing(counted)
            tracker = ModulePathTracker(counted, keras_paths(counted))
            call = counted if method == "forward" else getattr(counted, method)  # the copy's, never the model's
            mode = CountingMode(tracker, context.memo, context.values, context.bounds, context.shapes)
            if isinstance(context.values, InputValues):
                context.values.remember_inputs((args, kwargs), stand_in)
            if training:
                counted.train()
            live.attach(tracker, (counted, fake_args, fake_kwargs))
            mode.peak = live
            try:
                formatting = context.values.formatting() if context.values is not None else contextlib.nullcontext()
                readable = context.values.readable() if context.values is not None else contextlib.nullcontext()
                keras_calls: dict[int, list[Call]] = {}
                recording = keras_recording(counted, keras_calls)
                with mode, formatting, readable, _grad_mode(training), recording:
                    if generation is not None:
                        output = generation(counted, fake_args, fake_kwargs, mode)
                    else:
                        output = call(*fake_args, **fake_kwargs)
                    if training:
                        loss = loss_fn(output) if loss_fn is not None else _loss_of(output)
                        _check_loss(loss)
                        # a training loop backpropagates the loss, not the output: what the backward does not
                        # need of it (the logits) is freed first (the step's convention: peak_memory.py)
                        del output
                        torch.autograd.grad(loss, _grad_leaves(loss), allow_unused=True)
                mode._note_routing_used()
            except CountingError:
                raise
            except Exception as exc:
                if signals.from_signal(exc):  # a harness's timeout: its own exception, not the model's error
                    raise
                raise unknown_value_needed(exc, model, mode) or explain(
                    exc, model, tracker, mode, execution, method
                ) from None
    finally:
        if tracker is not None:
            tracker.close()

    if mode.unsized_bytes:  # part of the traffic has no size: no figure at all rather than a low one
        mode.tally.forget(BYTES, {op for layer in mode.tally.layers.values() for op in layer.ops if is_free(op)})
    bytes_measured = not mode.unsized_bytes
    report = build_report(model, mode.tally, tracker, training, execution, args, kwargs, counted, bytes_measured)
    if counted is not None and keras_calls:
        reprice(report, keras_layers_of(counted), keras_calls)
    measured = live.result()
    if not live.failed and measured.unsized == 0:  # a storage it could not size would make the peak low: say nothing
        report.peak_memory, report.peak_layer = measured.bytes, measured.layer
        report.memory_timeline = live.timeline()
        report.optional_metrics = report.optional_metrics | {PEAK_MEMORY}
        report.conventions = conventions_with(report.optional_metrics)
    if generation is not None:
        report.phases = generation.phases
        report.model = f"{report.model}.generate"
    elif method != "forward":
        report.model = f"{report.model}.{method}"
    return report


def measure_peak(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    training: bool = False,
    execution: str = "fake",
    loss_fn: Callable[[Any], Any] | None = None,
    method: str = "forward",
) -> PeakMemory:
    """Counts `model(*args, **kwargs)` as `count()` does and returns the peak of live tensor bytes during it
    (see peak_memory.py for what is in the figure and what is not)."""
    live = LiveBytes()
    count_torch(
        model, args, kwargs or {}, training=training, execution=execution, loss_fn=loss_fn, method=method, peak=live
    )
    return live.result()


def check_method(model: torch.nn.Module, method: str) -> None:
    """`method=` names a callable attribute of the model (`decode`, `encode`); anything else fails before the count."""
    if method == "forward":
        return
    if not isinstance(method, str) or not method.isidentifier() or method.startswith("__"):
        raise CountingError(f"method={method!r} is not a method name; give one such as 'decode'")
    if not callable(getattr(model, method, None)):
        public = sorted(
            name for name in dir(type(model)) if not name.startswith("_") and callable(getattr(type(model), name, None))
        )
        hint = [name for name in public if not hasattr(torch.nn.Module, name)][:8]
        listed = f"; its own methods: {', '.join(hint)}" if hint else ""
        raise CountingError(f"{type(model).__name__} has no method {method!r}{listed}")


@contextlib.contextmanager
def _grad_mode(training: bool) -> Iterator[None]:
    if training:
        with torch.enable_grad():
            yield
    else:
        yield


def _loss_of(output: Any) -> Any:
    """The loss of a training step without `loss_fn`: the model's own, where its output carries one as a training
    loop reads it (`output.loss`, or `output["loss"]`: a Hugging Face model given `labels`), else the sum of every
    output that requires grad."""
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss
    return _sum_outputs(output)


def _sum_outputs(output: Any) -> Any:
    leaves = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        raise CountingError(
            "training=True needs an output that requires grad; the model's outputs do not "
            "(are all parameters frozen?), or pass loss_fn= to build the loss"
        )
    loss = leaves[0].sum()
    for leaf in leaves[1:]:
        loss = loss + leaf.sum()
    return loss


def _check_loss(loss: Any) -> None:
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise CountingError("loss_fn must return a scalar tensor (one element) to run the backward pass")


def _grad_leaves(loss: Any) -> list[Any]:
    """Every leaf the backward would accumulate into; autograd.grad to them writes no .grad anywhere."""
    seen: set[Any] = set()
    stack, leaves = [loss.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves
