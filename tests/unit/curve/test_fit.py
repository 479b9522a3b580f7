"""Lattice interpolation on synthetic costs: exact polynomials, strides (quasi-polynomials), branches."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping

import pytest

from pytest_flopbudget._curve.fit import Fit, FitError, fit, interpolate


def fitted(
    cost: Callable[..., Mapping[Hashable, int]], dims: list[str], ranges: list[tuple[int, int]], **kw: object
) -> Fit:
    return fit(lambda point: cost(*point), dims, ranges, **kw)  # type: ignore[arg-type]


def texts(found: Fit) -> dict[Hashable, str]:
    return {key: str(poly) for key, poly in found.polys.items()}


def test_a_polynomial_is_found_exactly_and_holds_at_every_size() -> None:
    found = fitted(lambda s: {"a": 64 * s * s + 7340032 * s, "b": 5, "c": s * (s + 1) // 2}, ["seq"], [(64, 8192)])
    assert texts(found) == {"a": "64*seq**2 + 7340032*seq", "b": "5", "c": "seq**2/2 + seq/2"}
    assert (found.step, found.ranges, found.piecewise, found.failing) == ({"seq": 1}, {"seq": (64, 8192)}, False, set())
    assert found.verified >= 2 and found.samples <= 12


def test_several_dims_by_tensor_product() -> None:
    found = fitted(lambda b, s: {"a": 3 * b * s * s + b * s + 7}, ["batch", "seq"], [(1, 16), (16, 512)])
    assert texts(found) == {"a": "3*batch*seq**2 + batch*seq + 7"}
    assert found.step == {"batch": 1, "seq": 1} and not found.piecewise


def test_a_stride_is_found_and_the_formula_holds_at_its_multiples_only() -> None:
    def conv(h: int, w: int) -> dict[str, int]:
        return {"conv": math.ceil(h / 32) * math.ceil(w / 32) * 100 + h * w * 3, "head": 7}

    found = fitted(conv, ["height", "width"], [(64, 1024), (64, 1024)])
    assert found.step == {"height": 32, "width": 32} and not found.piecewise
    poly = found.polys["conv"]
    for h in range(64, 1025, 32):
        for w in range(64, 1025, 96):
            assert poly.at({"height": h, "width": w}) == conv(h, w)["conv"]
    assert poly.at({"height": 80, "width": 64}) != conv(80, 64)["conv"]


def test_a_stride_with_an_odd_factor() -> None:
    found = fitted(lambda s: {"patches": ((s - 14) // 14 + 1) ** 2}, ["side"], [(64, 1024)])
    assert (texts(found), found.step) == ({"patches": "side**2/196"}, {"side": 14})


def test_a_branch_on_the_size_is_reported_with_where_the_formula_holds() -> None:
    found = fitted(lambda s: {"a": s * s if s <= 512 else 3 * s}, ["seq"], [(64, 8192)])
    assert found.piecewise and texts(found) == {"a": "seq**2"}
    assert found.ranges == {"seq": (64, 512)} and found.broken_at == {"seq": 576}


def test_a_series_outside_the_core_that_misses_is_named_not_trusted() -> None:
    found = fitted(
        lambda s: {"sum": 5 * s, "peak": max(s * s, 500 * s)}, ["seq"], [(64, 1024)], core=lambda key: key == "sum"
    )
    assert not found.piecewise and found.failing == {"peak"}


def test_a_series_that_is_no_polynomial_costs_only_itself_its_formula() -> None:
    """A sort of n items costs n*ceil(log2(n)) comparisons (a MoE router's): no polynomial, so that series is
    reported as failing while every other series keeps its exact formula (it was an error for all of them)."""

    def cost(s: int) -> dict[str, int]:
        return {"macs": 3 * s * s + s, "flops": 6 * s * s + 2 * s + s * math.ceil(math.log2(s)), "bytes": 8 * s}

    found = fitted(cost, ["seq"], [(8, 512)])
    assert texts(found)["macs"] == "3*seq**2 + seq" and texts(found)["bytes"] == "8*seq"
    assert found.failing == {"flops"} and not found.piecewise
    for size in (9, 100, 333, 511):  # exact off the lattice for the polynomial series
        assert found.polys["macs"].at({"seq": size}) == 3 * size * size + size


def test_a_range_too_small_or_no_polynomial_is_an_error() -> None:
    with pytest.raises(FitError, match=r"seq in \[1, 4\] has fewer than 6 sizes"):
        fitted(lambda s: {"a": s}, ["seq"], [(1, 4)])
    with pytest.raises(FitError, match="no polynomial of degree 6 or less"):
        fitted(lambda s: {"a": 2**s}, ["seq"], [(1, 40)])


def test_interpolate_is_exact_on_its_grid() -> None:
    grid = [[1, 2, 3], [10, 20]]
    samples = {(x, y): {"k": x * x * y - 4} for x in grid[0] for y in grid[1]}
    (poly,) = interpolate(["x", "y"], grid, samples, ["k"]).values()
    assert str(poly) == "x**2*y - 4"


def test_dims_with_different_strides_get_steps_the_formula_holds_at() -> None:
    def cost(h: int, w: int) -> dict[str, int]:
        return {"conv": math.ceil(h / 32) * math.ceil(w / 8) * 10}

    found = fitted(cost, ["height", "width"], [(64, 512), (64, 512)])
    assert found.step["height"] == 32 and found.step["width"] % 8 == 0 and not found.piecewise
    poly = found.polys["conv"]
    for h in range(64, 513, found.step["height"]):
        for w in range(64, 513, found.step["width"]):
            assert poly.at({"height": h, "width": w}) == cost(h, w)["conv"]
