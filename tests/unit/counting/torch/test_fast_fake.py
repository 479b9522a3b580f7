"""Fake tensors built from a template (fast_fake.py) are indistinguishable from the official constructor's."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensor, FakeTensorConfig, FakeTensorMode  # noqa: E402

from pytest_flopbudget.counting.torch.fast_fake import FakeFactory  # noqa: E402

CPU = torch.device("cpu")


def _mode() -> Any:
    return FakeTensorMode(allow_non_fake_inputs=True, static_shapes=False)


def _official(mode: Any, shape: tuple[int, ...], stride: tuple[int, ...], dtype: Any) -> Any:
    return FakeTensor(mode, torch.empty_strided(shape, stride, dtype=dtype, device="meta"), CPU)


def test_the_fast_path_is_taken_and_matches_the_constructor() -> None:
    mode = _mode()
    factory = FakeFactory(mode)
    fast = factory.empty((2, 3, 4), (12, 1, 3), torch.float16, CPU)
    official = _official(mode, (2, 3, 4), (12, 1, 3), torch.float16)
    assert factory._templates[CPU] is not None  # the template, not the fallback, built it
    assert type(fast) is FakeTensor
    assert fast.__dict__ == official.__dict__
    assert torch._C._dispatch_keys(fast) == torch._C._dispatch_keys(official)
    assert (fast.shape, fast.stride(), fast.dtype, fast.device) == ((2, 3, 4), (12, 1, 3), torch.float16, CPU)
    assert not fast.requires_grad
    with mode:
        out = fast @ torch.ones(4, 5, dtype=torch.float16)
    assert isinstance(out, FakeTensor) and out.shape == (2, 3, 5)


def test_each_tensor_gets_its_own_attributes() -> None:
    factory = FakeFactory(_mode())
    first, second = (factory.empty((3,), (1,), torch.float32, CPU) for _ in range(2))
    first.constant = torch.zeros(3)
    assert second.constant is None
    assert first.untyped_storage()._cdata != second.untyped_storage()._cdata


def test_the_data_pointer_guard_follows_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    mode = _mode()
    monkeypatch.setattr(mode, "_allow_unsafe_data_ptr_access", False)
    fast = FakeFactory(mode).empty((3,), (1,), torch.float32, CPU)
    with pytest.raises(RuntimeError, match="data"):
        fast.data_ptr()
    with pytest.raises(RuntimeError, match="data"):
        _official(mode, (3,), (1,), torch.float32).data_ptr()


def test_debug_tracing_falls_back_to_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeTensorConfig, "debug", True)
    factory = FakeFactory(_mode())
    fake = factory.empty((3,), (1,), torch.float32, CPU)
    assert factory._templates[CPU] is None
    assert hasattr(fake, "_debug_trace")  # what the official constructor records in debug mode


def test_a_view_shares_its_base_storage_and_refuses_other_tensors() -> None:
    mode = _mode()
    factory = FakeFactory(mode)
    base = factory.empty((4, 6), (6, 1), torch.float32, CPU)
    view = factory.view(base, (6,), (1,), 6, torch.float32, CPU)
    assert view.untyped_storage()._cdata == base.untyped_storage()._cdata
    assert (view.shape, view.stride(), view.storage_offset()) == ((6,), (1,), 6)
    assert factory.view(torch.zeros(4, 6), (6,), (1,), 6, torch.float32, CPU) is None
    assert (
        factory.view(FakeFactory(_mode()).empty((4, 6), (6, 1), torch.float32, CPU), (6,), (1,), 0, torch.float32, CPU)
        is None
    )
