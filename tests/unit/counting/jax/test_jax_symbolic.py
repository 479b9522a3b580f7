"""JAX's symbolic dims read as exact polynomials, and the walk of a symbolic trace: what it writes that a point
trace does not (`dim_as_value`, `jnp.arange`'s `1 * iota + 0`) is free, and everything else counts as in a point
trace."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from pytest_flopbudget._counting.jax.engine import count_jax  # noqa: E402
from pytest_flopbudget._counting.jax.symbolic import size_reader, symbols  # noqa: E402
from pytest_flopbudget._counting.symbolic import NotPolynomial, Symbolic  # noqa: E402

DIMS = ("batch", "seq")


@pytest.fixture(scope="module")
def dims() -> dict[str, Any]:
    return symbols(jax, DIMS)


def test_a_polynomial_size_reads_as_a_symbolic(dims: dict[str, Any]) -> None:
    read = size_reader(DIMS)
    batch, seq = dims["batch"], dims["seq"]
    assert read(3 * batch * seq * seq + 2 * seq + 5) == Symbolic(DIMS, {(1, 2): 3, (0, 1): 2, (0, 0): 5})
    assert read(seq - seq + 4) == 4 and read(7) == 7


def test_a_size_that_is_no_polynomial_is_refused_naming_it(dims: dict[str, Any]) -> None:
    read = size_reader(DIMS)
    with pytest.raises(NotPolynomial, match=r"^the size floordiv\(seq - 3, 2\) \+ 1 is not a polynomial in batch, seq"):
        read((dims["seq"] - 3) // 2 + 1)
    with pytest.raises(NotPolynomial, match="names seq, which is not a dim of the curve"):
        size_reader(("batch",))(dims["seq"])
    with pytest.raises(NotPolynomial, match="neither an integer nor a jax symbolic dim"):
        read("seq")


def test_the_symbolic_walk_counts_as_the_point_walk(dims: dict[str, Any]) -> None:
    def fn(x: Any) -> Any:
        positions = jnp.arange(x.shape[1])  # symbolic: 1 * iota + 0, free; a point trace has the bare iota
        return (x + positions).mean(axis=1) * 1  # mean: a composite priced by rule; * 1 counts

    x = jax.ShapeDtypeStruct((dims["batch"], dims["seq"]), jnp.float32)
    report = count_jax(fn, (x,), symbolic_dims=DIMS)
    batch, seq = Symbolic.dim(DIMS, "batch"), Symbolic.dim(DIMS, "seq")
    # add batch*seq, jnp.mean (a named composite: 1 per input element) batch*seq, mul batch: 2*batch*seq + batch
    assert report.flops == 2 * batch * seq + batch
    point = count_jax(fn, (jax.ShapeDtypeStruct((3, 5), jnp.float32),))
    assert point.flops == 2 * 3 * 5 + 3 == report.flops.at({"batch": 3, "seq": 5})
    assert sorted(point.layers[""].ops) == sorted(report.layers[""].ops)


def test_a_formula_that_fails_on_symbolic_sizes_fails_the_whole_count(dims: dict[str, Any]) -> None:
    x = jax.ShapeDtypeStruct((2, dims["seq"]), jnp.float32)
    with pytest.raises(NotPolynomial, match=r"^sort in the model: seq < 1 depends on the sizes"):
        count_jax(lambda x: jnp.sort(x, axis=-1), (x,), symbolic_dims=DIMS)
