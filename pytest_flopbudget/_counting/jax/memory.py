"""Memory of a jaxpr: the bytes each equation moves and the events the peak is found from (`graph_memory.py`).

The jaxpr is unfused: every equation reads its operands from memory and writes its results to memory, as if XLA
ran one kernel per equation. So `bytes` follows the PyTorch engine's rule, every distinct operand read once plus
every result written once at its dtype's size, and so does the peak (each result a new buffer, alive until its
last reader). What XLA fuses reads and writes less: docs/jax.md, "Memory", measures one example both ways.

Primitives free of FLOPs split three ways, chosen so that a model and its PyTorch twin agree where the ops do:

- **views** move nothing and hold no memory of their own: their result shares their operand's buffer, as
  PyTorch's views do (`VIEW_PRIMITIVES`: `reshape`, `squeeze`, `expand_dims`, `broadcast_in_dim` (torch's
  `expand`), `transpose` (`permute`), `slice`, `split`, `stop_gradient` (`detach`), `real`/`imag`/`conj`, sharding
  annotations), and a `convert_element_type` that keeps the dtype (a weak-type change);
- **gathers** (`gather`, `dynamic_slice`) read their indices and only the elements they gather (as many bytes as
  they write), never the whole operand, as PyTorch's `embedding` and ONNX's `Gather`;
- every other free primitive moves what a priced one moves (`concatenate`, `pad`, `select_n`, a dtype-changing
  `convert_element_type`, `iota` and `zeros_like` (which read nothing), `dynamic_update_slice` and `scatter`,
  which read and write their whole operand: XLA updates in place, the unfused figure copies).

A literal operand (`x * 2.0`) is a constant of the program, not a tensor: it is not read, as a Python scalar is
not in PyTorch. An equation that is skipped (no formula) adds no bytes, as in the other engines; its skipped entry
says the count is not exact. A size the jaxpr does not fix (a symbolic dimension) leaves `bytes` not measured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from math import prod
from typing import Any

import numpy as np

from pytest_flopbudget._counting.graph_memory import Key, Recorder, Value, traffic
from pytest_flopbudget._counting.jax.composites import INPUT, OUTPUT
from pytest_flopbudget._counting.jax.ops import BACKWARD, COMPOSITE_PRIMITIVE, JAX_OPS
from pytest_flopbudget._counting.registry import FREE
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._metrics import BYTES

#: Results that share their operand's buffer: nothing moved, no memory of their own.
VIEW_PRIMITIVES = frozenset(
    {
        "reshape",
        "squeeze",
        "expand_dims",
        "broadcast_in_dim",
        "transpose",
        "slice",
        "split",
        "bitcast_convert_type",
        "stop_gradient",
        "real",
        "imag",
        "conj",
        "device_put",
        "optimization_barrier",
        "sharding_constraint",
        "mesh_cast",
        "pvary",
        "random_wrap",
        "random_unwrap",
        "name",
    }
)
#: Read their indices and as many elements of their operand (operand 0) as they write.
GATHER_PRIMITIVES = frozenset({"gather", "dynamic_slice"})
#: Write their result without reading their operands' data (only their shapes).
WRITE_ONLY_PRIMITIVES = frozenset({"iota", "zeros_like"})
#: Allocate a result without writing it.
NO_TRAFFIC_PRIMITIVES = frozenset({"empty"})
#: Call primitives whose body the walk spells out in place (`walk.CALL_BODIES` and the derivative rules' calls).
INLINE_PRIMITIVES = frozenset(
    {
        "pjit",
        "jit",
        "closed_call",
        "core_call",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "remat2",
        "checkpoint",
        "custom_lin",
    }
)
#: Primitives with a body (a jaxpr among their params) that is not memory the count could see: a Pallas kernel's
#: body runs on the chip's scratchpad, its results are what it writes to memory.
OPAQUE_BODY_OK = frozenset({"pallas_call"})

#: How a JAX report counts `bytes` (its JSON's `conventions["bytes"]`).
BYTES_CONVENTION = (
    "per jaxpr equation, unfused (one kernel per equation, no XLA fusion): every distinct operand read once and "
    "every result written once, each at its dtype's size; literals are not read; views and metadata (reshape, "
    "squeeze, expand_dims, broadcast_in_dim, transpose, slice, split, stop_gradient, a same-dtype convert) move 0; "
    "gather and dynamic_slice read their indices and only what they gather; other free primitives (concatenate, "
    "pad, select_n, convert_element_type, dynamic_update_slice, scatter) move their bytes; a scan or while body's "
    "bytes count as often as it runs"
)


def element_bits(dtype: Any) -> int | None:
    """Bits per element of a jax dtype: sub-byte types (int4) packed, a PRNG key as the words it holds; None for a
    dtype without a fixed size."""
    rules = getattr(dtype, "_rules", None)
    if rules is not None and hasattr(rules, "physical_element_aval"):  # an extended dtype: a typed PRNG key
        physical = rules.physical_element_aval(dtype)
        bits = element_bits(physical.dtype)
        return None if bits is None else bits * prod(int(d) for d in physical.shape)
    try:
        import jax

        return int(jax.dtypes.itemsize_bits(dtype))
    except Exception:
        try:
            return int(np.dtype(dtype).itemsize) * 8
        except Exception:
            return None


#: dtype -> its bits per element: asked for every value of every equation, answered once per dtype
_BITS: dict[Any, int | None] = {}


def aval_bytes(aval: Any, size: Callable[[Any], Any] = int) -> Any:
    """Bytes of an abstract value (a variable's `aval`, a `ShapeDtypeStruct`): its elements at its dtype's size,
    sub-byte types rounded up to whole bytes; None when a dimension cannot be read (`size`: `int`, or a symbolic
    count's reader, which gives polynomials) or the dtype has no fixed size."""
    dtype = getattr(aval, "dtype", None)
    if dtype is None:
        return 0  # a token or another value without data
    try:
        bits = _BITS[dtype]
    except KeyError:
        bits = _BITS[dtype] = element_bits(dtype)
    except TypeError:  # an unhashable dtype
        bits = element_bits(dtype)
    if bits is None:
        return None
    try:
        elements = prod((size(d) for d in getattr(aval, "shape", ())), start=1)
        return elements * (bits // 8) if bits % 8 == 0 else -(-elements * bits // 8)
    except Exception:  # a symbolic dim (of no polynomial) where a size is needed
        return None


def _is_literal(var: Any) -> bool:
    return type(var).__name__ == "Literal"


def value(var: Any) -> Value:
    """A jaxpr variable as a `Value`, its size read as a plain count's."""
    return Value(var, aval_bytes(var.aval))


def _key(var: Any) -> Key | None:
    return None if _is_literal(var) else var


def _jaxpr_of(body: Any) -> Any:
    return getattr(body, "jaxpr", body)


def _has_body(params: Any) -> bool:
    for item in params.values():
        for candidate in item if isinstance(item, (tuple, list)) else (item,):
            if type(candidate).__name__ in ("Jaxpr", "ClosedJaxpr"):
                return True
    return False


def _keeps_dtype(eqn: Any) -> bool:
    return bool(eqn.invars) and getattr(eqn.invars[0].aval, "dtype", None) == getattr(eqn.outvars[0].aval, "dtype", 0)


def _call_body(eqn: Any, name: str) -> Any:
    """The body jaxpr of a call equation (`jit`, `closed_call`, a custom derivative's primal), None for any other."""
    if name not in INLINE_PRIMITIVES:
        return None
    for param in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        found = eqn.params.get(param)
        if found is not None and hasattr(_jaxpr_of(found), "eqns"):
            return _jaxpr_of(found)
    return None


class _Composite:
    """The equations of one composite's call (`composites.py`: its markers and the primitives it is made of, under
    `ABSORBED_SCOPE`), gathered into one op: what it reads from outside, what it makes."""

    def __init__(self, layer: str, backward: bool) -> None:
        self.layer, self.backward = layer, backward
        self.op = ""  # the priced marker's op (`jax.nn.gelu`, `flax.nnx.LayerNorm_backward`)
        self.named = ""  # the op any of its markers names, for one whose priced marker is elsewhere
        self.reads: dict[Any, Value] = {}
        self.written: dict[Any, Value] = {}
        self.read_inside: set[Any] = set()
        #: the operand of a gather inside -> the bytes gathered from it (where it is read in no other way)
        self.gathered: dict[Any, Any] = {}
        self.whole: set[Any] = set()


class JaxMemory:
    """The memory side of one jaxpr walk: the bytes rule the walk adds to its tally, and the recording of every
    program and equation it meets for the peak (`recorder`). `size` reads a dimension (the walk's: `int`, or a
    symbolic count's reader).

    A named composite (`composites.py`) is one op here as in the tally: a jitted one is its `jit` equation, a
    hooked one the run of its markers and absorbed primitives (`absorbed`), gathered into one op that reads what
    its equations read from outside (a gather's operand: the rows it gathers) and writes what they make for later
    (its results; a residual only where a later equation reads it). Its bytes join the tally under the priced
    marker's op when its program ends; its inner values hold no memory, as a PyTorch kernel's do not."""

    def __init__(self, size: Callable[[Any], Any] = int) -> None:
        self.recorder = Recorder()
        self.size = size
        #: why `bytes` cannot be measured (the first equation with a size the jaxpr does not fix), None while it can
        self.unsized: str | None = None
        #: the ops the tally holds for their bytes alone (free primitives), dropped if `bytes` is not measured
        self.free_ops: set[str] = set()
        #: an inlined call's inputs -> the caller's operand they are (`where(c, y, y)` passes y twice to one call,
        #: whose body reads it once, as `torch.where(c, y, y)` does)
        self._same: dict[Any, Any] = {}
        #: the equations open around the walk, each an inlined call or None
        self._calls: list[Any] = []
        #: every variable met, as a `Value` (each is read by one equation or more and written by one)
        self._values: dict[Any, Value] = {}
        #: per program entered (innermost last): its tally and the composite gathered now, if any
        self._frames: list[tuple[Tally, list[_Composite]]] = []

    def value(self, var: Any) -> Value:
        found = self._values.get(var)
        if found is None:
            found = self._values[var] = Value(var, aval_bytes(var.aval, self.size))
        return found

    def is_view(self, eqn: Any, name: str) -> bool:
        return name in VIEW_PRIMITIVES or (name == "convert_element_type" and _keeps_dtype(eqn))

    # --- bytes -------------------------------------------------------------------------------------------------

    def moved(self, eqn: Any, name: str, *, free: bool, layer: str) -> Any:
        """The bytes one equation moves (the module's docstring): 0 for a view or a composite's marker (the
        composite is charged whole), and 0 with `unsized` set when a size is not known."""
        if eqn.primitive.name == COMPOSITE_PRIMITIVE or (
            free and (self.is_view(eqn, name) or name in NO_TRAFFIC_PRIMITIVES)
        ):
            return 0
        same = self._same
        reads = [] if name in WRITE_ONLY_PRIMITIVES else [self.value(v) for v in eqn.invars if not _is_literal(v)]
        reads = [Value(same.get(read.key, read.key), read.nbytes) for read in reads] if same else reads
        writes = [self.value(v) for v in eqn.outvars]
        if name in GATHER_PRIMITIVES and reads:
            gathered = traffic((), writes)
            indices = traffic(reads[1:], ())
            moved = None if gathered is None or indices is None else indices + 2 * gathered
        else:
            moved = traffic(reads, writes)
        if moved is None:
            self._cannot_size(name, layer)
            return 0
        if free and moved:
            self.free_ops.add(name)
        return moved

    def _cannot_size(self, name: str, layer: str) -> None:
        where = f"layer '{layer}'" if layer else "the model"
        self.unsized = self.unsized or f"a size of {name} in {where} is not fixed in the jaxpr"

    # --- the peak ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def program(self, jaxpr: Any, tally: Tally) -> Iterator[None]:
        """A jaxpr the walk enters, counted into `tally`: its inputs and results; its constants (baked-in arrays)
        are alive throughout."""
        inner = _jaxpr_of(jaxpr)
        for var in inner.constvars:
            self.recorder.resident(self.value(var))
        call = self._calls[-1] if self._calls else None
        if call is not None:
            for var, operand in zip(inner.invars, call.invars):
                if not _is_literal(operand):
                    self._same[var] = self._same.get(operand, operand)
        self._frames.append((tally, []))
        try:
            with self.recorder.program([self.value(v) for v in inner.invars], [_key(v) for v in inner.outvars]):
                yield
                self._end_composite()
        finally:
            self._frames.pop()

    @contextlib.contextmanager
    def equation(self, eqn: Any, name: str, layer: str, backward: bool, *, composite: bool = False) -> Iterator[None]:
        """One equation, around the walk's handling of it (whose bodies become its own); `composite`: a composite's
        call priced whole (its marker, or a jitted composite's `jit`)."""
        if name == COMPOSITE_PRIMITIVE:
            self._marker(eqn, layer, backward)
            yield
            return
        self._end_composite()
        inline = name in INLINE_PRIMITIVES and not composite
        self._calls.append(eqn if inline else None)
        try:
            with self.recorder.equation(
                name,
                layer,
                [_key(v) for v in eqn.invars],
                [self.value(v) for v in eqn.outvars],
                views=[0] * len(eqn.outvars) if self.is_view(eqn, name) else None,
                backward=backward,
                inline=inline,
                has_body=not composite and name not in OPAQUE_BODY_OK and _has_body(eqn.params),
            ):
                yield
        finally:
            self._calls.pop()

    def view_of(self, operand: int | None) -> None:
        """The equation open now is a view of its operand at `operand` (None: of nothing held in memory): a
        symbolic trace's identity steps, which a point trace does not have (`symbolic.py`)."""
        self.recorder.view_of(operand)

    # --- composites --------------------------------------------------------------------------------------------

    def absorbed(self, eqn: Any, layer: str, backward: bool) -> None:
        """One primitive of a composite (the walk prices the composite, not it): gathered into the composite."""
        self._gather(eqn, eqn.primitive.name, layer, backward)

    def _marker(self, eqn: Any, layer: str, backward: bool) -> None:
        """A composite's marker opens its equations or closes them: the arguments' (`side=input`) forward, the
        results' (`side=output`) in the backward open; the other closes (a backward whose arguments get no
        gradient has none: the next equation outside closes it)."""
        params = eqn.params
        derivative = bool(params.get("derivative"))
        opens = (params.get("side") == INPUT) != derivative
        frame = self._frames[-1][1] if self._frames else None
        if opens:
            self._end_composite()
        current = self._gather(eqn, COMPOSITE_PRIMITIVE, layer, backward)
        if current is not None:
            current.named = params["composite"] + (BACKWARD if derivative else "")
        if params.get("side") == OUTPUT and current is not None:
            current.op = params["composite"] + (BACKWARD if derivative else "")
            current.layer, current.backward = layer, backward
        if not opens and frame:
            self._end_composite()

    def _gather(self, eqn: Any, name: str, layer: str, backward: bool) -> _Composite | None:
        if not self._frames:
            return None
        frame = self._frames[-1][1]
        if not frame:
            frame.append(_Composite(layer, backward))
        current = frame[0]
        self._gather_into(current, eqn, name, {})
        return current

    def _gather_into(self, current: _Composite, eqn: Any, name: str, renamed: dict[Any, Any]) -> None:
        """Add one equation's reads and writes to `current`; a call's body is gathered equation by equation (its
        inputs renamed to the caller's operands), so that a gather inside it reads only its rows."""
        body = _call_body(eqn, name)
        if body is not None:
            inner: dict[Any, Any] = {}
            for var, operand in zip(body.invars, eqn.invars):
                if not _is_literal(operand):
                    inner[var] = renamed.get(operand, operand)
            for sub in body.eqns:
                self._gather_into(current, sub, sub.primitive.name, inner)
            for result, var in zip(eqn.outvars, body.outvars):
                source = None if _is_literal(var) else inner.get(var, var)
                if source is not None and source in current.written:
                    current.read_inside.add(source)
                current.written[result] = self.value(result)
            return
        for position, var in enumerate(eqn.invars):
            if _is_literal(var):
                continue
            var = renamed.get(var, var)
            read = self.value(var)
            if read.key in current.written:
                current.read_inside.add(read.key)
                continue
            current.reads.setdefault(read.key, read)
            if name in GATHER_PRIMITIVES and position == 0:
                gathered = traffic((), [self.value(v) for v in eqn.outvars])
                if gathered is None:
                    current.whole.add(read.key)
                else:
                    current.gathered[read.key] = current.gathered.get(read.key, 0) + gathered
            else:
                current.whole.add(read.key)
        for var in eqn.outvars:
            current.written[var] = self.value(var)

    def _end_composite(self) -> None:
        """The composite gathered now, if any, as one op: recorded for the peak, its bytes to the tally once its
        program shows which of its inner values a later equation reads."""
        if not self._frames or not self._frames[-1][1]:
            return
        tally, frame = self._frames[-1]
        current = frame.pop()
        outputs = [v for key, v in current.written.items() if key not in current.read_inside]
        inner = [v for key, v in current.written.items() if key in current.read_inside]
        read: Any = 0
        for key, found in current.reads.items():
            if found.nbytes is None:
                read = None
                break
            gathered = current.gathered.get(key)
            read += found.nbytes if key in current.whole or gathered is None else gathered
        # a composite's equations run together; a run without its priced marker (never seen so far) is charged
        # on its own under the composite's name, never dropped
        op = current.op or current.named or "composite"
        entry = JAX_OPS.lookup(op) if current.op else FREE

        def done(kept: list[Value]) -> None:
            written = traffic((), [*outputs, *kept])
            if read is None or written is None:
                self._cannot_size(op, current.layer)
                return
            if entry is None or not read + written:  # a composite skipped (no formula) adds no bytes, as any op
                return
            calls = 1 if entry is FREE else 0  # a priced marker is in the tally already: its bytes join it
            if entry is FREE:
                self.free_ops.add(op)
            tally.add_values(current.layer, op, {BYTES: read + written}, calls, backward=current.backward)

        self.recorder.op(
            op,
            current.layer,
            list(current.reads),
            outputs,
            optional=inner,
            backward=current.backward,
            done=done,
        )
