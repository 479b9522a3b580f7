"""Helpers shared by the hand-derived ATen op tests (test_torch_ops*.py, test_properties.py).

A plain module, not a conftest and not a package: pytest's default `prepend` import mode puts this directory on
sys.path, so the test files import it as `torch_op_helpers` (after their `pytest.importorskip("torch")`).
"""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from pytest_flopbudget import Report, count
from pytest_flopbudget._counting.torch.ops import TORCH_OPS
from pytest_flopbudget._metrics import BYTES


class Call(nn.Module):
    """Runs one functional op as a model."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def op_costs(report: Report) -> dict[str, tuple[int, int, int]]:
    """op -> (calls, flops, macs), summed over all layers; ops free of FLOPs, listed only for the bytes they move
    (`cat`, `embedding`: test_torch_backend_bytes.py), are left out."""
    return {op: (cost.calls, cost.flops, cost.macs) for op, cost in report.ops.items() if not TORCH_OPS.is_free(op)}


def op_bytes(report: Report) -> dict[str, int]:
    """op -> bytes moved, summed over all layers."""
    return {op: cost.get(BYTES) for op, cost in report.ops.items()}


def run(model: Any, *inputs: Any, macs_free: bool = False, **kwargs: Any) -> Report:
    """Count in fake mode (the default); the real forward must give the same per-op breakdown and nothing may be
    skipped. `macs_free=True` also requires no multiply-accumulates at all. A plain function or op is wrapped in
    `Call`; `kwargs` go to `count` for both runs."""
    model = model if isinstance(model, nn.Module) else Call(model)
    report = count(model, *inputs, **kwargs)
    real_report = count(model, *inputs, execution="real", **kwargs)
    fake, real = op_costs(report), op_costs(real_report)
    assert real == fake, f"real execution counted {real}, fake {fake}"
    assert op_bytes(real_report) == op_bytes(report), f"bytes: real {op_bytes(real_report)}, fake {op_bytes(report)}"
    assert report.skipped == {}, f"skipped ops: {report.skipped}"
    if macs_free:
        assert report.macs == 0, f"expected no MACs, got {report.macs}: {fake}"
    return report
