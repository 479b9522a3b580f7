"""What a count runs on: fake tensors (the default) or private real clones, and the stand-ins that take the place of
the model's parameters and inputs.

`execution_context` turns tensors into fake ones (shape, strides and dtype only, on a `FakeTensorMode` with the
shape memo, the known input values and the upper bounds of data-dependent sizes) or, in real execution, into
private clones; `by_identity` makes one stand-in per tensor object; `convert_by_replacing` lets `module.to(dtype)`
in forward convert a fake copy's parameters.
"""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable

import torch

from pytest_flopbudget._counting.torch.data_dependent import KnownValues, UpperBounds
from pytest_flopbudget._counting.torch.fast_fake import FakeFactory
from pytest_flopbudget._counting.torch.known_inputs import InputValues
from pytest_flopbudget._counting.torch.lazy_shape_env import LazyShapeEnv
from pytest_flopbudget._counting.torch.ops import SAME_SHAPE_INPLACE
from pytest_flopbudget._counting.torch.shape_memo import ShapeMemo
from pytest_flopbudget._errors import CountingError


@contextlib.contextmanager
def quiet_fake_tensor_log() -> Iterator[None]:
    """Fake mode logs a full traceback when an op fails on fake tensors; we report that failure in one line."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was_disabled = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was_disabled


@dataclass
class ExecutionContext:
    """What one execution mode turns tensors into, and the fake-mode helpers (None in real execution)."""

    tensor: Callable[[Any], Any]
    parameter: Callable[[Any], Any]
    memo: ShapeMemo | None = None
    values: KnownValues | None = None
    bounds: UpperBounds | None = None
    shapes: LazyShapeEnv | None = None
    outside: Callable[[], Any] = contextlib.nullcontext


@contextlib.contextmanager
def execution_context(execution: str) -> Iterator[ExecutionContext]:
    if execution == "real":
        yield ExecutionContext(_real_stand_in, _real_parameter)
        return
    from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

    # static_shapes=False: what the mode had when it got its ShapeEnv at construction (see lazy_shape_env.py)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True, static_shapes=False)
    shapes = LazyShapeEnv(fake_mode)
    factory = FakeFactory(fake_mode)
    make_fake = factory.empty

    def to_fake(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        # Shape, strides and dtype are all a count needs. Wrapping a fresh meta tensor is several times cheaper
        # than `from_tensor` (which describes the real tensor in full); a meta tensor stands in on the CPU.
        device = torch.device("cpu") if value.is_meta else value.device
        fake = make_fake(value.shape, value.stride(), value.dtype, device)
        if value.requires_grad and (value.is_floating_point() or value.is_complex()):
            fake.requires_grad_(True)
        return fake

    def fake_parameter(value: Any) -> Any:
        fake = to_fake(value)
        fake._is_param = True  # what nn.Parameter(fake) sets: isinstance(fake, nn.Parameter) holds
        return fake

    context = ExecutionContext(
        to_fake,
        fake_parameter,
        ShapeMemo(make_fake, SAME_SHAPE_INPLACE, factory.view),
        InputValues(make_fake),
        UpperBounds(make_fake, shapes.get),
        shapes,
        unset_fake_temporarily,
    )
    with fake_mode:
        yield context


def _real_stand_in(value: Any) -> Any:
    """Real execution: a private clone, so an in-place update in forward cannot reach the caller's tensor."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_meta:
        raise CountingError("execution='real' cannot run a model or input on the meta device; use execution='fake'")
    clone = value.detach().clone()
    if value.requires_grad:
        clone.requires_grad_(True)
    return clone


def _real_parameter(value: Any) -> Any:
    return torch.nn.Parameter(_real_stand_in(value), requires_grad=value.requires_grad)


def convert_by_replacing(counted: torch.nn.Module) -> None:
    """`module.to(dtype)` inside forward (Switch Transformers' and NLLB-MoE's routers) on fake parameters.

    `Module._apply` swaps a fake parameter's contents in place (`torch.utils.swap_tensors`), which fake tensors
    refuse (fake mode holds weak references to them). The copy is private, so each of its modules can convert by
    replacing its parameters and buffers instead; shapes and dtypes, all a count reads, come out the same.
    """
    for module in counted.modules():
        module.__dict__["_apply"] = types.MethodType(_apply_by_replacing, module)


def _apply_by_replacing(self: torch.nn.Module, fn: Callable[[Any], Any], recurse: bool = True) -> torch.nn.Module:
    if recurse:
        for child in self.children():
            child._apply(fn)
    with torch.no_grad():
        for key, param in self._parameters.items():
            if param is not None:
                converted = fn(param)
                if converted is not param:
                    converted._is_param = True
                    differentiable = converted.is_floating_point() or converted.is_complex()
                    converted.requires_grad_(param.requires_grad and differentiable)
                    self._parameters[key] = converted
        for key, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[key] = fn(buffer)
    return self


def warn_shared(shared: list[str], what: str) -> None:
    if shared:
        import warnings

        warnings.warn(
            f"count(): {len(shared)} {what} cannot be copied and are shared with the count, so "
            f"forward may change them: {', '.join(shared[:5])}",
            stacklevel=4,
        )


def by_identity(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """One stand-in per tensor object: tied weights stay tied, and `m(x, x, x)` still passes the same tensor
    three times (nn.MultiheadAttention's fast path and any `a is b` branch depend on it)."""
    seen: dict[int, Any] = {}

    def stand_in(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) not in seen:
            seen[id(value)] = convert(value)
        return seen[id(value)]

    return stand_in
