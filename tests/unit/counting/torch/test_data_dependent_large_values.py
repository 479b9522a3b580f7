"""Known values of large tensors in fake mode (counting/torch/data_dependent.py: VALUE_LIMIT, recipes, Untracked).

Values that follow from known ones are kept up to `VALUE_LIMIT` elements; large sources (`zeros`, `ones`) are
computed only when an op needs them; beyond the limit a value is marked untracked, and an op that needs it fails
with one line that names the tensor, never with an error dressed as the model's.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch import data_dependent  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


class Forward(nn.Module):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)  # type: ignore[no-any-return]


def keeps_five_of(columns: int) -> Forward:
    def fn(x: torch.Tensor) -> torch.Tensor:
        keep = torch.zeros(columns, dtype=torch.bool)
        keep[:5] = True
        picked = x[:, keep]  # a boolean mask: its size is known only from the mask's values
        return picked @ torch.ones(picked.shape[1], 3)

    return Forward(fn)


@pytest.mark.parametrize("columns", [16, 90_000], ids=["small", "over-the-old-65536-limit"])
def test_a_mask_built_from_known_values_sizes_exactly(columns: int) -> None:
    x = torch.randn(4, columns)
    fake = count(keeps_five_of(columns), x)
    # 5 columns kept: [4, 5] @ [5, 3] = 4*5*3 = 60 MACs, not the upper bound 4*columns*3
    assert fake.macs == count(keeps_five_of(columns), x, execution="real").macs == 60
    assert fake.estimated == {}


def test_a_large_source_is_computed_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[int, ...]] = []
    make = data_dependent._Recipe.make

    def recording(self: Any) -> Any:
        value = make(self)
        made.append(tuple(value.shape))
        return value

    monkeypatch.setattr(data_dependent._Recipe, "make", recording)

    def fn(x: torch.Tensor) -> torch.Tensor:
        cache = torch.zeros(300, 400)  # 120000 elements, overwritten with unknown data: never computed
        cache.copy_(x)
        total = int(torch.ones(300, 300).sum())  # read: computed, 90000
        return cache @ torch.ones(400, total // 30_000)

    x = torch.randn(300, 400)
    report = count(Forward(fn), x)
    assert made == [(300, 300)]
    # [300, 400] @ [400, 3]: 300*400*3 = 360000 MACs
    assert report.macs == count(Forward(fn), x, execution="real").macs == 360_000


def test_a_value_over_the_limit_that_decides_a_size_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_dependent, "VALUE_LIMIT", 1000)
    with pytest.raises(CountingError) as info:
        count(keeps_five_of(2000), torch.randn(4, 2000))
    message = str(info.value)
    assert message.startswith("fake mode cannot run this model: the model needs the values of a 2000-element bool ")
    assert "made by aten.zeros" in message and "to run aten.index, whose output size depends on them" in message
    assert "at most 1000 elements" in message and message.endswith("execution='real' (runs the real forward)")
    assert "\n" not in message and "the model raised" not in message


def test_an_untracked_index_formatted_into_a_name_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # NLLB-MoE's and Switch Transformers' lookup: self[f"expert_{idx}"] with idx from a routing mask
    monkeypatch.setattr(data_dependent, "VALUE_LIMIT", 1000)

    class Experts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.experts = nn.ModuleDict({"expert_0": nn.Linear(4, 4)})

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            routes = torch.zeros(2000, dtype=torch.int64)  # over the limit: untracked
            first = routes[0] + 0  # follows from it, small, and still untracked
            return self.experts[f"expert_{first}"](x)  # type: ignore[no-any-return]

    assert count(Experts(), torch.randn(2, 4), execution="real").macs == 2 * 4 * 4
    with pytest.raises(CountingError) as info:
        count(Experts(), torch.randn(2, 4))
    message = str(info.value)
    assert "needs the values of a 2000-element int64 tensor made by aten.zeros" in message
    assert "to format it (an f-string)" in message
    assert "KeyError" not in message and "the model raised" not in message


def test_routing_values_over_the_old_limit_route_every_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # an eager expert loop over a one-hot mask [tokens, top_k, experts] of 64 * 2 * 600 = 76800 elements
    experts, top_k, hidden = 600, 2, 4

    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.router = nn.Linear(hidden, experts)
            self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(experts))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            picks = torch.topk(self.router(x), top_k, dim=-1).indices
            mask = nn.functional.one_hot(picks, experts).permute(2, 1, 0)  # [experts, top_k, tokens]
            out = torch.zeros_like(x)
            for expert in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
                _, token = torch.where(mask[expert].squeeze(0))
                out.index_add_(0, token, self.experts[int(expert)](x[token]))
            return out

    x = torch.randn(64, hidden)
    fake, real = count(Loop(), x), count(Loop(), x, execution="real")
    # router 64*4*600 = 153600; 64 tokens x 2 picks = 128 rows through a [4 -> 4] expert: 128*16 = 2048
    assert fake.macs == real.macs == 153_600 + 2048
    assert fake.estimated == {"aten.topk": 1}


def test_unknown_data_written_through_a_view_makes_the_whole_tensor_unknown() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        keep = torch.zeros(16, dtype=torch.bool)
        keep[:5] = x[0, :5] > 0  # unknown values, written into `keep` through a view of it
        picked = x[:, keep]
        return picked @ torch.ones(picked.shape[1], 3)

    report = count(Forward(fn), torch.randn(4, 16))
    # not the stale all-False mask (0 MACs): the upper bound, all 16 columns, 4*16*3 = 192 MACs, said so
    assert report.macs == 192
    assert report.estimated_ops["aten.index"].rule.startswith("data-dependent size counted at its upper bound")


def test_an_element_of_a_large_source_formats_as_its_value() -> None:
    class Named(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.experts = nn.ModuleDict({"expert_0": nn.Linear(4, 4)})

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            routes = torch.zeros(300, 300, dtype=torch.int64)  # a recipe; the element below is a view of it
            return self.experts[f"expert_{routes[0, 0]}"](x)  # type: ignore[no-any-return]

    # [2, 4] @ [4, 4]: 2*4*4 = 32 MACs
    assert count(Named(), torch.randn(2, 4)).macs == 32
