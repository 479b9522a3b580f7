"""An exact polynomial in a model's named dims: rational coefficients keyed by exponent tuples.

A formula is stored, compared, evaluated and judged as this structure (`terms`), and written as a sympy-parsable
string (`64*seq**2 + 7340032*seq`) by its own renderer and read back by its own parser (`parse`), so that
counting a curve or reading a baseline never imports sympy nor evaluates text; `to_sympy` gives the expression to
whoever wants one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import prod

#: One monomial: the exponent of each dim, in the formula's dim order (`(2,)` is `seq**2`).
Exponents = tuple[int, ...]


class Polynomial:
    """Σ coefficient x Π dim**exponent over `terms`; zero coefficients are left out, so equal polynomials compare
    equal however they were built."""

    def __init__(self, dims: Sequence[str], terms: Mapping[Exponents, Fraction | int] | None = None) -> None:
        self.dims: tuple[str, ...] = tuple(dims)
        self.terms: dict[Exponents, Fraction] = {}
        for exponents, coefficient in (terms or {}).items():
            if len(exponents) != len(self.dims):
                raise ValueError(f"term {exponents} does not have one exponent per dim {self.dims}")
            if coefficient:
                self.terms[tuple(exponents)] = Fraction(coefficient)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Polynomial) and (self.dims, self.terms) == (other.dims, other.terms)

    def __repr__(self) -> str:
        return f"Polynomial({self.dims}, {self!s})"

    def __str__(self) -> str:
        return render(self)

    def __add__(self, other: Polynomial) -> Polynomial:
        if other.dims != self.dims:
            raise ValueError(f"cannot add polynomials in {self.dims} and {other.dims}")
        terms = dict(self.terms)
        for exponents, coefficient in other.terms.items():
            terms[exponents] = terms.get(exponents, Fraction(0)) + coefficient
        return Polynomial(self.dims, terms)

    def at(self, point: Mapping[str, int]) -> Fraction:
        """The exact value at `point` (every dim given)."""
        values = [point[dim] for dim in self.dims]
        return sum(
            (c * prod(v**e for v, e in zip(values, exps)) for exps, c in self.terms.items()),
            Fraction(0),
        )

    def degree(self, dim: str | None = None) -> int:
        """The highest power of `dim` (or the total degree when None); 0 for a constant, -1 for zero."""
        if not self.terms:
            return -1
        if dim is None:
            return max(sum(exps) for exps in self.terms)
        axis = self.dims.index(dim)
        return max(exps[axis] for exps in self.terms)

    def above(self, dim: str, degree: int) -> Polynomial:
        """The terms whose power of `dim` exceeds `degree` (`max-degree = { seq = 1 }`: what breaks it)."""
        axis = self.dims.index(dim)
        return Polynomial(self.dims, {exps: c for exps, c in self.terms.items() if exps[axis] > degree})

    def term(self, exponents: Exponents) -> Fraction:
        return self.terms.get(tuple(exponents), Fraction(0))

    def monomial(self, exponents: Exponents) -> str:
        """`seq**2`, `batch*seq`, `1` for the constant term."""
        return _monomial(self.dims, exponents) or "1"

    @property
    def is_integral(self) -> bool:
        return all(c.denominator == 1 for c in self.terms.values())


def render(poly: Polynomial) -> str:
    """`64*seq**2 + 7340032*seq`, highest total degree first, `0` for zero; sympy parses it back unchanged."""
    if not poly.terms:
        return "0"
    order = sorted(poly.terms, key=lambda exps: (-sum(exps), tuple(-e for e in exps)))
    text = ""
    for exponents in order:
        coefficient = poly.terms[exponents]
        sign = "-" if coefficient < 0 else "+"
        magnitude = abs(coefficient)
        monomial = _monomial(poly.dims, exponents)
        if not monomial:
            body = str(magnitude.numerator)
        elif magnitude.numerator == 1:
            body = monomial
        else:
            body = f"{magnitude.numerator}*{monomial}"
        if magnitude.denominator != 1:
            body = f"{body}/{magnitude.denominator}"
        text = (f"-{body}" if sign == "-" else body) if not text else f"{text} {sign} {body}"
    return text


def _monomial(dims: Sequence[str], exponents: Exponents) -> str:
    return "*".join(dim if e == 1 else f"{dim}**{e}" for dim, e in zip(dims, exponents) if e)


_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_]\w*)|(?P<op>\*\*|[-+*/]))")

#: The highest power of a dim read back: a cost polynomial is of low degree, and evaluating a huge power is slow.
MAX_POWER = 64
#: The longest formula text read back (a hostile baseline must not make the reader work for long).
MAX_TEXT = 100_000


def parse(text: str, dims: Sequence[str]) -> Polynomial:
    """A formula string as `render` writes it (sums of `INT*dim**INT/INT` terms, in any order and spacing) -> a
    `Polynomial`; raises `ValueError` naming what is wrong. Our own small grammar, not `eval` or sympy: the text
    may come from a file anyone could have edited."""
    if not isinstance(text, str):
        raise ValueError(f"a formula must be a string, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ValueError(f"a formula of {len(text)} characters is longer than {MAX_TEXT}")
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise ValueError(f"{text[:60]!r} is not a polynomial: unexpected {stripped[position:][:10]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    terms: dict[Exponents, Fraction] = {}
    index = 0

    def expect(kind: str) -> str:
        nonlocal index
        if index >= len(tokens) or tokens[index][0] != kind:
            raise ValueError(f"{text[:60]!r} is not a polynomial in {', '.join(dims) or 'no dims'}")
        index += 1
        return tokens[index - 1][1]

    def at_op(*ops: str) -> bool:
        return index < len(tokens) and tokens[index] in {("op", op) for op in ops}

    sign = 1
    if at_op("-", "+"):
        sign = -1 if tokens[index][1] == "-" else 1
        index += 1
    while True:
        coefficient = Fraction(sign)
        exponents = [0] * len(dims)
        while True:
            if index < len(tokens) and tokens[index][0] == "int":
                coefficient *= int(expect("int"))
            else:
                name = expect("name")
                if name not in dims:
                    raise ValueError(f"{text[:60]!r} names {name!r}, which is not a dim ({', '.join(dims)})")
                power = 1
                if at_op("**"):
                    index += 1
                    power = int(expect("int"))
                    if power > MAX_POWER:
                        raise ValueError(f"{text[:60]!r} raises {name} to {power}, above {MAX_POWER}")
                exponents[dims.index(name)] += power
            if not at_op("*"):
                break
            index += 1
        while at_op("/"):
            index += 1
            divisor = int(expect("int"))
            if divisor == 0:
                raise ValueError(f"{text[:60]!r} divides by zero")
            coefficient /= divisor
        key = tuple(exponents)
        terms[key] = terms.get(key, Fraction(0)) + coefficient
        if index == len(tokens):
            break
        if not at_op("+", "-"):
            raise ValueError(f"{text[:60]!r} is not a polynomial in {', '.join(dims) or 'no dims'}")
        sign = -1 if tokens[index][1] == "-" else 1
        index += 1
    return Polynomial(dims, terms)


def to_sympy(poly: Polynomial) -> object:
    """The polynomial as a sympy expression in positive integer symbols named after the dims (imports sympy)."""
    import sympy

    symbols = [sympy.Symbol(dim, integer=True, positive=True) for dim in poly.dims]
    return sympy.Add(
        *(
            sympy.Rational(c.numerator, c.denominator) * sympy.Mul(*(s**e for s, e in zip(symbols, exps)))
            for exps, c in poly.terms.items()
        )
    )
