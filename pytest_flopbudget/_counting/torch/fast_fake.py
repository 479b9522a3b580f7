"""Fake tensors for replayed outputs, built at a third of the cost of `FakeTensor(mode, meta, device)`.

A sequential scan (Mamba's and RWKV's per-token loops) dispatches over 100k ops, nearly all replayed by the shape
memo, and each replay makes one fresh fake tensor. Profiled (cProfile, RWKV at sequence 128), making them was a third
of the count: `FakeTensor.__new__` validates its arguments, normalises the device and sets about twenty attributes
through descriptors (the memo slots for `nonzero`, `item`, `unique`...), and `unset_fake_temporarily` is a Python
context manager around a one-line meta allocation.

For a fresh meta tensor all of that always comes out the same: the constructor's attributes are constants of the
fake mode and the device. So the first tensor for each device is built by the official constructor, its attributes
become a template, and later tensors are `Tensor._make_subclass` plus one dict update. The meta allocation runs with
the Python dispatch key excluded (a C++ guard) instead of popping fake mode off the mode stack.

The template is checked when made: a tensor built the fast way must have exactly the attributes and dispatch keys of
the official one, or the factory keeps using the official constructor (a torch version that constructs fake tensors
differently, or fake mode's debug tracing, which records a traceback per tensor).
"""

from __future__ import annotations

from typing import Any

import torch

_PYTHON_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)


class FakeFactory:
    """Fresh fake tensors (and fake views on an existing fake tensor's storage) of one `FakeTensorMode`."""

    def __init__(self, fake_mode: Any) -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        self._mode = fake_mode
        self._cls = FakeTensor
        self._templates: dict[torch.device, dict[str, Any] | None] = {}
        # what the constructor marks on each tensor's data pointer, by the mode's setting
        unsafe = fake_mode._allow_unsafe_data_ptr_access
        self._mark = (
            torch._C._set_warn_deprecated_on_mutable_data_ptr if unsafe else torch._C._set_throw_on_mutable_data_ptr
        )

    def empty(self, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return self.wrap(meta, device)

    def view(
        self, base: Any, shape: tuple[int, ...], stride: tuple[int, ...], offset: int, dtype: torch.dtype, device: Any
    ) -> Any:
        """A fake view on `base`'s (meta) storage, as fake mode's own cache builds a cached view; None if `base` is
        not a fake tensor of this mode."""
        if not isinstance(base, self._cls) or base.fake_mode is not self._mode:
            return None
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            meta = torch.empty((0,), dtype=dtype, device="meta")
            meta.set_(base.untyped_storage(), offset, shape, stride)
        return self.wrap(meta, device)

    def wrap(self, meta: torch.Tensor, device: torch.device) -> Any:
        """`FakeTensor(mode, meta, device)` for a meta tensor that requires no grad."""
        if device not in self._templates:
            self._templates[device] = self._template(device)
        template = self._templates[device]
        if template is None:
            return self._cls(self._mode, meta, device)
        fake = torch.Tensor._make_subclass(self._cls, meta, False, dispatch_device=True, device_for_backend_keys=device)
        self._mark(fake)
        fake.__dict__.update(template)
        return fake

    def _template(self, device: torch.device) -> dict[str, Any] | None:
        """The official constructor's attributes for `device`, or None if the fast path would not reproduce it."""
        from torch._subclasses.fake_tensor import FakeTensorConfig

        if FakeTensorConfig.debug:
            return None
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            official = self._cls(self._mode, torch.empty((1,), device="meta"), device)
            template = dict(official.__dict__)
            fast = torch.Tensor._make_subclass(
                self._cls, torch.empty((1,), device="meta"), False, dispatch_device=True, device_for_backend_keys=device
            )
        self._mark(fast)
        fast.__dict__.update(template)
        same = (
            fast.__dict__ == official.__dict__
            and torch._C._dispatch_keys(fast) == torch._C._dispatch_keys(official)
            and fast.device == official.device
        )
        return template if same else None
