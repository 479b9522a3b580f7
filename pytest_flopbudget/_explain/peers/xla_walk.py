"""XLA's cost analysis, equation by equation, over the jaxpr our JAX count walked.

XLA reports one `flops` figure for a whole program (`jax.jit(f).lower(...).cost_analysis()`, HloCostAnalysis on the
unoptimised HLO). To say where it differs from ours, each equation of the jaxpr our count priced is lowered alone
(its operands as abstract arguments, its literals as constants) and costed by XLA itself, so every figure here is
XLA's own, keyed by the layer and op our count charged the same equation to. Bodies are entered as our walk enters
them, with two multiplicities: ours (a `scan` body `length` times, a static `while` body trip times) and XLA's (a
loop body once, whatever its length). A named composite's primitives (under the absorbed scope, or a jitted
library function's body) are charged to the composite's name, as our count prices the composite as one op. A loop
lowered alone costs its body once plus what XLA adds for the loop itself (its counter's add and compare): that rest
is kept apart, by layer. An equation whose result nothing reads (a Linen batch norm's running averages, which the
count's program does not return; a `fori_loop`'s counter nobody reads after the loop) is dropped by jax before XLA
sees the program: the program is walked a second time as jax's own dead-code elimination leaves it (`live`), which is
what XLA costs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pytest_flopbudget._counting.jax.composites import composite_call
from pytest_flopbudget._counting.jax.names import LayerNamer, Stack
from pytest_flopbudget._counting.jax.ops import COMPOSITE_PRIMITIVE
from pytest_flopbudget._counting.jax.walk import CALL_BODIES, ROOT_STACK, static_trip_count


@dataclasses.dataclass
class XlaOp:
    """XLA's figures for one op of one layer: `once` as XLA counts (a loop body once), `full` by XLA's rule at our
    multiplicity (a scan body `length` times), and the transcendentals (at our multiplicity) it keeps apart."""

    once: int = 0
    full: int = 0
    transcendentals: int = 0
    composite: bool = False
    #: XLA's figure for equations our count does not run (in a while loop without a static trip count: skipped)
    unseen: int = 0


class XlaWalk:
    """XLA's cost of every equation of a jaxpr, by (layer, op), and of every loop's own counter, by layer."""

    def __init__(self, jax: Any, namer: LayerNamer) -> None:
        self.jax = jax
        self.namer = namer
        self.ops: dict[tuple[str, str], XlaOp] = {}
        #: layer -> XLA's flops for the loops' own counters (a loop lowered alone, less its body)
        self.loops: dict[str, int] = {}
        #: equations XLA could not cost alone (lowering failed): (layer, op, why)
        self.failed: list[tuple[str, str, str]] = []
        self._cache: dict[str, tuple[int, int]] = {}
        self._pending: list[tuple[int, int, int, int]] = []
        self._override: str | None = None
        #: the same program as jax's dead-code elimination leaves it (what XLA is given), walked apart
        self.live: XlaWalk = self

    def walk_program(self, traced: Any) -> None:
        """Cost a whole program (a `ClosedJaxpr`) as written, and as jax hands it to XLA (`live`)."""
        self.walk(traced)
        kept = _without_dead_code(traced.jaxpr)
        if kept is not None:
            self.live = XlaWalk(self.jax, self.namer)
            self.live._cache = self._cache
            self.live.walk(kept)

    def walk(self, jaxpr: Any, stack: Stack = ROOT_STACK, ours: int = 1, xla: int = 1) -> int:
        """Cost the equations of `jaxpr` run `ours` times by our count and `xla` times by XLA; returns XLA's flops
        for one run of it."""
        total = 0
        for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
            total += self._equation(eqn, stack.enter(eqn.source_info.name_stack), ours, xla)
        return total

    def _equation(self, eqn: Any, stack: Stack, ours: int, xla: int) -> int:
        name = eqn.primitive.name
        layer = self.namer(stack.scopes)
        composite = None if stack.absorbed else composite_call(eqn, stack.backward and not stack.recomputed)
        if name == COMPOSITE_PRIMITIVE:
            if composite is not None:  # its primitives, costed before it, are the composite's
                op = self._override or composite[0]
                figure = self.ops.setdefault((layer, op), XlaOp(composite=True))
                for once, full, trans, unseen in self._pending:
                    figure.once += once
                    figure.full += full
                    figure.transcendentals += trans
                    figure.unseen += unseen
                self._pending = []
            return 0
        if composite is not None and name in ("pjit", "jit"):  # a jitted library composite: its body is one op
            outer, self._override = self._override, self._override or composite[0]
            try:
                flops = self.walk(eqn.params["jaxpr"], stack, ours, xla)
            finally:
                self._override = outer
            self.ops.setdefault((layer, self._override or composite[0]), XlaOp()).composite = True
            return flops
        if name == "scan":
            length = int(eqn.params["length"])
            body = self.walk(eqn.params["jaxpr"], stack, ours * length, xla)
            return body + self._loop(eqn, layer, body, xla)
        if name == "while":
            trip = static_trip_count(eqn)
            runs = trip if trip is not None else 0  # our count skips a while without a static trip count
            checks = runs + 1 if trip is not None else 0
            body = self.walk(eqn.params["body_jaxpr"], stack, ours * runs, xla)
            body += self.walk(eqn.params["cond_jaxpr"], stack, ours * checks, xla)
            return body + self._loop(eqn, layer, body, xla)
        if name == "cond":
            return self._cond(eqn, stack, ours, xla)
        if name in CALL_BODIES and eqn.params.get(CALL_BODIES[name]) is not None:
            return self.walk(eqn.params[CALL_BODIES[name]], stack, ours, xla)
        flops, trans = self.alone(eqn, layer)
        once = flops * xla
        unseen = once if ours == 0 else 0
        if stack.absorbed:
            self._pending.append((once, flops * ours, trans * ours, unseen))
        else:
            figure = self.ops.setdefault((layer, self._override or name), XlaOp(composite=self._override is not None))
            figure.once += once
            figure.full += flops * ours
            figure.transcendentals += trans * ours
            figure.unseen += unseen
        return flops

    def _cond(self, eqn: Any, stack: Stack, ours: int, xla: int) -> int:
        """A branch: XLA costs its costliest branch, as our count does (each side by its own figures)."""
        best: tuple[int, XlaWalk] | None = None
        for branch in eqn.params["branches"]:
            sub = XlaWalk(self.jax, self.namer)
            sub._cache, sub._override = self._cache, self._override
            flops = sub.walk(branch, stack, ours, xla)
            if best is None or flops > best[0]:
                best = (flops, sub)
        if best is None:
            return 0
        flops, chosen = best
        for key, figure in chosen.ops.items():
            mine = self.ops.setdefault(key, XlaOp(composite=figure.composite))
            mine.once += figure.once
            mine.full += figure.full
            mine.transcendentals += figure.transcendentals
            mine.unseen += figure.unseen
        for layer, rest in chosen.loops.items():
            self.loops[layer] = self.loops.get(layer, 0) + rest
        self.failed += chosen.failed
        self._pending += chosen._pending  # a branch inside a composite: its primitives are the composite's
        return flops

    def _loop(self, eqn: Any, layer: str, body: int, xla: int) -> int:
        """What XLA adds for a loop itself (lowered alone, less its body once): its counter's add and compare."""
        alone, _ = self.alone(eqn, layer)
        rest = alone - body
        if rest:
            self.loops[layer] = self.loops.get(layer, 0) + rest * xla
        return rest

    def alone(self, eqn: Any, layer: str) -> tuple[int, int]:
        """XLA's flops and transcendentals for `eqn` lowered alone."""
        literals = {i: v.val for i, v in enumerate(eqn.invars) if type(v).__name__ == "Literal"}
        operands = [v for i, v in enumerate(eqn.invars) if i not in literals]
        key = f"{eqn.primitive.name}|{[str(v.aval) for v in operands]}|{sorted(literals.items())}|{eqn.params}"
        if key in self._cache:
            return self._cache[key]
        jax = self.jax

        def alone(*values: Any) -> Any:
            given: Iterator[Any] = iter(values)
            args = [literals[i] if i in literals else next(given) for i in range(len(eqn.invars))]
            return eqn.primitive.bind(*args, **eqn.params)

        try:
            specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in operands]
            cost = cost_of(jax.jit(alone).lower(*specs))
        except Exception as exc:  # said, and left to the total's unexplained rest, never costed as zero silently
            self.failed.append((layer, eqn.primitive.name, f"{type(exc).__name__}: {exc}"[:200]))
            cost = (0, 0)
        self._cache[key] = cost
        return cost


def _without_dead_code(jaxpr: Any) -> Any:
    """`jaxpr` as jax's dead-code elimination leaves it (every output used; loop carries nothing reads dropped), as
    `jax.jit` lowers it; None where this jax has no such pass (XLA's figure then shows the dead code as an
    unexplained rest)."""
    try:
        from jax._src.interpreters import partial_eval

        kept, _ = partial_eval.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    except Exception:
        return None
    return kept


def cost_of(lowered: Any) -> tuple[int, int]:
    """`flops` and `transcendentals` of a lowered program's cost analysis (a dict, or a list of one per device)."""
    cost = lowered.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    cost = cost or {}
    return round(float(cost.get("flops", 0.0))), round(float(cost.get("transcendentals", 0.0)))
