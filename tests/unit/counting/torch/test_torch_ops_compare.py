"""Selection, sorting, searching and histogram ops, hand-derived: comparisons, 1 FLOP each, none skipped.

Convention (formulas.py, docs/conventions.md): these ops compare and count rather than compute, and
follow the rule the comparisons already follow (`lt`/`eq` 1 per element, max/argmax 1 per input element):

- selection (topk, kthvalue, median, nanmedian): 1 per input element; topk(sorted=True) also sorts its k picks;
- sorting (sort, argsort, msort): n * ceil(log2 n) per row of n along dim;
- mode: sort each row, then 1 per element (neighbour compare); unique: sort all n, then n; unique(dim): r slices
  of the tensor: numel * ceil(log2 r) + numel; unique_consecutive: 1 per element;
- searchsorted, bucketize: ceil(log2(B + 1)) per value among B boundaries;
- histc, histogram: 1 per element, 1 more when the range comes from the data; histogram with edges: a binary
  search among the edges, then 1; bincount: 1 per element.

Each op is counted in fake and real execution (same figures, nothing skipped: `torch_op_helpers.run`).
x = [4, 10] (40 elements) unless stated.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

from torch_op_helpers import op_costs  # noqa: E402
from torch_op_helpers import run as checked_run  # noqa: E402

from pytest_flopbudget._counting.formulas import binary_search, comparison_sort, log2_ceil, selection  # noqa: E402

run = partial(checked_run, macs_free=True)  # comparisons are never multiply-accumulates


def x() -> torch.Tensor:
    return torch.randn(4, 10)


def test_log2_ceil_counts_the_comparisons_that_tell_n_outcomes_apart() -> None:
    # 1 outcome: nothing to compare; 2: one comparison; 3 and 4: two; 5..8: three; 9..16: four
    assert [log2_ceil(n) for n in (1, 2, 3, 4, 5, 8, 9, 16, 17)] == [0, 1, 2, 2, 3, 3, 4, 4, 5]
    assert log2_ceil(0) == 0


def test_shared_formulas_by_hand() -> None:
    assert selection(40).flops == 40
    # 4 rows of 10: 10 * ceil(log2 10) = 10 * 4 = 40 each
    assert comparison_sort(4, 10).flops == 160
    assert comparison_sort(3, 1).flops == 0  # rows of one are sorted already
    # 20 values among 10 boundaries (11 places): ceil(log2 11) = 4 each
    assert binary_search(20, 10).flops == 80
    assert all(cost.macs == 0 for cost in (selection(40), comparison_sort(4, 10), binary_search(20, 10)))


CASES = [
    # --- selection: 1 per input element (+ the sort of the k picks when sorted) -----------------------------------
    # 40 compares + 4 rows * 3 picks * ceil(log2 3) = 4*3*2 = 24 -> 64
    pytest.param(lambda t: torch.topk(t, 3, dim=-1), x, {"aten.topk": 64}, id="topk-sorted"),
    pytest.param(lambda t: torch.topk(t, 3, dim=-1, sorted=False), x, {"aten.topk": 40}, id="topk-unsorted"),
    # top-1 sorts nothing: 40, what argmax over the same rows costs
    pytest.param(lambda t: torch.topk(t, 1, dim=-1), x, {"aten.topk": 40}, id="topk-1-as-argmax"),
    pytest.param(lambda t: torch.argmax(t, dim=-1), x, {"aten.argmax": 40}, id="argmax-for-comparison"),
    # along dim 0: 10 rows of 4, k = 2: 40 + 10 * 2 * ceil(log2 2) = 40 + 20 = 60
    pytest.param(lambda t: torch.topk(t, 2, dim=0), x, {"aten.topk": 60}, id="topk-dim0"),
    pytest.param(lambda t: torch.kthvalue(t, 2, dim=-1), x, {"aten.kthvalue": 40}, id="kthvalue"),
    pytest.param(lambda t: torch.median(t, dim=-1), x, {"aten.median": 40}, id="median-dim"),
    pytest.param(lambda t: torch.median(t), x, {"aten.median": 40}, id="median-all"),
    pytest.param(lambda t: torch.nanmedian(t, dim=-1), x, {"aten.nanmedian": 40}, id="nanmedian-dim"),
    pytest.param(lambda t: torch.nanmedian(t), x, {"aten.nanmedian": 40}, id="nanmedian-all"),
    # --- sorting: n * ceil(log2 n) per row ---------------------------------------------------------------------------
    # 4 rows of 10: 4 * 10 * 4 = 160
    pytest.param(lambda t: torch.sort(t, dim=-1), x, {"aten.sort": 160}, id="sort"),
    pytest.param(
        lambda t: torch.sort(t, dim=-1, descending=True, stable=True),
        x,
        {"aten.sort": 160},
        id="sort-stable-descending",
    ),
    pytest.param(lambda t: torch.argsort(t, dim=-1), x, {"aten.sort": 160}, id="argsort"),
    # 10 rows of 4 along dim 0: 10 * 4 * 2 = 80
    pytest.param(lambda t: torch.sort(t, dim=0), x, {"aten.sort": 80}, id="sort-dim0"),
    pytest.param(torch.msort, x, {"aten.sort": 80}, id="msort"),
    # [2, 8]: 2 rows * 8 * 3 = 48
    pytest.param(lambda t: torch.sort(t), lambda: torch.randn(2, 8), {"aten.sort": 48}, id="sort-power-of-two"),
    # a 0-d tensor is one row of one: nothing to compare, but the call is recorded
    pytest.param(lambda t: torch.sort(t), lambda: torch.tensor(3.0), {"aten.sort": 0}, id="sort-0d"),
    # mode: sort 160 + neighbour compares 40 = 200
    pytest.param(lambda t: torch.mode(t, dim=-1), x, {"aten.mode": 200}, id="mode"),
    # --- unique: sort all 40 (40 * ceil(log2 40) = 40 * 6 = 240) + 40 neighbour compares = 280 ---------------------
    pytest.param(torch.unique, x, {"aten._unique2": 280}, id="unique"),
    pytest.param(
        lambda t: torch.unique(t, return_inverse=True, return_counts=True),
        x,
        {"aten._unique2": 280},
        id="unique-inverse-counts",
    ),
    # 4 slices along dim 0: 40 * ceil(log2 4) + 40 = 120
    pytest.param(lambda t: torch.unique(t, dim=0), x, {"aten.unique_dim": 120}, id="unique-dim"),
    pytest.param(torch.unique_consecutive, x, {"aten.unique_consecutive": 40}, id="unique-consecutive"),
    # --- binary search: ceil(log2(B + 1)) per value ----------------------------------------------------------------
    # [4, 10] sorted rows, values [4, 5]: 20 values among 10 (11 places: 4 compares) = 80
    pytest.param(
        lambda t: torch.searchsorted(t, torch.zeros(4, 5)), x, {"aten.searchsorted": 80}, id="searchsorted-rows"
    ),
    # 1-D sequence of 7 (8 places: 3), values [3, 5]: 15 * 3 = 45
    pytest.param(
        lambda t: torch.searchsorted(t, torch.zeros(3, 5)),
        lambda: torch.arange(7.0),
        {"aten.searchsorted": 45},
        id="searchsorted-1d",
    ),
    # 3 boundaries (4 places: 2 compares) for 40 values = 80; 4 boundaries (5 places: 3) = 120
    pytest.param(
        lambda t: torch.bucketize(t, torch.tensor([-1.0, 0.0, 1.0])), x, {"aten.bucketize": 80}, id="bucketize-3"
    ),
    pytest.param(
        lambda t: torch.bucketize(t, torch.tensor([-1.0, 0.0, 1.0, 2.0])), x, {"aten.bucketize": 120}, id="bucketize-4"
    ),
    # --- histograms: 1 per element, +1 per element for a range found in the data ------------------------------------
    pytest.param(lambda t: torch.histc(t, bins=5), x, {"aten.histc": 80}, id="histc-data-range"),
    pytest.param(lambda t: torch.histc(t, bins=5, min=-1, max=1), x, {"aten.histc": 40}, id="histc-given-range"),
    pytest.param(lambda t: torch.histogram(t, bins=5), x, {"aten.histogram": 80}, id="histogram-data-range"),
    pytest.param(
        lambda t: torch.histogram(t, bins=5, range=(-1.0, 1.0)), x, {"aten.histogram": 40}, id="histogram-given-range"
    ),
    # 6 edges (7 places: 3 compares) per element = 120, + 40 counts = 160
    pytest.param(
        lambda t: torch.histogram(t, bins=torch.linspace(-1, 1, 6)), x, {"aten.histogram": 160}, id="histogram-edges"
    ),
]


@pytest.mark.parametrize(("fn", "make", "expected"), CASES)
def test_comparison_op(fn: Callable[..., Any], make: Callable[[], Any], expected: dict[str, int]) -> None:
    report = run(fn, make())
    costs = op_costs(report)
    assert {op: costs[op][1] for op in expected} == expected
    assert all(costs[op][0] == 1 for op in expected)


def test_bincount_counts_each_value_once() -> None:
    # indices made from arange have known values in fake mode, so bincount's output size is known: 12 values
    def counts(t: torch.Tensor) -> torch.Tensor:
        return torch.bincount(torch.arange(12) % 3, weights=None) + t

    def weighted(t: torch.Tensor) -> torch.Tensor:
        return torch.bincount(torch.arange(12) % 3, weights=torch.ones(12)) + t

    for fn in (counts, weighted):
        costs = op_costs(run(fn, torch.zeros(3)))
        assert costs["aten.bincount"][:2] == (1, 12)


def test_quantile_counts_its_sort() -> None:
    # quantile sorts each row (4 * 10 * 4 = 160) before interpolating: nothing of it is skipped any more
    costs = op_costs(run(lambda t: torch.quantile(t, 0.5, dim=-1), x()))
    assert costs["aten.sort"][1] == 160


def test_the_documented_custom_router_example_follows_the_rule(documented_example: Callable[[str, str], str]) -> None:
    """docs/formulas.md, "Ops that compare": a fused top-k formula built from the shared helpers."""
    from pytest_flopbudget.formulas import registered_formulas

    code = documented_example("formulas.md", "Ops that compare: the built-in rule")
    try:
        exec(compile(code, "docs/formulas.md", "exec"), {"__name__": "formulas_md"})
        (handle,) = registered_formulas()
        assert "'mylib.fused_topk'" in handle.op
        # [8 tokens, 4 experts], top-2: 32 compares + 8 rows * 2 * ceil(log2 2) = 16 sorting the picks -> 48
        assert handle.formula({"scores": torch.empty(8, 4, device="meta"), "k": 2}, None) == (48, 0)
    finally:
        for registered in registered_formulas():
            registered.remove()


def test_isin_compares_each_element_with_each_test_element() -> None:
    # generate's end-of-sequence check: 40 elements against 3 test elements, or against one scalar
    report = run(lambda t: torch.isin(t, torch.tensor([0.5, 1.5, 2.5])), x())
    assert op_costs(report)["aten.isin"] == (1, 120, 0)
    assert op_costs(run(lambda t: torch.isin(t, 2.0), x()))["aten.isin"] == (1, 40, 0)
