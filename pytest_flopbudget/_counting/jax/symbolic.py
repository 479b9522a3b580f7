"""JAX's symbolic dims as the exact polynomials the formulas compute with (`counting/symbolic.py`).

`jax.export.symbolic_shape("seq")` makes a dim that `jax.make_jaxpr` carries through every shape of a trace:
`f32[1,seq,16]`, `f32[2,seq,seq]`. Each is a jax `_DimExpr`, a sum of terms whose factors are the dims or
operations on them (`floordiv(seq - 3, 2)`, `max(seq, 4)`, `mod`). A size whose every factor is a dim of the curve
is a polynomial and becomes a `Symbolic`; any other (a strided convolution's output) is not one polynomial at
every size, and reading it raises `NotPolynomial` naming it.

jax has no public reader of a `_DimExpr`'s terms, so this one reads its fields (`_sorted_terms`, `_factors`,
`var`), checked to be what they were in jax 0.10; a jax that changed them reads as `NotPolynomial` too (the curve
then interpolates point counts), never as a wrong figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_flopbudget._counting.jax.names import LayerNamer, Stack
from pytest_flopbudget._counting.jax.ops import EqnContext
from pytest_flopbudget._counting.jax.walk import Walker, _literal
from pytest_flopbudget._counting.symbolic import Exponents, NotPolynomial, Size, Symbolic
from pytest_flopbudget._counting.tally import Tally


def symbols(jax: Any, dims: Sequence[str], ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """One jax symbolic dim per name, in one scope (jax refuses to mix dims of different scopes in one trace), each
    constrained to its range where given (`seq >= 8`, `seq <= 512`): a comparison the range decides (`seq > 4`)
    then traces, as it would at every size of the range."""
    bounds = [
        f"{dim} {op} {size}" for dim, (low, high) in (ranges or {}).items() for op, size in ((">=", low), ("<=", high))
    ]
    try:
        made = jax.export.symbolic_shape(", ".join(dims), constraints=bounds)
    except Exception as exc:
        raise NotPolynomial(f"jax cannot name the dims {', '.join(dims)} ({type(exc).__name__}: {exc})") from None
    return dict(zip(dims, made))


def size_reader(dims: Sequence[str]) -> Callable[[Any], Size]:
    """A function reading one size of a jaxpr's shape (an int, or a `_DimExpr` in `dims`) as an int or `Symbolic`."""
    order = tuple(dims)
    known: dict[Any, Size] = {}  # a trace repeats its few sizes in every shape

    def read(size: Any) -> Size:
        if isinstance(size, int):
            return size
        if hasattr(size, "__int__") and not hasattr(size, "_sorted_terms"):  # a numpy integer
            return int(size)
        found = known.get(size)
        if found is None:
            found = known[size] = _polynomial(size, order)
        return found

    return read


def _polynomial(size: Any, dims: tuple[str, ...]) -> Size:
    try:
        sorted_terms = size._sorted_terms
    except AttributeError:
        raise NotPolynomial(f"the size {size!r} is neither an integer nor a jax symbolic dim") from None
    terms: dict[Exponents, int] = {}
    try:
        for term, coefficient in sorted_terms:
            exponents = [0] * len(dims)
            for factor, power in term._factors:
                name = factor.var
                if name is None:
                    raise NotPolynomial(
                        f"the size {size} is not a polynomial in {', '.join(dims)} ({factor.operation} of a dim)"
                    )
                if name not in dims:
                    raise NotPolynomial(f"the size {size} names {name}, which is not a dim of the curve")
                exponents[dims.index(name)] += int(power)
            key = tuple(exponents)
            terms[key] = terms.get(key, 0) + int(coefficient)
    except (AttributeError, TypeError, ValueError) as exc:
        raise NotPolynomial(f"this jax's symbolic dims cannot be read ({type(exc).__name__}: {exc})") from None
    return Symbolic.make(dims, terms)


#: Read a dim as a value (`x.shape[1]` used in arithmetic): free, as the Python int a point trace has there.
DIM_AS_VALUE = "dim_as_value"
#: The identity steps `jnp.arange` adds when its length is symbolic (`start + step * iota` with start 0, step 1):
#: a point trace has the bare `iota` there.
_IDENTITY = {"mul": 1, "add": 0}


class SymbolicWalker(Walker):
    """The walk of a symbolic trace: sizes read as polynomials (`size_reader`), a formula that fails fails the whole
    count (`strict`), and the two things a symbolic trace writes that a point trace does not are free: reading a
    dim as a value (`dim_as_value`) and `jnp.arange`'s `1 * iota + 0` (an identity operation on an `iota`). Anything
    else it writes differently shows as a figure that misses the point count, and the curve interpolates instead.
    """

    def __init__(
        self, namer: LayerNamer, dims: Sequence[str], ranges: Mapping[str, tuple[int, int]] | None = None
    ) -> None:
        super().__init__(namer, size=size_reader(dims), strict=True)
        self.memory.recorder.box = dict(ranges or {})  # the peak compares polynomials over the curve's range
        self.ranges: set[Any] = set()  # iota results and identity steps on them: `jnp.arange` under construction

    def _priced(
        self, eqn: Any, name: str, tally: Tally, stack: Stack, path: str, context: EqnContext | None = None
    ) -> None:
        if name == DIM_AS_VALUE:  # what a point trace holds as a Python int: no memory either
            self.memory.view_of(None)
            return
        if name == "iota":
            self.ranges.update(eqn.outvars)
        elif name in _IDENTITY and len(eqn.invars) == 2:
            first, second = eqn.invars
            for constant, operand in ((first, second), (second, first)):
                if _literal(constant) == _IDENTITY[name] and _is_var(operand) and operand in self.ranges:
                    self.ranges.update(eqn.outvars)
                    self.memory.view_of(list(eqn.invars).index(operand))  # the point trace's bare `iota`
                    return
        super()._priced(eqn, name, tally, stack, path, context)


def _is_var(operand: Any) -> bool:
    """A jaxpr variable (hashable), not a `Literal` operand."""
    return type(operand).__name__ != "Literal"
