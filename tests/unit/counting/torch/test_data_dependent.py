"""Data-dependent sizes in fake mode (counting/torch/data_dependent.py): invented routing, known values, upper
bounds."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402


class Records(nn.Module):
    """Runs `fn(x, seen)`. The count runs a copy of the model, lists in its attributes included, so what the
    forward saw goes to a list held outside the model."""

    def __init__(self, fn, seen: list) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = lambda x: fn(x, seen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _tolist(t: torch.Tensor) -> list:  # type: ignore[type-arg]
    return [int(v) for v in t.flatten()]


def test_topk_indices_are_balanced_round_robin() -> None:
    seen: list = []

    def fn(x: torch.Tensor, seen: list) -> torch.Tensor:
        idx = torch.topk(x, 2, dim=-1).indices  # 3 tokens, 4 experts
        seen.append([_tolist(row) for row in idx])  # iterating and int() read the invented values
        return x

    report = count(Records(fn, seen), torch.randn(3, 4))
    # row t takes (t*2 + j) % 4: [0, 1], [2, 3], [0, 1]: distinct per row, every expert used equally often
    assert seen == [[[0, 1], [2, 3], [0, 1]]]
    assert report.estimated == {"aten.topk": 1}
    assert report.estimated_ops["aten.topk"].rule.startswith("routing indices invented")


def test_argmax_and_sort_indices() -> None:
    seen: list = []

    def fn(x: torch.Tensor, seen: list) -> torch.Tensor:
        seen.append(_tolist(torch.argmax(x, dim=-1)))  # 5 rows over 3 choices: t % 3
        seen.append(_tolist(torch.sort(x, dim=-1).indices[0]))  # the identity order
        return x

    report = count(Records(fn, seen), torch.randn(5, 3))
    assert seen == [[0, 1, 2, 0, 1], [0, 1, 2]]
    assert report.estimated == {"aten.argmax": 1, "aten.sort": 1}


def test_indices_nobody_reads_are_not_reported() -> None:
    # max(dim) returns indices too; when only the values are used, no figure rests on the routing rule
    report = count(Records(lambda x, seen: torch.max(x, dim=-1).values * 2, []), torch.randn(4, 3))
    assert report.estimated == {}


class EagerExperts(nn.Module):
    """The Mixtral/Switch eager loop: one-hot mask, experts hit, a Python loop, f-string expert names."""

    def __init__(self, experts: int = 4, top_k: int = 2, dim: int = 8) -> None:
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleDict({f"expert_{i}": nn.Linear(dim, dim, bias=False) for i in range(experts)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = torch.topk(self.router(x).softmax(-1), self.top_k, dim=-1)
        mask = nn.functional.one_hot(chosen, num_classes=len(self.experts)).permute(2, 1, 0)
        out = torch.zeros_like(x)
        for expert in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            slot, token = torch.where(mask[expert[0]])
            y = self.experts[f"expert_{expert[0]}"](x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y)
        return out


@pytest.mark.parametrize("tokens", [1, 3, 10])
def test_an_eager_expert_loop_counts_tokens_times_top_k_rows(tokens: int) -> None:
    model = EagerExperts()
    fake = count(model, torch.randn(tokens, 8))
    real = count(model, torch.randn(tokens, 8), execution="real")
    # router tokens*8*4, experts tokens*2 rows * 8*8
    assert fake.macs == real.macs == tokens * 8 * 4 + tokens * 2 * 8 * 8
    assert sum(fake.layers[f"experts.expert_{i}"].macs for i in range(4) if f"experts.expert_{i}" in fake.layers) == (
        tokens * 2 * 64
    )
    assert "aten.topk" in fake.estimated and real.estimated == {}


def test_nonzero_and_boolean_masks_count_at_their_upper_bound() -> None:
    def fn(x: torch.Tensor, seen: list) -> torch.Tensor:
        keep = x[x.sum(-1) > 0]  # boolean mask over 6 rows: at most 6 kept
        return keep @ torch.ones(4, 5)

    report = count(Records(fn, []), torch.randn(6, 4))
    # every row kept: 6*4*5 = 120 MACs
    assert report.macs == 120
    assert report.estimated_ops["aten.index"].rule.startswith("data-dependent size counted at its upper bound")


def test_a_cap_after_the_bound_applies() -> None:
    def fn(x: torch.Tensor, seen: list) -> torch.Tensor:
        idx = torch.nonzero(x[:, 0] > 0).squeeze(1)[:2]  # at most 8, then capped at 2
        return x[idx] @ torch.ones(4, 3)

    report = count(Records(fn, []), torch.randn(8, 4))
    # 2*4*3 = 24 MACs
    assert report.macs == 24 and report.estimated == {"aten.nonzero": 1}


def test_masked_select_and_unique_are_bounded() -> None:
    def fn(x: torch.Tensor, seen: list) -> torch.Tensor:
        picked = torch.masked_select(x, x > 0)  # at most 12
        return picked.exp().sum() + torch.unique(x).exp().sum()

    report = count(Records(fn, []), torch.randn(3, 4))
    assert set(report.estimated) == {"aten.masked_select", "aten._unique2"}
    assert report.skipped == {}  # unique is a sort and a neighbour compare of its 12 inputs (test_torch_ops_compare.py)


def test_item_in_python_control_flow_names_real_execution() -> None:
    class Branches(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum().item() > 0 else x

    with pytest.raises(CountingError, match=r"^fake mode cannot run this model.*execution='real'") as info:
        count(Branches(), torch.ones(2, 2))
    assert "\n" not in str(info.value)
    assert count(Branches(), torch.ones(2, 2), execution="real").estimated == {}


def test_a_real_input_error_does_not_suggest_real_execution() -> None:
    class PassesNone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(None)  # type: ignore[arg-type]  # the message lists FakeTensor among the types

    with pytest.raises(CountingError) as info:
        count(PassesNone(), torch.ones(1, 3, 4, 4))
    assert "execution='real'" not in str(info.value)
    assert "layer 'conv' (Conv2d)" in str(info.value)


def test_a_wrong_shape_is_a_model_error_not_a_fake_mode_one() -> None:
    with pytest.raises(CountingError) as info:
        count(nn.Linear(4, 2), torch.ones(3, 5))
    assert "execution='real'" not in str(info.value)
    assert "check the example inputs' shapes" in str(info.value)


def test_estimated_round_trips_through_json_and_is_absent_when_empty() -> None:
    report = count(EagerExperts(), torch.randn(3, 8))
    data = report.to_dict()
    assert Report.from_dict(data).estimated_ops == report.estimated_ops
    plain = count(nn.Linear(2, 2), torch.ones(1, 2)).to_dict()
    assert "estimated" not in plain  # baselines of ordinary models do not change
