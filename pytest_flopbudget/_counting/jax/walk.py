"""Walk a jaxpr equation by equation, pricing each with the formula table (`ops.py`) and recursing into bodies.

Control flow counts as it runs: a `scan` body `length` times; a `while` with a static trip count (a counter from a
literal start, stepped by 1 to a literal bound: what `fori_loop` with traced code but constant bounds writes) trip
times, with its condition trip + 1 times, else it is skipped with the reason; a `cond` by its costlier branch (as
the ONNX walk prices `If`), the cheaper branch's skipped ops still reported. Call primitives (`jit`/`pjit`,
`closed_call`, `custom_jvp_call`, `custom_vjp_call`, `remat`/`checkpoint`) are walked once, through the one body
that runs: a custom rule's derivative is never added to its primal. A named composite's call (`composites.py`) is
priced by its rule, and the primitives it is made of (under `names.ABSORBED_SCOPE`) are not priced at all. A Pallas
kernel (`pallas_call`) counts what its `CostEstimate` declares, listed apart as estimated; without one it is skipped.

Every equation also goes through the walk's `memory` (`memory.py`): the bytes it moves are added to the tally beside
its FLOPs (so a loop body's bytes count as often as its FLOPs), and each program and equation is recorded for the
peak of live bytes (`graph_memory.py`); a composite's own primitives are handed to it too, so that the composite
moves and holds what one op would. A `while` without a static trip count is still walked for that (its peak does
not depend on how often it runs), its figures thrown away.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from pytest_flopbudget._counting.jax.composites import composite_call
from pytest_flopbudget._counting.jax.memory import JaxMemory
from pytest_flopbudget._counting.jax.names import LayerNamer, Stack, plain_layer
from pytest_flopbudget._counting.jax.ops import (
    DECLARED_COST,
    JAX_OPS,
    NO_COST_ESTIMATE,
    PALLAS_CALL,
    EqnContext,
    declared_cost,
)
from pytest_flopbudget._counting.registry import FREE
from pytest_flopbudget._counting.symbolic import NotPolynomial
from pytest_flopbudget._counting.tally import NO_FORMULA, Tally, formula_failed
from pytest_flopbudget._metrics import BYTES

#: Call-like primitives and the param that holds the body that runs (the primal, for custom derivative rules).
CALL_BODIES = {
    "pjit": "jaxpr",
    "jit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
    "custom_lin": "jaxpr",
}
#: The skip reason of a `while` whose trip count the jaxpr does not fix.
#: The stack of a top-level equation: no scope, forward.
ROOT_STACK = Stack()
DYNAMIC_TRIP = "dynamic trip count (a while loop whose bounds are not constants in the jaxpr)"


def _jaxpr_of(body: Any) -> Any:
    """The open jaxpr of a `ClosedJaxpr` or a `Jaxpr`."""
    return getattr(body, "jaxpr", body)


def _shape(var: Any, size: Callable[[Any], Any] = int) -> tuple[int, ...]:
    return tuple(size(d) for d in getattr(var.aval, "shape", ()))


def _is_integer(var: Any) -> bool:
    dtype = getattr(var.aval, "dtype", None)
    return dtype is not None and bool(np.issubdtype(dtype, np.integer))


def _literal(var: Any) -> int | None:
    """The integer value of a literal operand, None for a variable."""
    if type(var).__name__ != "Literal":
        return None
    try:
        return int(np.asarray(var.val).item())
    except (TypeError, ValueError):
        return None


class Walker:
    """Prices every equation of a jaxpr into a `Tally`, by layer (`namer` over the joined name stack) and phase.

    `size` reads one size of a shape or a scan length (`int`; a symbolic trace's reader gives polynomials,
    `counting/jax/symbolic.py`), and `strict` lets a formula's exception through instead of skipping the op: a
    symbolic count must fail whole where a formula has no polynomial, never count that op as skipped.
    """

    def __init__(self, namer: LayerNamer = plain_layer, size: Callable[[Any], Any] = int, strict: bool = False) -> None:
        self.namer = namer
        self.size = size
        self.strict = strict
        self.memory = JaxMemory(size)

    def walk(self, jaxpr: Any, tally: Tally, stack: Stack = ROOT_STACK) -> None:
        with self.memory.program(jaxpr, tally):
            for eqn in _jaxpr_of(jaxpr).eqns:
                self.equation(eqn, tally, stack.enter(eqn.source_info.name_stack))

    def equation(self, eqn: Any, tally: Tally, stack: Stack) -> None:
        if stack.absorbed:  # a primitive of a composite priced by its rule (`composites.py`)
            self.memory.absorbed(eqn, self.namer(stack.scopes), stack.backward)
            return
        name = eqn.primitive.name
        path = self.namer(stack.scopes)
        composite = composite_call(eqn, stack.backward and not stack.recomputed)
        with self.memory.equation(eqn, name, path, stack.backward, composite=composite is not None):
            self._equation(eqn, name, tally, stack, path, composite)

    def _equation(
        self, eqn: Any, name: str, tally: Tally, stack: Stack, path: str, composite: tuple[str, EqnContext] | None
    ) -> None:
        if composite is not None:
            op, context = composite
            sized = dataclasses.replace(
                context,
                in_shapes=[tuple(self.size(d) for d in shape) for shape in context.in_shapes],
                out_shapes=[tuple(self.size(d) for d in shape) for shape in context.out_shapes],
            )  # a symbolic trace's dims as the walk's sizes (`symbolic.py`), as every other equation's
            self._priced(eqn, op, tally, stack, path, sized)
        elif name == "scan":
            body = Tally()
            self.walk(eqn.params["jaxpr"], body, stack)
            tally.merge(body, self.size(eqn.params["length"]))
        elif name == "while":
            self._while(eqn, tally, stack, path)
        elif name == "cond":
            self._cond(eqn, tally, stack)
        elif name in CALL_BODIES and eqn.params.get(CALL_BODIES[name]) is not None:
            self.walk(eqn.params[CALL_BODIES[name]], tally, stack)
        elif name == PALLAS_CALL and JAX_OPS.lookup(name) is None:  # unless a formula is registered for kernels
            self._pallas(eqn, tally, stack, path)
        else:
            self._priced(eqn, name, tally, stack, path)

    def _pallas(self, eqn: Any, tally: Tally, stack: Stack, path: str) -> None:
        """A Pallas kernel counts what its `CostEstimate` declares, listed as estimated; without one, skipped."""
        cost = declared_cost(eqn.params.get("cost_estimate"))
        if cost is None:
            tally.skip(path, PALLAS_CALL, NO_COST_ESTIMATE)
            return
        values = cost.values()  # its operands read and its results written once, as any equation's (`memory`)
        moved = self.memory.moved(eqn, PALLAS_CALL, free=False, layer=path)
        if moved:
            values[BYTES] = moved
        tally.add_values(path, PALLAS_CALL, values, backward=stack.backward)
        tally.estimate(path, PALLAS_CALL, DECLARED_COST)

    def _priced(
        self, eqn: Any, name: str, tally: Tally, stack: Stack, path: str, context: EqnContext | None = None
    ) -> None:
        entry = JAX_OPS.lookup(name)
        if entry is FREE:  # no arithmetic, but a copy, a gather or a fill still moves memory (memory.py)
            moved = self.memory.moved(eqn, name, free=True, layer=path)
            if moved:
                tally.add_values(path, name, {BYTES: moved}, backward=stack.backward)
            return
        if entry is None:
            tally.skip(path, name, NO_FORMULA)
            return
        context = context or EqnContext(
            primitive=name,
            in_shapes=[_shape(v, self.size) for v in eqn.invars],
            out_shapes=[_shape(v, self.size) for v in eqn.outvars],
            params=eqn.params,
            out_integer=bool(eqn.outvars) and _is_integer(eqn.outvars[0]),
        )
        try:
            cost = entry(context)  # type: ignore[operator]
        except Exception as exc:  # a formula that cannot read this equation says so; it never counts zero silently
            if self.strict:
                raise NotPolynomial(f"{name} in {path or 'the model'}: {exc}") from exc
            tally.skip(path, name, formula_failed(f"{type(exc).__name__}: {exc}"[:200]))
            return
        values = cost.values()
        moved = self.memory.moved(eqn, name, free=False, layer=path)
        if moved:
            values[BYTES] = moved
        tally.add_values(path, name, values, backward=stack.backward)

    def _cond(self, eqn: Any, tally: Tally, stack: Stack) -> None:
        branches = []
        for branch in eqn.params["branches"]:
            sub = Tally()
            self.walk(branch, sub, stack)
            branches.append(sub)
        if not branches:
            return
        costliest = max(branches, key=lambda sub: list(sub.totals().values()))
        tally.merge(costliest)
        for other in branches:
            if other is not costliest:  # ops skipped in a cheaper branch may run: reported, never called exact
                tally.merge_skipped(other)

    def _while(self, eqn: Any, tally: Tally, stack: Stack, path: str) -> None:
        trip = static_trip_count(eqn)
        if trip is None:
            tally.skip(path, "while", DYNAMIC_TRIP)
            self.walk(eqn.params["body_jaxpr"], Tally(), stack)  # for the peak alone (`memory`)
            self.walk(eqn.params["cond_jaxpr"], Tally(), stack)
            return
        body, cond = Tally(), Tally()
        self.walk(eqn.params["body_jaxpr"], body, stack)
        self.walk(eqn.params["cond_jaxpr"], cond, stack)
        tally.merge(body, trip)
        tally.merge(cond, trip + 1)


def static_trip_count(eqn: Any) -> int | None:
    """The trip count of a `while` equation when the jaxpr fixes it, else None.

    Recognised: the condition is one `lt` of a carried counter against a literal or a loop-invariant carried value
    with a literal start, the body steps the counter by a literal 1, and the counter starts from a literal.
    """
    params = eqn.params
    cond, body = _jaxpr_of(params["cond_jaxpr"]), _jaxpr_of(params["body_jaxpr"])
    cond_consts, body_consts = int(params["cond_nconsts"]), int(params["body_nconsts"])
    inits = eqn.invars[cond_consts + body_consts :]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    carried_in_cond = list(cond.invars[cond_consts:])
    counter, bound = cond.eqns[0].invars
    if counter not in carried_in_cond:
        return None
    index = carried_in_cond.index(counter)
    upper = _literal(bound)
    if upper is None and bound in carried_in_cond:
        bound_index = carried_in_cond.index(bound)
        if body.outvars[bound_index] is not body.invars[body_consts + bound_index]:
            return None  # the bound changes inside the loop
        upper = _literal(inits[bound_index])
    start = _literal(inits[index])
    if upper is None or start is None or not _steps_by_one(body, body_consts, index):
        return None
    return max(upper - start, 0)


def _steps_by_one(body: Any, consts: int, index: int) -> bool:
    counter_in, counter_out = body.invars[consts + index], body.outvars[index]
    for eqn in body.eqns:
        if counter_out in eqn.outvars:
            operands = list(eqn.invars)
            return (
                eqn.primitive.name == "add"
                and counter_in in operands
                and any(_literal(v) == 1 for v in operands if v is not counter_in)
            )
    return False
