"""A size or a cost as an exact polynomial in a model's named dims, for counting every size in one symbolic trace.

A backend that traces once with symbolic sizes (JAX: `jax.export.symbolic_shape`) hands the shared formulas
`Symbolic` values where it would hand integers: a dot product's `B*M*N*K` of `seq` is then `seq**2*...`, summed per
layer as any count is. `Symbolic` does what the formulas do with sizes that a polynomial can answer exactly (`+`,
`-`, `*`, powers, `//` that divides every coefficient, truth as "not the zero polynomial") and refuses, with
`NotPolynomial`, what it cannot answer for every size at once: an order comparison of two different polynomials
(`max(n - 1, 0)`), `int()` of a size that varies, a division that does not divide, `float()`. A count that meets
one is not a polynomial (a sort's `n*ceil(log2 n)`, a strided convolution's `floor((n - k)/s) + 1`): the curve
then falls back to interpolating point counts (`curve/fit.py`) and says why.

Framework-free: the JAX engine turns its own symbolic dims into these (`counting/jax/symbolic.py`), and the curve
reads `terms` back into its `Polynomial` without importing any backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import prod
from typing import Union

#: One monomial: the exponent of each dim, in the dims' order (`(2,)` is `seq**2`).
Exponents = tuple[int, ...]
#: What the formulas compute with in a symbolic count: an integer, or a polynomial in the dims.
Size = Union[int, "Symbolic"]


class NotPolynomial(ArithmeticError):
    """A size or a figure that is not one polynomial in the dims for every size: the message says which and why."""


class PointsOnly(NotPolynomial):
    """The backend has no symbolic count at all (no `count_symbolic`): nothing was tried, nothing to report."""


class Symbolic:
    """Σ coefficient x Π dim**exponent, exact (integer or `Fraction` coefficients), that computes as an integer does
    where the answer is the same at every size of the dims and raises `NotPolynomial` where it is not.

    Values of one count share `dims`; a constant is an `int`, never a `Symbolic` (`make` returns one), so code that
    reads a literal size (`int(size)`, `range(size)`) keeps working where no dim is involved.
    """

    __slots__ = ("dims", "terms")

    def __init__(self, dims: Sequence[str], terms: Mapping[Exponents, Fraction | int]) -> None:
        self.dims: tuple[str, ...] = tuple(dims)
        #: Integers where they are (the usual case, and much faster than `Fraction`), else exact fractions.
        self.terms: dict[Exponents, Fraction | int] = {e: _exact(c) for e, c in terms.items() if c}

    @classmethod
    def dim(cls, dims: Sequence[str], name: str) -> Symbolic:
        """The dim `name` itself."""
        exponents = tuple(int(d == name) for d in dims)
        return cls(dims, {exponents: 1})

    @classmethod
    def make(cls, dims: Sequence[str], terms: Mapping[Exponents, Fraction | int]) -> Size:
        """The polynomial of `terms`, as an `int` when it is an integer constant."""
        value = cls(dims, terms)
        constant = value._constant()
        return constant if isinstance(constant, int) else value

    # --- reading ---------------------------------------------------------------------------------------------

    def _constant(self) -> Fraction | int | None:
        """The value when no dim is involved, else None."""
        if not self.terms:
            return 0
        if len(self.terms) == 1:
            ((exponents, coefficient),) = self.terms.items()
            if not any(exponents):
                return coefficient
        return None

    def at(self, point: Mapping[str, int]) -> Fraction | int:
        """The exact value at `point` (every dim given)."""
        values = [point[d] for d in self.dims]
        return sum((c * prod(v**e for v, e in zip(values, exps)) for exps, c in self.terms.items()), 0)

    def __repr__(self) -> str:
        """`2*seq**2 + 3*seq - 1`, highest degree first (as the curve's formulas read)."""
        text = ""
        for exponents in sorted(self.terms, key=lambda exps: (-sum(exps), tuple(-e for e in exps))):
            coefficient = self.terms[exponents]
            monomial = "*".join(d if e == 1 else f"{d}**{e}" for d, e in zip(self.dims, exponents) if e)
            magnitude = abs(coefficient)
            body = monomial if magnitude == 1 and monomial else "*".join(filter(None, (str(magnitude), monomial)))
            sign = "-" if coefficient < 0 else "+"
            text = (f"-{body}" if sign == "-" else body) if not text else f"{text} {sign} {body}"
        return text or "0"

    # --- arithmetic ------------------------------------------------------------------------------------------

    def _terms_of(self, other: object) -> Mapping[Exponents, Fraction | int] | None:
        if isinstance(other, Symbolic):
            if other.dims != self.dims:
                raise NotPolynomial(f"sizes in dims {self.dims} and {other.dims} met in one count")
            return other.terms
        if isinstance(other, (int, Fraction)):
            return {(0,) * len(self.dims): _exact(other)} if other else {}
        return None

    def __add__(self, other: object) -> Size:
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        total = dict(self.terms)
        for exponents, coefficient in terms.items():
            total[exponents] = total.get(exponents, 0) + coefficient
        return Symbolic.make(self.dims, total)

    __radd__ = __add__

    def __neg__(self) -> Size:
        return Symbolic.make(self.dims, {e: -c for e, c in self.terms.items()})

    def __pos__(self) -> Symbolic:
        return self

    def __sub__(self, other: object) -> Size:
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        return self + Symbolic(self.dims, {e: -c for e, c in terms.items()})

    def __rsub__(self, other: object) -> Size:
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        return Symbolic(self.dims, terms) - self

    def __mul__(self, other: object) -> Size:
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        product: dict[Exponents, Fraction | int] = {}
        for mine, a in self.terms.items():
            for theirs, b in terms.items():
                key = tuple(x + y for x, y in zip(mine, theirs))
                product[key] = product.get(key, 0) + a * b
        return Symbolic.make(self.dims, product)

    __rmul__ = __mul__

    def __pow__(self, power: object) -> Size:
        if not isinstance(power, int) or isinstance(power, bool) or power < 0:
            raise NotPolynomial(f"({self!r})**{power!r} is not a polynomial")
        result: Size = 1
        for _ in range(power):
            result = result * self
        return result

    def __floordiv__(self, other: object) -> Size:
        """Exact division by a constant that divides every coefficient (so the floor never rounds)."""
        divisor = self._divisor(other)
        quotient = {e: Fraction(c) / divisor for e, c in self.terms.items()}
        if any(c.denominator != 1 for c in quotient.values()):
            raise NotPolynomial(f"({self!r}) // {other!r} rounds at some sizes: not a polynomial")
        return Symbolic.make(self.dims, quotient)

    def __rfloordiv__(self, other: object) -> Size:
        raise NotPolynomial(f"{other!r} // ({self!r}) is not a polynomial")

    def __truediv__(self, other: object) -> Size:
        raise NotPolynomial(f"({self!r}) / {other!r}: a ratio of sizes is not an integer polynomial")

    def __rtruediv__(self, other: object) -> Size:
        raise NotPolynomial(f"{other!r} / ({self!r}) is not a polynomial")

    def __mod__(self, other: object) -> Size:
        raise NotPolynomial(f"({self!r}) % {other!r} is not a polynomial")

    def __rmod__(self, other: object) -> Size:
        raise NotPolynomial(f"{other!r} % ({self!r}) is not a polynomial")

    def _divisor(self, other: object) -> Fraction:
        terms = self._terms_of(other)
        if terms is None:
            raise NotPolynomial(f"({self!r}) // {other!r} is not a polynomial")
        constant = Symbolic(self.dims, terms)._constant()
        if constant is None or constant == 0:
            raise NotPolynomial(f"({self!r}) // ({other!r}) is not a polynomial")
        return Fraction(constant)

    # --- comparisons: decided only where the answer is the same at every size ----------------------------------

    def _difference(self, other: object, operator: str) -> Fraction | int:
        terms = self._terms_of(other)
        if terms is None:
            raise NotPolynomial(f"({self!r}) {operator} {other!r}: not a size")
        difference = self - Symbolic(self.dims, terms)
        if isinstance(difference, int):
            return difference
        constant = difference._constant()
        if constant is None:
            raise NotPolynomial(f"{self!r} {operator} {other!r} depends on the sizes: the cost is not one polynomial")
        return constant

    def __eq__(self, other: object) -> bool:
        if self._terms_of(other) is None:
            return NotImplemented
        return self._difference(other, "==") == 0

    def __ne__(self, other: object) -> bool:
        if self._terms_of(other) is None:
            return NotImplemented
        return self._difference(other, "!=") != 0

    def __lt__(self, other: object) -> bool:
        return self._difference(other, "<") < 0

    def __le__(self, other: object) -> bool:
        return self._difference(other, "<=") <= 0

    def __gt__(self, other: object) -> bool:
        return self._difference(other, ">") > 0

    def __ge__(self, other: object) -> bool:
        return self._difference(other, ">=") >= 0

    def __hash__(self) -> int:
        return hash((self.dims, frozenset(self.terms.items())))

    def __bool__(self) -> bool:
        """Not the zero polynomial (a figure that is zero at no size is added, one that is zero everywhere not)."""
        return bool(self.terms)

    def __int__(self) -> int:
        constant = self._constant()
        if not isinstance(constant, int):
            raise NotPolynomial(f"int({self!r}): a size that depends on the dims has no one integer value")
        return constant

    __index__ = __int__

    def __float__(self) -> float:
        raise NotPolynomial(f"float({self!r}): a figure that depends on the dims has no one value")


def _exact(value: Fraction | int) -> Fraction | int:
    """`value` as an `int` where it is whole (a `bool` too), else the `Fraction`."""
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else value
    return int(value)
