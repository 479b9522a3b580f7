"""Integer matmuls in the PyTorch backend: their work is `int-ops`, never FLOPs or MACs, worked out by hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._metrics import INT_OPS  # noqa: E402


class IntMM(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch._int_mm(a, b)


class MM(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)


class AddMM(torch.nn.Module):
    def forward(self, c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.addmm(c, a, b)


class Mixed(torch.nn.Module):
    """A float linear layer beside an integer product: each lands in its own metric and its own layer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 5, bias=False)
        self.quant = IntMM()

    def forward(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.fc(x), self.quant(a, b)


def test_int_mm_of_int8_counts_integer_ops_and_no_flops() -> None:
    a, b = torch.zeros(32, 64, dtype=torch.int8), torch.zeros(64, 32, dtype=torch.int8)
    report = count(IntMM(), a, b)
    # int8 [32, 64] @ [64, 32] -> int32: 32*64*32 = 65,536 integer MACs, 2 ops each
    assert report.int_ops == 2 * 32 * 64 * 32 == 131_072
    assert (report.flops, report.macs) == (0, 0)
    assert report.skipped == {}  # torch._int_mm has a formula
    assert report.ops["aten._int_mm"].int_ops == 131_072
    assert report.metric(INT_OPS) == 131_072 and report.layer_metric(INT_OPS) == {"": 131_072}


def test_an_int64_mm_is_integer_work_too() -> None:
    report = count(MM(), torch.zeros(4, 6, dtype=torch.int64), torch.zeros(6, 5, dtype=torch.int64))
    assert (report.flops, report.macs, report.int_ops) == (0, 0, 2 * 4 * 5 * 6)


def test_an_integer_addmm_counts_its_bias_add_as_an_integer_op() -> None:
    c = torch.zeros(5, dtype=torch.int64)
    report = count(AddMM(), c, torch.zeros(4, 6, dtype=torch.int64), torch.zeros(6, 5, dtype=torch.int64))
    assert (report.flops, report.int_ops) == (0, 240 + 20)  # 2*4*5*6 for the product, 1 per output for the add


def test_a_float_matmul_is_unchanged_and_its_json_has_no_integer_ops() -> None:
    report = count(MM(), torch.zeros(4, 6), torch.zeros(6, 5))
    assert (report.flops, report.macs, report.int_ops) == (240, 120, 0)
    data = report.to_dict()
    assert "int-ops" not in data["totals"] and "int-ops" not in data["forward"]
    assert "int-ops" not in data["conventions"]
    assert all("int-ops" not in layer["metrics"] for layer in data["layers"].values())


def test_float_and_integer_work_per_layer() -> None:
    x = torch.zeros(3, 6)
    a, b = torch.zeros(32, 64, dtype=torch.int8), torch.zeros(64, 32, dtype=torch.int8)
    report = count(Mixed(), x, a, b)
    assert (report.layers["fc"].flops, report.layers["fc"].int_ops) == (2 * 3 * 6 * 5, 0)
    assert (report.layers["quant"].flops, report.layers["quant"].int_ops) == (0, 131_072)
    assert (report.flops, report.macs, report.int_ops) == (180, 90, 131_072)
    data = report.to_dict()
    assert data["totals"]["int-ops"] == 131_072 and data["forward"]["int-ops"] == 131_072
    assert data["layers"]["fc"]["metrics"]["int-ops"] == 0  # once a report has some, every layer says its figure
    assert "integer tensors" in data["conventions"]["int-ops"]
    assert "int_ops=131072" in repr(report)
