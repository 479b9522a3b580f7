"""Properties every count must have, whatever the shapes (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn

from torch_op_helpers import Call  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

dims = st.integers(min_value=1, max_value=12)
SETTINGS = settings(max_examples=25, deadline=None)


@SETTINGS
@given(batch=st.integers(1, 6), channels=st.integers(1, 4), size=st.integers(4, 10), groups=st.sampled_from([1, 2]))
def test_macs_scale_linearly_with_batch(batch: int, channels: int, size: int, groups: int) -> None:
    model = nn.Sequential(
        nn.Conv2d(2 * channels, 2 * channels, 3, padding=1, groups=groups),
        nn.BatchNorm2d(2 * channels),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(2 * channels * size * size, 5),
    ).eval()
    one = count(model, torch.randn(1, 2 * channels, size, size))
    many = count(model, torch.randn(batch, 2 * channels, size, size))
    assert many.macs == batch * one.macs
    assert many.flops == batch * one.flops


@SETTINGS
@given(m=dims, n=dims, k=dims)
def test_addmm_is_mm_plus_one_flop_per_output_for_the_bias(m: int, n: int, k: int) -> None:
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    mm = count(Call(torch.mm), a, b)
    addmm = count(Call(torch.addmm), bias, a, b)
    assert addmm.macs == mm.macs == m * n * k
    assert addmm.flops == mm.flops + m * n


@SETTINGS
@given(batch=dims, m=dims, n=dims, k=dims)
def test_bmm_is_batch_times_mm(batch: int, m: int, n: int, k: int) -> None:
    mm = count(Call(torch.mm), torch.randn(m, k), torch.randn(k, n))
    bmm = count(Call(torch.bmm), torch.randn(batch, m, k), torch.randn(batch, k, n))
    assert (bmm.flops, bmm.macs) == (batch * mm.flops, batch * mm.macs)


@SETTINGS
@given(batch=dims, m=dims, n=dims, k=st.integers(2, 12))
def test_matmul_and_einsum_agree_with_bmm(batch: int, m: int, n: int, k: int) -> None:
    # k >= 2: PyTorch lowers an einsum that contracts a size-1 dimension to an elementwise multiply, which then
    # counts as 1 FLOP per output and no MAC (see docs/conventions.md); matmul keeps it a bmm.
    a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
    bmm = count(Call(torch.bmm), a, b)
    assert count(Call(torch.matmul), a, b).macs == bmm.macs
    assert count(Call(lambda x, y: torch.einsum("bmk,bkn->bmn", x, y)), a, b).macs == bmm.macs


@SETTINGS
@given(rows=dims, inp=dims, out=dims, bias=st.booleans())
def test_linear_matches_the_dense_formula(rows: int, inp: int, out: int, bias: bool) -> None:
    report = count(nn.Linear(inp, out, bias=bias), torch.randn(rows, inp))
    assert report.macs == rows * inp * out
    assert report.flops == 2 * rows * inp * out + (rows * out if bias else 0)
    assert report.params == inp * out + (out if bias else 0)


@SETTINGS
@given(batch=st.integers(1, 3), size=st.integers(3, 9), stride=st.integers(1, 3), groups=st.sampled_from([1, 2, 4]))
def test_fake_and_real_agree_on_random_convolutions(batch: int, size: int, stride: int, groups: int) -> None:
    model = nn.Sequential(nn.Conv2d(4, 8, 3, stride=stride, groups=groups), nn.ConvTranspose2d(8, 4, 2, stride=2))
    x = torch.randn(batch, 4, size, size)
    fake, real = count(model, x), count(model, x, execution="real")
    assert (fake.flops, fake.macs, fake.layers.keys()) == (real.flops, real.macs, real.layers.keys())
