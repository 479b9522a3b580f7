"""Memory of a graph engine's count (JAX jaxprs, TensorFlow graphs): bytes moved per op and the peak of live bytes.

The JAX and TensorFlow engines see a whole program before anything runs: every op in order, every value with its
shape and dtype. Both walks (`jax/walk.py`, `tensorflow/walk.py`) hand this module the same events through a
`Recorder`, each engine translating its own ops first (`jax/memory.py`, `tensorflow/memory.py`):

- a **program** (`Recorder.program`) is one graph the walk enters: the model's own, or a body (a call's, a loop's,
  a branch's), with its inputs and outputs;
- an **op** (`Recorder.equation`) reads values and writes values, in the program's order; a **view** (a reshape,
  a transpose, a broadcast: `views=`) writes no new memory, each of its outputs shares the storage of one of its
  inputs;
- a **call** whose body the walk enters (`inline=True`) is spelled out in place: the body's inputs are the
  call's operands and the call's outputs are the body's results, as if the body had been written where the call
  is; any other op whose bodies the walk enters (a loop, a branch) is a **region**;
- an op given whole (`Recorder.op`: a JAX composite, one op made of several equations) may have **optional**
  outputs: values it makes inside that exist beyond it only if a later op of its program reads them (a residual
  saved for the backward); they are settled when the program ends.

From those events:

- `traffic(reads, writes)` is the `bytes` rule of every graph engine, the PyTorch engine's rule: every distinct
  value read once plus every distinct value written once, each at its dtype's size (the engines add it to their
  tallies per op, so a loop body's bytes count as often as its FLOPs);
- `Program.peak()` is the peak of live bytes by liveness over the op order (unfused: every op's outputs are new
  buffers): at the start the top program's inputs (parameters, buffers, inputs) and the values that live
  throughout (`Recorder.resident`: variables, constants) are alive, and stay so; each op's outputs are added when
  it runs and the peak is taken then, with its inputs not yet released (as the PyTorch engine and an allocator
  see it); a storage is released after the last op that reads it (through any view of it), an output of the top
  program never. A region's peak is its body's own peak (of the values the body creates; its inputs live outside
  it) on top of what is live around it, its outputs included: a `scan`'s stacked outputs exist while its body
  runs. The costliest branch of a conditional, and the larger of a while loop's condition and body, is taken.
  How often a loop runs does not change its peak. Sizes may be polynomials of a symbolic count
  (`counting/symbolic.py`): the peak is then the op whose live bytes are above every other's at every size, and
  where none is, the peak is not measured (it is no one polynomial: a curve then interpolates point counts).

A value whose size is not known (an unknown dimension, a dtype without a fixed size) or a body the walk could not
enter (an opaque call) makes the peak not measured, with the reason (`Peak.unsized`), never a low figure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import comb, prod
from typing import Any, Optional

from pytest_flopbudget._counting.symbolic import NotPolynomial, Symbolic
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, PARAM_BYTES, PEAK_MEMORY, Metric
from pytest_flopbudget._report import MAX_COUNT, ROOT, Report, conventions_with

#: A value's identity within one count: what the engine's graph names it by (a jaxpr variable, a graph tensor's name).
Key = Hashable

#: How a graph engine's report counts `peak-memory` (its JSON's `conventions["peak-memory"]`).
PEAK_CONVENTION = (
    "the peak of live tensor bytes over the traced graph's op order, unfused (every op's outputs are new buffers, a "
    "view shares its input's): parameters, buffers, inputs and constants throughout, each intermediate from the op "
    "that writes it to the last op that reads it, the outputs to the end; a loop or branch body's own peak on top "
    "of what is live around it; in a training count the traced step (forward, loss, gradients: saved values live "
    "until the backward reads them, gradients to the end); the compiler's fusion and buffer reuse, allocator "
    "rounding, workspaces and optimizer state are not included"
)


@dataclass(frozen=True)
class Value:
    """One value of a graph: its key and its size in bytes (None when the graph does not give it)."""

    key: Key
    nbytes: int | None


def traffic(reads: Iterable[Value], writes: Iterable[Value]) -> int | None:
    """The bytes an op moves: every distinct value it reads once plus every distinct value it writes once; None
    when one of them has no known size (the count then has no `bytes` figure rather than a low one)."""
    total, seen = 0, set()
    for value in (*reads, *writes):
        if value.key in seen:
            continue
        seen.add(value.key)
        if value.nbytes is None:
            return None
        total += value.nbytes
    return total


@dataclass(frozen=True)
class Peak:
    """The peak of live bytes of a program and where it was reached: the layer of the op running then, whether
    it ran in the backward; `unsized` says why there is no figure (then `bytes` means nothing)."""

    bytes: int
    layer: str = ROOT
    backward: bool = False
    unsized: str | None = None


class _Op:
    """One op of a program (or a region, with the programs of its bodies)."""

    __slots__ = (
        "backward",
        "bodies",
        "has_body",
        "inline",
        "inlined",
        "layer",
        "name",
        "optional",
        "reads",
        "views",
        "writes",
    )

    def __init__(
        self,
        name: str,
        layer: str,
        reads: Sequence[Key | None],
        writes: Sequence[Value],
        views: Sequence[int] | None,
        backward: bool,
        inline: bool,
        has_body: bool,
    ) -> None:
        self.name, self.layer, self.reads, self.writes = name, layer, tuple(reads), tuple(writes)
        self.views, self.backward, self.inline, self.has_body = views, backward, inline, has_body
        self.bodies: list[Program] = []
        self.inlined = False
        #: values made inside the op that are its outputs only if a later op reads them (`Recorder.op`)
        self.optional: tuple[Value, ...] = ()


@dataclass(frozen=True)
class _Alias:
    """`new` names the storage `old` names (an inlined call's operand or result); a storage of `nbytes` of its own
    when `old` names none (a constant the body returns)."""

    new: Key
    old: Key | None
    nbytes: int | None


@dataclass
class Program:
    """The ops of one graph in order, its inputs and the outputs it keeps alive to its end."""

    inputs: Sequence[Value]
    outputs: list[Key]
    top: bool = False
    events: list[_Op | _Alias] = field(default_factory=list)
    #: outputs the program lets go of (`Recorder.let_go`): a view that only names one of them reads nothing
    let_go: frozenset[Key] = frozenset()
    #: ops with optional outputs, settled when the program ends: (their index, the op, what to call with the kept)
    pending: list[tuple[int, _Op, Callable[[list[Value]], None] | None]] = field(default_factory=list)
    #: the sizes a symbolic count's dims take (`Recorder.box`)
    box: Box = field(default_factory=dict)
    _peak: Peak | None = field(default=None, repr=False)

    def peak(self) -> Peak:
        """The peak of live bytes of this program (the module's docstring gives the rule): of everything for the
        top program, of the values it creates for a body. Computed once."""
        if self._peak is None:
            self._peak = _peak(self)
        return self._peak


_FOREVER = 1 << 62


def _peak(program: Program) -> Peak:
    # pass 1: which storage each value is in, how big each storage is, and the last event that reads it
    events = program.events
    storage: dict[Key, int] = {}
    sizes: list[int] = []
    last: list[int] = []
    grown = [0] * len(events)  # the bytes each event allocates
    unsized: str | None = None

    def new(nbytes: int, at: int) -> int:
        sizes.append(nbytes)
        last.append(at)
        if at >= 0:
            grown[at] += nbytes
        return len(sizes) - 1

    live = 0
    for value in program.inputs:
        if value.key in storage:
            continue
        nbytes = value.nbytes if program.top else 0  # a body's inputs are its caller's values, live outside it
        if nbytes is None:
            unsized = unsized or "an input's size is not known"
            nbytes = 0
        storage[value.key] = new(nbytes, -1)
        last[-1] = _FOREVER
        live += nbytes
    for index, event in enumerate(events):
        if isinstance(event, _Alias):
            found = storage.get(event.old) if event.old is not None else None
            if found is None:
                if event.nbytes is None:
                    unsized = unsized or "a constant result's size is not known"
                found = new(event.nbytes or 0, index)
            storage[event.new] = found
            continue
        views = event.views
        naming = views is not None and bool(event.writes) and all(w.key in program.let_go for w in event.writes)
        for key in () if naming else event.reads:
            found = storage.get(key) if key is not None else None
            if found is not None and last[found] < index:
                last[found] = index
        for position, value in enumerate(event.writes):
            if views is not None:  # shares an input's storage; a view of a constant (a literal) holds none of its own
                operand = views[position] if position < len(views) else len(event.reads)
                read = event.reads[operand] if operand < len(event.reads) else None
                source = storage.get(read) if read is not None else None
                if source is not None:
                    storage[value.key] = source
                continue
            if value.nbytes is None:
                unsized = unsized or f"the size of an output of {event.name} in {_where(event.layer)} is not known"
            storage[value.key] = new(value.nbytes or 0, index)
        for body in event.bodies:
            unsized = unsized or body.peak().unsized
    for key in program.outputs:
        found = storage.get(key)
        if found is not None:
            last[found] = _FOREVER
    if unsized is not None:
        return Peak(0, unsized=unsized)

    # pass 2: live bytes over the events, the peak after each op (its outputs alive, its inputs not yet released)
    released = [0] * len(events)  # the bytes released after each event
    for found, at in enumerate(last):
        if 0 <= at < len(events):
            released[at] += sizes[found]
    peak, layer, backward = live, ROOT, False
    for index, event in enumerate(events):
        live += grown[index]
        if isinstance(event, _Op):
            inner: Peak | None = None
            for body in event.bodies:
                body_peak = body.peak()
                if inner is None or _above(body_peak.bytes, inner.bytes, program.box):
                    inner = body_peak
            extra = inner.bytes if inner is not None else 0
            if _above(live + extra, peak, program.box):
                peak = live + extra
                if inner is not None and extra:
                    layer, backward = inner.layer, inner.backward
                else:
                    layer, backward = event.layer, event.backward
        live -= released[index]
    return Peak(peak, layer, backward)


#: The sizes a symbolic count's dims take: dim -> (smallest, largest or None); a dim not named is at least 1.
Box = Mapping[str, tuple[int, Optional[int]]]


def _above(size: Any, other: Any, box: Box) -> bool:
    """Whether `size` is the larger of the two: `size > other` for counts; for a symbolic count's polynomials,
    `size >= other` at every size of `box` and not equal at all of them (where they tie, either is the peak).
    `NotPolynomial` where which is larger depends on the sizes."""
    if not isinstance(size, Symbolic) and not isinstance(other, Symbolic):
        return bool(size > other)
    difference = size - other
    if not isinstance(difference, Symbolic):
        return bool(difference > 0)
    ranges = [box.get(dim, (1, None)) for dim in difference.dims]
    sign = _sign(difference.terms, ranges, depth=0)
    if sign is None:
        raise NotPolynomial(
            f"the peak of live bytes is reached at different ops at different sizes ({difference!r} > 0)"
        )
    return sign >= 0


def _sign(terms: Mapping[tuple[int, ...], Any], ranges: list[tuple[int, int | None]], depth: int) -> int | None:
    """1 if the polynomial is >= 0 at every point of `ranges`, -1 if <= 0, None if neither could be shown. Each
    monomial grows with each dim (all sizes are positive), so a bounded box bounds it by its corners; a box too
    wide to decide is halved (a few times); an unbounded one is decided by the signs of the coefficients with
    each dim written as its smallest size plus a size >= 0."""
    if any(high is None for _, high in ranges):
        shifted = _shifted(terms, [low for low, _ in ranges]).values()
        return 1 if all(c >= 0 for c in shifted) else -1 if all(c <= 0 for c in shifted) else None
    lows = [low for low, _ in ranges]
    highs = [int(high) for _, high in ranges]  # type: ignore[arg-type]
    least = most = 0
    for exponents, coefficient in terms.items():
        at_low = coefficient * prod(x**e for x, e in zip(lows, exponents))
        at_high = coefficient * prod(x**e for x, e in zip(highs, exponents))
        least += min(at_low, at_high)
        most += max(at_low, at_high)
    if least >= 0:
        return 1
    if most <= 0:
        return -1
    widest = max(range(len(ranges)), key=lambda i: highs[i] - lows[i])
    if depth >= 16 or highs[widest] == lows[widest]:
        return None
    middle = (lows[widest] + highs[widest]) // 2
    halves = []
    for low, high in ((lows[widest], middle), (middle + 1, highs[widest])):
        part = list(ranges)
        part[widest] = (low, high)
        halves.append(_sign(terms, part, depth + 1))
    return halves[0] if halves[0] is not None and halves[0] == halves[1] else None


def _shifted(terms: Mapping[tuple[int, ...], Any], lows: Sequence[int]) -> dict[tuple[int, ...], Any]:
    """The polynomial `terms` with every dim `x` written as `low + y`: its coefficients in the `y`s."""
    result: dict[tuple[int, ...], Any] = {}
    for exponents, coefficient in terms.items():
        expanded: dict[tuple[int, ...], Any] = {(): coefficient}
        for power, low in zip(exponents, lows):
            grown: dict[tuple[int, ...], Any] = {}
            for prefix, value in expanded.items():
                for k in range(power + 1):
                    key = (*prefix, k)
                    grown[key] = grown.get(key, 0) + value * comb(power, k) * low ** (power - k)
            expanded = grown
        for key, value in expanded.items():
            result[key] = result.get(key, 0) + value
    return result


def _settle(program: Program) -> None:
    """Keep each pending op's optional outputs that a later event of the program reads (or the program returns)."""
    if not program.pending:
        return
    last: dict[Key, int] = {}
    for index, event in enumerate(program.events):
        if isinstance(event, _Alias):
            if event.old is not None:
                last[event.old] = index
        else:
            for key in event.reads:
                if key is not None:
                    last[key] = index
    for key in program.outputs:
        last[key] = len(program.events)
    for index, op, done in program.pending:
        kept = [value for value in op.optional if last.get(value.key, -1) > index]
        op.writes = (*op.writes, *kept)
        if done is not None:
            done(kept)
    program.pending.clear()


def _where(layer: str) -> str:
    return f"layer '{layer}'" if layer else "the model"


class Recorder:
    """What one walk saw, as programs of ops (the module's docstring): the walk opens a `program` for each graph it
    enters and an `equation` around each op; the programs a walk opens inside an op are its bodies."""

    def __init__(self) -> None:
        self.root: Program | None = None
        self._programs: list[Program] = []
        self._open: list[_Op] = []
        #: values alive throughout the count that no program input holds (variables, constants), by key
        self._resident: dict[Key, int | None] = {}
        #: why the peak cannot be measured, beyond the programs' own sizes (a body the walk did not enter)
        self.opaque: str | None = None
        #: the sizes of a symbolic count's dims (a curve's range), where its peak compares polynomials
        self.box: Box = {}

    def resident(self, value: Value) -> None:
        """A value alive from the start to the end (a variable, a constant): counted once, at the start."""
        self._resident.setdefault(value.key, value.nbytes)

    @contextlib.contextmanager
    def program(self, inputs: Sequence[Value], outputs: Sequence[Key | None]) -> Iterator[None]:
        """The walk enters a graph with these inputs and outputs (`None` for a constant output)."""
        owner = self._open[-1] if self._open else None
        if owner is not None and owner.inline and not owner.inlined and self._programs:
            program = self._programs[-1]  # a call, spelled out where it is
            for value, outer in zip(inputs, owner.reads):
                program.events.append(_Alias(value.key, outer, 0))
            self._programs.append(program)
            try:
                yield
            finally:
                self._programs.pop()
            for result, inner in zip(owner.writes, outputs):
                program.events.append(_Alias(result.key, inner, result.nbytes))
            owner.inlined = True
            return
        program = Program(inputs, [key for key in outputs if key is not None], top=not self._programs, box=self.box)
        self._programs.append(program)
        try:
            yield
        finally:
            self._programs.pop()
        _settle(program)
        if owner is not None:
            owner.bodies.append(program)
        elif self.root is None:
            self.root = program

    @contextlib.contextmanager
    def equation(
        self,
        name: str,
        layer: str,
        reads: Sequence[Key | None],
        writes: Sequence[Value],
        *,
        views: Sequence[int] | None = None,
        backward: bool = False,
        inline: bool = False,
        has_body: bool = False,
    ) -> Iterator[None]:
        """One op `name` in `layer` reads `reads` (positionally, `None` for a constant operand) and writes `writes`.
        `views`: the op is a view, each output sharing the storage of the operand at that position (an operand out of
        range or constant: no storage of its own). `inline`: a call, spelled out where it is when the walk enters its
        body. `has_body`: the op runs a body; if the walk enters none, the peak is not known."""
        op = _Op(name, layer, reads, writes, views, backward, inline, has_body)
        self._open.append(op)
        try:
            yield
        finally:
            self._open.pop()
        if op.inlined:
            return
        if has_body and not op.bodies:
            self.opaque = self.opaque or f"the body of {name} in {_where(layer)} could not be walked"
        if self._programs:
            self._programs[-1].events.append(op)

    def op(
        self,
        name: str,
        layer: str,
        reads: Sequence[Key],
        writes: Sequence[Value],
        *,
        optional: Sequence[Value] = (),
        backward: bool = False,
        done: Callable[[list[Value]], None] | None = None,
    ) -> None:
        """One op given whole (no body): it reads `reads` and writes `writes`, and `optional` too where a later op of
        its program reads them; `done` is called with those when the program ends (its bytes are known then)."""
        op = _Op(name, layer, reads, writes, None, backward, False, False)
        op.optional = tuple(optional)
        if not self._programs:
            return
        program = self._programs[-1]
        program.events.append(op)
        if op.optional or done is not None:
            program.pending.append((len(program.events) - 1, op, done))

    def view_of(self, operand: int | None) -> None:
        """The op open now turns out to be a view: its outputs share the storage of its operand at `operand`
        (`None`: of none, a value the program does not hold in memory)."""
        if self._open:
            op = self._open[-1]
            op.views = [len(op.reads) if operand is None else operand] * len(op.writes)

    def let_go(self, keys: Iterable[Key]) -> None:
        """The top program does not keep these outputs to its end (a training step's model outputs: the loop
        keeps the loss and the gradients), nor does a view that only names one of them as an output (TensorFlow
        returns each output through an `Identity` written after every other op)."""
        if self.root is not None:
            dropped = frozenset(keys)
            self.root.outputs = [key for key in self.root.outputs if key not in dropped]
            self.root.let_go = self.root.let_go | dropped
            self.root._peak = None

    def peak(self) -> Peak:
        """The peak of live bytes over the whole count: the top program's, with the resident values on top."""
        if self.root is None:
            return Peak(0, unsized="nothing was traced")
        if self.opaque is not None:
            return Peak(0, unsized=self.opaque)
        if any(nbytes is None for nbytes in self._resident.values()):
            return Peak(0, unsized="the size of a variable or constant is not known")
        try:
            found = self.root.peak()
        except NotPolynomial as exc:  # a symbolic count whose peak is no one polynomial: no figure, and why
            return Peak(0, unsized=str(exc))
        if found.unsized is not None:
            return found
        resident = sum(nbytes or 0 for nbytes in self._resident.values())
        return Peak(found.bytes + resident, found.layer, found.backward)


def _beyond(figure: Any) -> bool:
    """A whole figure beyond what a report can hold (a symbolic count's polynomial is judged at its sizes)."""
    return isinstance(figure, int) and figure > MAX_COUNT


def measure_memory(
    report: Report,
    bytes_unsized: str | None,
    peak: Peak,
    *,
    bytes_convention: str,
    held: Iterable[Metric] = (PARAM_BYTES, BUFFER_BYTES),
) -> None:
    """Mark the memory metrics a graph engine measured: `bytes` unless a size was unknown (`bytes_unsized`, the
    reason), the per-layer metrics in `held` (their figures are in the layers already), and `peak-memory` unless
    `peak.unsized`. A metric not measured has no figures and a convention saying why, so a budget on it fails as
    not measured, never passes on a low figure. A total beyond what a report holds is not measured either."""
    reasons: dict[Metric, str | None] = {metric: None for metric in held}
    reasons[BYTES] = bytes_unsized
    for metric in reasons:
        if reasons[metric] is None and _beyond(metric.of_report(report)):
            reasons[metric] = "its total is beyond what a report can hold (10^30 bytes)"
    reasons[PEAK_MEMORY] = peak.unsized
    if peak.unsized is None and _beyond(peak.bytes):
        reasons[PEAK_MEMORY] = "it is beyond what a report can hold (10^30 bytes)"
    measured = frozenset(metric for metric, reason in reasons.items() if reason is None)
    engine_conventions = dict(report.conventions)
    report.optional_metrics = measured
    report.conventions = {**conventions_with(measured), **engine_conventions}
    if BYTES in measured:
        report.conventions[BYTES] = bytes_convention
    if PEAK_MEMORY in measured:
        report.peak_memory, report.peak_layer = peak.bytes, peak.layer
        report.conventions[PEAK_MEMORY] = PEAK_CONVENTION
    for metric, reason in reasons.items():
        if reason is None:
            continue
        report.conventions[metric] = f"not measured: {reason}"
        for figures in (report.forward, report.backward, *report.layers.values()):
            figures.values.pop(metric, None)
        for layer in report.layers.values():
            for op in layer.ops.values():
                op.values.pop(metric, None)
