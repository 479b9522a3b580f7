"""The ATen op registry as a whole: free ops vs formulas, op keys, skipped ops, and ops that still lack a formula.

Per-area hand-derived counts live next to this file: test_torch_ops_matmul.py, _conv.py, _attention.py, _norm.py,
_elementwise.py and _pool.py.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_op_helpers import Call  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.registry import FREE  # noqa: E402
from pytest_flopbudget._counting.torch.ops import FREE_OPS, TORCH_OPS, op_key  # noqa: E402

aten = torch.ops.aten


def registered_keys() -> list[str]:
    return list(TORCH_OPS.keys())


def formula_keys() -> set[str]:
    return {key for key in registered_keys() if not TORCH_OPS.is_free(key)}


# --- the registry ----------------------------------------------------------------------------------------------


def test_no_free_op_also_has_a_formula() -> None:
    assert set(FREE_OPS) & formula_keys() == set()


def test_every_listed_free_op_is_registered_free() -> None:
    # `aten.clamp_min_` is listed but deliberately not registered: op_key strips the in-place underscore, and
    # clamp_min itself is arithmetic (an elementwise formula)
    for name in FREE_OPS:
        if name == "aten.clamp_min_":
            assert TORCH_OPS.lookup("aten.clamp_min") is not FREE
            continue
        assert TORCH_OPS.lookup(name) is FREE, name


def test_registry_keys_are_normalised() -> None:
    # keys carry no overload and no in-place underscore: a key that op_key() can never produce is dead
    for key in registered_keys():
        namespace, _, name = key.partition(".")
        assert namespace in ("aten", "prim"), key
        assert "." not in name, key
        assert not (name.endswith("_") and not name.endswith("__")), key


def test_every_registered_key_is_an_op_of_this_torch() -> None:
    unknown = []
    for key in registered_keys():
        namespace, _, name = key.partition(".")
        packet = getattr(getattr(torch.ops, namespace), name, None)
        if packet is None or not packet.overloads():
            unknown.append(key)
    assert unknown == []


@pytest.mark.parametrize(
    ("overload", "key"),
    [
        (aten.add.Tensor, "aten.add"),
        (aten.add_.Tensor, "aten.add"),
        (aten.add.out, "aten.add"),
        (aten.relu_.default, "aten.relu"),
        (aten.mm.default, "aten.mm"),
        (aten._softmax.default, "aten._softmax"),
        (aten.__and__.Tensor, "aten.__and__"),
        (aten.__iand__.Tensor, "aten.__iand__"),
        (aten.native_batch_norm.default, "aten.native_batch_norm"),
    ],
)
def test_op_key(overload: Any, key: str) -> None:
    assert op_key(overload) == key


# --- ops without a formula are skipped, never counted silently ------------------------------------------------


class Inner(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.proj(x))


class Outer(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.block = nn.Sequential(Inner(fn))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


@pytest.mark.parametrize(
    ("fn", "op", "calls"),
    [
        (lambda t: torch.linalg.inv(t), "aten.linalg_inv_ex", 1),
        (lambda t: torch.linalg.inv(torch.linalg.inv(t)), "aten.linalg_inv_ex", 2),
        (lambda t: torch.fft.fft(t).real, "aten._fft_r2c", 1),
        (lambda t: torch.linalg.det(t).expand(4, 4), "aten._linalg_det", 1),
    ],
    ids=["linalg.inv", "linalg.inv-twice", "fft", "det"],
)
@pytest.mark.parametrize("execution", ["fake", "real"])
def test_op_without_formula_lands_in_skipped(fn: Callable[..., Any], op: str, calls: int, execution: str) -> None:
    report = count(Outer(fn), torch.randn(4, 4), execution=execution)
    assert report.skipped[op] == calls
    assert report.skipped_ops[op].layers == ["block.0"]
    assert report.skipped_ops[op].reason == "no formula"
    assert report.layers["block.0"].skipped[op] == calls
    assert op not in report.layers["block.0"].ops
    # only the linear is counted: 4*4*4 = 64 MACs, 128 + 16 bias = 144 FLOPs
    assert (report.flops, report.macs) == (144, 64)
    assert report.layers["block.0.proj"].flops == 144


# --- ops that should be free but are skipped ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["aten.unsafe_split", "aten.unsafe_split_with_sizes", "aten.unsafe_chunk", "aten._linalg_check_errors"]
)
def test_should_be_free(name: str) -> None:
    assert TORCH_OPS.is_free(name)


RECURRENT = [
    # GRU: input projection for all 10 (batch * time) rows at once: [10, 3] @ [3, 12] = 360 MACs;
    # recurrent projection per step [2, 4] @ [4, 12] = 96 MACs * 5 steps = 480 -> 840 MACs
    pytest.param(nn.GRU(3, 4, batch_first=True), (2, 5, 3), 840, id="gru"),
    # LSTMCell: input [2, 3] @ [3, 16] = 96 MACs and hidden [2, 4] @ [4, 16] = 128 MACs = 224
    pytest.param(nn.LSTMCell(3, 4), (2, 3), 224, id="lstm-cell"),
]


@pytest.mark.parametrize(("module", "shape", "macs"), RECURRENT)
def test_decomposed_recurrent_cells_count_their_matmuls(module: nn.Module, shape: tuple[int, ...], macs: int) -> None:
    assert count(module, torch.randn(*shape)).macs == macs


@pytest.mark.parametrize(("module", "shape", "macs"), RECURRENT)
def test_decomposed_recurrent_cells_have_no_skipped_ops(module: nn.Module, shape: tuple[int, ...], macs: int) -> None:
    report = count(module, torch.randn(*shape))
    assert (report.macs, report.skipped) == (macs, {})


def test_lstm_on_cpu() -> None:
    report = count(nn.LSTM(3, 4, batch_first=True), torch.randn(2, 5, 3))
    # 4 gates: per step input [2, 3] @ [3, 16] = 96 MACs, recurrent [2, 4] @ [4, 16] = 128 MACs; 5 steps -> 1120
    assert report.skipped == {}
    assert report.macs == 1120


def test_plain_rnn_counts() -> None:
    report = count(nn.RNN(3, 4, batch_first=True), torch.randn(2, 5, 3))
    # input projection [10, 3] @ [3, 4] = 120 MACs; recurrent [2, 4] @ [4, 4] = 32 MACs * 5 = 160 -> 280
    assert (report.macs, report.skipped) == (280, {})


LOSSES = [
    pytest.param(lambda y: F.mse_loss(y, torch.zeros_like(y)), id="mse_loss"),
    pytest.param(lambda y: F.cross_entropy(y, torch.zeros(y.shape[0], dtype=torch.long)), id="nll_loss"),
    pytest.param(lambda y: F.binary_cross_entropy(torch.sigmoid(y), torch.zeros_like(y)), id="binary_cross_entropy"),
    pytest.param(lambda y: F.binary_cross_entropy_with_logits(y, torch.zeros_like(y)), id="bce_with_logits"),
    pytest.param(lambda y: F.smooth_l1_loss(y, torch.zeros_like(y)), id="smooth_l1_loss"),
    pytest.param(lambda y: F.huber_loss(y, torch.zeros_like(y)), id="huber_loss"),
]


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_training_with_a_standard_loss_has_no_skipped_ops(loss_fn: Callable[..., Any]) -> None:
    report = count(nn.Linear(3, 2), torch.randn(4, 3), training=True, loss_fn=loss_fn)
    assert report.skipped == {}
    # the matmuls are counted either way: forward [4, 3] @ [3, 2] = 24 MACs; backward grad_W 24 MACs
    assert (report.forward.macs, report.backward.macs) == (24, 24)


def test_l1_loss_decomposes_and_counts() -> None:
    loss_fn = lambda y: F.l1_loss(y, torch.zeros_like(y))  # noqa: E731
    report = count(nn.Linear(3, 2), torch.randn(4, 3), training=True, loss_fn=loss_fn)
    # forward: addmm 2*4*2*3 + 8 = 56; sub 8, abs 8, mean 8 -> 80
    assert report.skipped == {}
    assert report.forward.flops == 56 + 3 * 8


def test_trace() -> None:
    report = count(Call(torch.trace), torch.randn(4, 4))
    assert (report.skipped, report.flops) == ({}, 4)


# --- the causal rule is stated in every report -----------------------------------------------------------------


def test_report_states_the_dense_causal_rule() -> None:
    q = torch.randn(1, 1, 4, 2)
    report = count(Call(lambda t: F.scaled_dot_product_attention(t, t, t, is_causal=True)), q)
    assert "dense" in report.conventions["causal_attention"]
    # dense: QK^T 4*4*2 + AV 4*2*4 = 64 MACs, although a causal kernel needs only the lower triangle
    assert report.macs == 64
