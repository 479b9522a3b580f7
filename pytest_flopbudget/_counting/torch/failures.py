"""Why a PyTorch count failed, in one line that says where and what to change: the model's own error, or fake mode's
(an op that fails only on fake tensors, a value fake mode does not know, fake mode refusing an input), or a bug in
pytest-flopbudget's own counting code. Where the failure happened decides, never the message's words.
"""

from __future__ import annotations

import os

import torch

from pytest_flopbudget._counting.torch.dispatch_mode import CountingMode, is_fake_mode_exception
from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._counting.torch.unknown_values import describe
from pytest_flopbudget._errors import CountingError


def unknown_value_needed(exc: Exception, model: torch.nn.Module, mode: CountingMode) -> CountingError | None:
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


def explain(
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
