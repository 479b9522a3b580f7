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
import os
from collections.abc import Iterator
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten

from pytest_flopbudget._counting import signals
from pytest_flopbudget._counting.torch.defer_dynamo import deferred_dynamo
from pytest_flopbudget._counting.torch.dispatch_mode import CountingMode, is_fake_mode_exception, is_free
from pytest_flopbudget._counting.torch.execution import (
    by_identity,
    convert_by_replacing,
    execution_context,
    quiet_fake_tensor_log,
    warn_shared,
)
from pytest_flopbudget._counting.torch.generation import Generation
from pytest_flopbudget._counting.torch.keras_layers import keras_paths
from pytest_flopbudget._counting.torch.known_inputs import InputValues
from pytest_flopbudget._counting.torch.model_copy import ModelCopy
from pytest_flopbudget._counting.torch.model_report import build_report
from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._counting.torch.peak_memory import LiveBytes, PeakMemory
from pytest_flopbudget._counting.torch.unknown_values import describe
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
                with mode, formatting, readable, _grad_mode(training):
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
                raise _unknown_value_needed(exc, model, mode) or _explain(
                    exc, model, tracker, mode, execution, method
                ) from None
    finally:
        if tracker is not None:
            tracker.close()

    if mode.unsized_bytes:  # part of the traffic has no size: no figure at all rather than a low one
        mode.tally.forget(BYTES, {op for layer in mode.tally.layers.values() for op in layer.ops if is_free(op)})
    bytes_measured = not mode.unsized_bytes
    report = build_report(model, mode.tally, tracker, training, execution, args, kwargs, counted, bytes_measured)
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


def _unknown_value_needed(exc: Exception, model: torch.nn.Module, mode: CountingMode) -> CountingError | None:
    """The failure needed a value fake mode does not know (`.item()` of a tensor computed from the weights): one
    line naming the read, its layer and the model's source line (see unknown_values.py); None for other failures."""
    read = mode.value_reads.explain(exc) if mode.value_reads is not None else None
    if read is None:
        return None
    if read.layer == "":
        layer = f"the model ({type(model).__name__})"
    else:
        layer = f"layer '{read.layer}' ({_module_type(model, read.layer)})"
    return CountingError(
        f"fake mode cannot run this model: {describe(read, layer)}; count it with execution='real' "
        f"(runs the real forward)"
    )


def _explain(
    exc: Exception,
    model: torch.nn.Module,
    tracker: ModulePathTracker,
    mode: CountingMode,
    execution: str,
    method: str = "forward",
) -> CountingError:
    """One line that says where the model failed and what to change.

    Whether to suggest real execution is decided by where the failure happened, never by the message's words (a
    real input error on fake tensors mentions FakeTensor too). Fake mode's: an op that failed on fake tensors but
    runs on real zeros, a guard on a data-dependent size, fake mode refusing an input, an exception out of our own
    counting code (named as a bug of ours), or any error after the model read a value fake mode made up (`.item()`
    or an f-string of a tensor whose value it does not know). The model's: an op that fails on real zeros of the
    same shapes too, or an exception from the model's code when it read nothing made up.
    """
    where = tracker.error_path
    if where is None:
        layer = f"the model's {method}"
    elif where == "":
        layer = f"the model ({type(model).__name__})"
    else:
        layer = f"layer '{where}' ({_module_type(model, where)})"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    real = "count it with execution='real' (runs the real forward)"
    model_raised = CountingError(f"the model raised in {layer}: {detail}; check the example inputs' shapes and dtypes")
    if execution != "fake":
        return model_raised
    failure = mode.failure_of(exc)
    if failure is not None:  # an op raised it: replayed on real zeros (see _guarded), it tells fake from real
        op, fake_only = failure
        if fake_only or is_fake_mode_exception(exc):
            return CountingError(f"fake mode cannot run this model: {layer} failed running {op}: {detail}; {real}")
        return model_raised
    if is_fake_mode_exception(exc):
        return CountingError(f"fake mode cannot run this model: {layer} failed: {detail}; {real}")
    if _raised_by_counting_code(exc):
        return CountingError(
            f"fake mode cannot run this model: pytest-flopbudget's fake-mode counting failed in {layer}: {detail} "
            f"(a bug in pytest-flopbudget, not in the model: please report it); {real}"
        )
    if mode.fake_only_failure:  # an earlier op failed only on fake tensors, and the model went on without it
        op = f" running {mode.failed_op}" if mode.failed_op else ""
        return CountingError(f"fake mode cannot run this model: {layer} failed{op}: {detail}; {real}")
    reads = mode.stand_ins_read()
    if reads:
        return CountingError(
            f"fake mode cannot run this model: {layer} failed after reading {reads[-1]} (fake mode does not know "
            f"that value and makes one up): {detail}; {real}"
        )
    return model_raised


#: Our functions that call back into the model's code with its own arguments (`module.to(dtype)` in forward, an
#: f-string's format spec): an exception through them is the model's, not ours.
_PASS_THROUGH = frozenset({"_apply_by_replacing", "format_known"})


def _raised_by_counting_code(exc: BaseException) -> bool:
    """Whether the exception came out of pytest-flopbudget's own code while the model ran (the dispatch mode, the
    shape memo, the known values, the module hooks), as opposed to the model's code or an op it called (op
    failures are told apart before: `CountingMode.failure_of`)."""
    counting = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # pytest_flopbudget/_counting/
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    # the first frames are count_torch's own, around the model's call
    index = 0
    while index < len(frames) and frames[index].co_filename.startswith(counting):
        index += 1
    ours = [code for code in frames[index:] if code.co_filename.startswith(counting)]
    return bool(ours) and ours[-1].co_name not in _PASS_THROUGH


def _module_type(model: torch.nn.Module, path: str) -> str:
    try:
        return type(model.get_submodule(path)).__name__
    except AttributeError:
        return "?"


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
