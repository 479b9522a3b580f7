"""Fake tensors built from a template (fast_fake.py) are indistinguishable from the official constructor's."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensor, FakeTensorConfig, FakeTensorMode  # noqa: E402

from pytest_flopbudget._counting.torch.fast_fake import FakeFactory  # noqa: E402

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


class _Scan(torch.nn.Module):
    """A per-step loop in the manner of Mamba's slow path: views, elementwise ops and a matmul per token."""

    def __init__(self) -> None:
        super().__init__()
        self.decay = torch.nn.Parameter(torch.rand(8, 4))

    def forward(self, x: Any) -> Any:
        state = torch.zeros(x.shape[0], 8, 4)
        outputs = []
        for step in range(x.shape[1]):
            state = self.decay * state + x[:, step, :].unsqueeze(-1)
            outputs.append(torch.matmul(state, x[:, step, :4].unsqueeze(-1)).squeeze(-1))
        return x + torch.stack(outputs, dim=1)  # the input's shape, so that layers chain


def _constructed(monkeypatch: pytest.MonkeyPatch, layers: int, steps: int) -> int:
    """How often a count of `layers` scan layers of `steps` steps ran the official FakeTensor constructor."""
    from pytest_flopbudget import count

    constructed = 0
    original = FakeTensor.__new__

    def counting_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal constructed
        constructed += 1
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(FakeTensor, "__new__", staticmethod(counting_new))
    with torch.no_grad():
        report = count(torch.nn.Sequential(*(_Scan() for _ in range(layers))), torch.zeros(2, steps, 8))
    monkeypatch.undo()
    # per step: the state update multiplies and adds 2*8*4 elements; the (8x4)@(4x1) matmul is 2*8*4 MACs; the
    # residual adds 2*8 elements
    assert report.macs == layers * steps * 2 * 8 * 4
    assert report.flops == layers * steps * (2 * (2 * 8 * 4) + 2 * (2 * 8 * 4) + 2 * 8)
    return constructed


def test_repeated_scan_layers_replay_every_output_from_the_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mamba's 32 layers repeat one scan on the same shapes: after the first layer every op's output is replayed,
    and a replayed output must come from the template, not the constructor (which cost a third of a count)."""
    _constructed(monkeypatch, layers=1, steps=16)  # first counts in a process build more (fake mode's own cache)
    four = _constructed(monkeypatch, layers=4, steps=16)
    eight = _constructed(monkeypatch, layers=8, steps=16)
    assert four > 0  # the inputs, the template and ops new to the memo
    # Four more layers of 16 steps replay about 300 more outputs; at most one per layer may be built by fake mode:
    # the first step's multiply by the zero state, a known value (data_dependent.py), runs in fake mode.
    assert eight - four <= 4
