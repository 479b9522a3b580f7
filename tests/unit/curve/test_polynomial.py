"""The exact polynomial a formula is: rendered as sympy reads it, parsed back by our own grammar (never eval)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pytest_flopbudget._curve.polynomial import Polynomial, parse, render, to_sympy

SEQ = ("seq",)


def test_render_puts_the_highest_degree_first_and_parses_back() -> None:
    poly = Polynomial(SEQ, {(2,): 64, (1,): 7340032, (0,): -3})
    assert render(poly) == "64*seq**2 + 7340032*seq - 3"
    assert parse(render(poly), SEQ) == poly


def test_rational_and_several_dims_round_trip_and_sympy_agrees() -> None:
    sympy = pytest.importorskip("sympy")
    poly = Polynomial(("b", "s"), {(1, 2): Fraction(3, 2), (0, 1): Fraction(-1, 3), (0, 0): 5})
    text = render(poly)
    assert text == "3*b*s**2/2 - s/3 + 5"
    assert parse(text, ("b", "s")) == poly
    b, s = sympy.symbols("b s", integer=True, positive=True)
    assert sympy.simplify(sympy.sympify(text, locals={"b": b, "s": s}) - to_sympy(poly)) == 0
    assert poly.at({"b": 2, "s": 3}) == 31


def test_zero_degree_and_terms() -> None:
    zero = Polynomial(SEQ)
    assert (render(zero), zero.degree(), parse("0", SEQ)) == ("0", -1, zero)
    poly = parse("-seq**2 + 2 * seq / 4 + seq", SEQ)
    assert poly == Polynomial(SEQ, {(2,): -1, (1,): Fraction(3, 2)})
    assert (poly.degree("seq"), poly.term((2,)), poly.monomial((2,)), poly.monomial((0,))) == (2, -1, "seq**2", "1")
    assert Polynomial(SEQ, {(1,): 1}) + Polynomial(SEQ, {(1,): -1}) == zero


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seq+", "is not a polynomial"),
        ("x", "names 'x', which is not a dim"),
        ("__import__('os')", "unexpected"),
        ("__import__", "names '__import__'"),
        ("seq**", "is not a polynomial"),
        ("1/0", "divides by zero"),
        ("", "is not a polynomial"),
        ("seq**1000", "above 64"),
        ("1.5*seq", "unexpected"),
        ("seq/seq", "is not a polynomial"),
    ],
)
def test_anything_else_is_refused_with_one_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse(text, SEQ)


def test_a_non_string_and_a_huge_text_are_refused() -> None:
    with pytest.raises(ValueError, match="must be a string"):
        parse(3, SEQ)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="longer than"):
        parse("1+" * 60_000 + "1", SEQ)
