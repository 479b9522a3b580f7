"""`Symbolic`: sizes and costs as exact polynomials in the dims, computing as integers do where the answer is the
same at every size, and refusing (`NotPolynomial`) where it is not."""

from __future__ import annotations

from fractions import Fraction
from math import prod

import pytest

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.symbolic import NotPolynomial, Symbolic

DIMS = ("batch", "seq")
BATCH = Symbolic.dim(DIMS, "batch")
SEQ = Symbolic.dim(DIMS, "seq")


def test_arithmetic_is_exact_and_constants_are_ints() -> None:
    square = SEQ * SEQ
    assert isinstance(square, Symbolic) and square.terms == {(0, 2): 1}
    assert repr(2 * BATCH * SEQ**2 + 3 * SEQ - 1) == "2*batch*seq**2 + 3*seq - 1"
    assert SEQ - SEQ == 0 and isinstance(SEQ - SEQ, int)  # a constant is an int again
    assert (SEQ + 4) * (SEQ - 4) - SEQ**2 == -16
    assert sum([SEQ, SEQ, 1]) == 2 * SEQ + 1 and prod([2, SEQ, BATCH]) == 2 * BATCH * SEQ
    assert (6 * SEQ + 4) // 2 == 3 * SEQ + 2 and -SEQ + SEQ == 0
    assert (SEQ * 3).at({"batch": 1, "seq": 7}) == 21


def test_the_shared_formulas_run_on_symbolic_sizes() -> None:
    # attention's QK^T over 2 heads of 8: B*M*N*K = 2 * seq * seq * 8 MACs, twice that in FLOPs
    cost = f.matmul(SEQ, SEQ, 8, 2)
    assert (cost.macs, cost.flops) == (16 * SEQ**2, 32 * SEQ**2)
    # a dense layer with bias on batch x 8 -> 4: 2*batch*8*4 + batch*4 = 68*batch FLOPs
    assert f.linear(BATCH, 8, 4, bias=True).flops == 68 * BATCH
    assert f.on_integers(f.matmul(SEQ, 1, 1), True).int_ops == 2 * SEQ


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        (lambda: max(SEQ - 1, 0), "depends on the sizes"),  # the comparison behind ceil(log2 n)
        (lambda: SEQ > 4, "depends on the sizes"),
        (lambda: SEQ == 1, "depends on the sizes"),  # true at one size, false at the others
        (lambda: int(SEQ), "no one integer value"),
        (lambda: float(SEQ), "no one value"),
        (lambda: (SEQ + 1) // 2, "rounds at some sizes"),
        (lambda: SEQ // SEQ, "not a polynomial"),
        (lambda: SEQ / 2, "not an integer polynomial"),
        (lambda: SEQ % 2, "not a polynomial"),
        (lambda: SEQ ** Fraction(1, 2), "not a polynomial"),
        (lambda: SEQ + Symbolic.dim(("seq",), "seq"), "met in one count"),
    ],
)
def test_what_differs_between_sizes_is_refused(operation, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotPolynomial, match=message):
        operation()


def test_what_is_the_same_at_every_size_is_answered() -> None:
    assert SEQ + 1 > SEQ and SEQ - 1 < SEQ and SEQ == SEQ * 1 and SEQ != SEQ + 1
    assert bool(SEQ) and not bool(SEQ - SEQ) and int(SEQ - SEQ + 3) == 3
    assert hash(SEQ * 2) == hash(2 * SEQ) and {SEQ: 1}[SEQ + 0] == 1
    assert Symbolic.make(DIMS, {(0, 0): 5}) == 5 and isinstance(Symbolic.make(DIMS, {(0, 0): 5}), int)
    assert Symbolic.make(DIMS, {(0, 0): Fraction(1, 2)}) != 0  # a fraction stays a polynomial, not an int
