"""A Pallas kernel (`pallas_call`) counts what its `CostEstimate` declares, listed apart as estimated; without one
it is skipped with the reason. Traced with `jax.make_jaxpr` in interpret mode: nothing compiles or runs."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
pl = pytest.importorskip("jax.experimental.pallas")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from pytest_flopbudget._backends.formulas import register_formula  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_jax  # noqa: E402
from pytest_flopbudget._counting.jax.ops import DECLARED_COST, NO_COST_ESTIMATE, declared_cost  # noqa: E402

X = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def add_exp_kernel(x_ref: Any, y_ref: Any, o_ref: Any) -> None:
    o_ref[...] = jnp.exp(x_ref[...]) + y_ref[...]


def add_exp(x: Any, y: Any, declared: bool = True) -> Any:
    # 8*128 = 1024 elements: exp (a transcendental) and add (a flop) each
    estimate = pl.CostEstimate(flops=1024, transcendentals=1024, bytes_accessed=3 * 1024 * 4) if declared else None
    with jax.named_scope("kernel"):
        return pl.pallas_call(
            add_exp_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True, cost_estimate=estimate
        )(x, y)


def test_a_kernel_counts_its_declared_cost_listed_as_estimated() -> None:
    report = count_jax(lambda x, y: jnp.tanh(add_exp(x, y)), (X, X))
    # declared: 1024 flops + 1024 transcendentals = 2048 FLOPs, no MACs; tanh after it: 1024
    assert (report.flops, report.macs) == (2048 + 1024, 0)
    assert report.layers["kernel"].ops["pallas_call"].flops == 2048
    assert report.estimated == {"pallas_call": 1} and not report.skipped
    estimated = report.estimated_ops["pallas_call"]
    assert (estimated.rule, estimated.layers) == (DECLARED_COST, ["kernel"])
    assert report.to_dict()["estimated"]["pallas_call"]["rule"] == DECLARED_COST
    assert "CostEstimate declares" in report.conventions["jax_pallas"]


def test_a_kernel_without_a_cost_estimate_is_skipped_with_the_reason() -> None:
    report = count_jax(lambda x, y: add_exp(x, y, declared=False), (X, X))
    assert report.flops == 0 and report.skipped == {"pallas_call": 1} and not report.estimated
    assert report.skipped_ops["pallas_call"].reason == NO_COST_ESTIMATE


def test_a_kernel_in_a_scan_counts_once_per_step() -> None:
    def steps(x: Any, y: Any) -> Any:
        return lax.scan(lambda h, _: (add_exp(h, y), None), x, None, length=3)[0]

    report = count_jax(steps, (X, X))
    assert report.flops == 3 * 2048 and report.estimated == {"pallas_call": 3}


def test_a_registered_formula_prices_kernels_instead() -> None:
    handle = register_formula("pallas_call", lambda eqn: (eqn.out_numel(), 0), backend="jax")
    try:
        report = count_jax(lambda x, y: add_exp(x, y), (X, X))
    finally:
        handle.remove()
    assert report.flops == 1024 and not report.estimated


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (None, None),
        (pl.CostEstimate(flops=10, transcendentals=2, bytes_accessed=0), (12, 0)),
        (pl.CostEstimate(flops=-1, transcendentals=0, bytes_accessed=0), None),
    ],
)
def test_declared_cost(estimate: Any, expected: Any) -> None:
    assert declared_cost(estimate) == expected
