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
from collections.abc import Iterator
from math import prod
from typing import Any

import numpy as np

from pytest_flopbudget._counting.graph_memory import Key, Recorder, Value, traffic

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


def aval_bytes(aval: Any) -> int | None:
    """Bytes of an abstract value (a variable's `aval`, a `ShapeDtypeStruct`): its elements at its dtype's size,
    sub-byte types rounded up to whole bytes; None when a dimension is not a number (a symbolic size) or the dtype
    has no fixed size."""
    dtype = getattr(aval, "dtype", None)
    if dtype is None:
        return 0  # a token or another value without data
    try:
        bits = _BITS[dtype]
    except KeyError:
        bits = _BITS[dtype] = element_bits(dtype)
    except TypeError:  # an unhashable dtype
        bits = element_bits(dtype)
    try:
        elements = prod(int(d) for d in getattr(aval, "shape", ()))
    except Exception:
        return None
    return None if bits is None else -(-elements * bits // 8)


def _is_literal(var: Any) -> bool:
    return type(var).__name__ == "Literal"


def value(var: Any, known: dict[Any, Value] | None = None) -> Value:
    """A jaxpr variable as a `Value` (`known`: those already made, by variable)."""
    if known is None:
        return Value(var, aval_bytes(var.aval))
    found = known.get(var)
    if found is None:
        found = known[var] = Value(var, aval_bytes(var.aval))
    return found


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


class JaxMemory:
    """The memory side of one jaxpr walk: the bytes rule the walk adds to its tally, and the recording of every
    program and equation it meets for the peak (`recorder`)."""

    def __init__(self) -> None:
        self.recorder = Recorder()
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

    def is_view(self, eqn: Any, name: str) -> bool:
        return name in VIEW_PRIMITIVES or (name == "convert_element_type" and _keeps_dtype(eqn))

    # --- bytes -------------------------------------------------------------------------------------------------

    def moved(self, eqn: Any, name: str, *, free: bool, layer: str) -> int:
        """The bytes one equation moves (the module's docstring): 0 for a view, and 0 with `unsized` set when a
        size is not known."""
        if free and (self.is_view(eqn, name) or name in NO_TRAFFIC_PRIMITIVES):
            return 0
        same = self._same
        reads = [] if name in WRITE_ONLY_PRIMITIVES else [value(v, self._values) for v in eqn.invars if not _is_literal(v)]
        reads = [Value(same.get(read.key, read.key), read.nbytes) for read in reads] if same else reads
        writes = [value(v, self._values) for v in eqn.outvars]
        if name in GATHER_PRIMITIVES and reads:
            gathered = traffic((), writes)
            indices = traffic(reads[1:], ())
            moved = None if gathered is None or indices is None else indices + 2 * gathered
        else:
            moved = traffic(reads, writes)
        if moved is None:
            where = f"layer '{layer}'" if layer else "the model"
            self.unsized = self.unsized or f"a size of {name} in {where} is not fixed in the jaxpr"
            return 0
        if free and moved:
            self.free_ops.add(name)
        return moved

    # --- the peak ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def program(self, jaxpr: Any) -> Iterator[None]:
        """A jaxpr the walk enters: its inputs and results; its constants (baked-in arrays) are alive throughout."""
        inner = _jaxpr_of(jaxpr)
        for var in inner.constvars:
            self.recorder.resident(value(var))
        call = self._calls[-1] if self._calls else None
        if call is not None:
            for var, operand in zip(inner.invars, call.invars):
                if not _is_literal(operand):
                    self._same[var] = self._same.get(operand, operand)
        with self.recorder.program([value(v, self._values) for v in inner.invars], [_key(v) for v in inner.outvars]):
            yield

    @contextlib.contextmanager
    def equation(self, eqn: Any, name: str, layer: str, backward: bool) -> Iterator[None]:
        """One equation, around the walk's handling of it (whose bodies become its own)."""
        inline = name in INLINE_PRIMITIVES
        self._calls.append(eqn if inline else None)
        try:
            with self.recorder.equation(
                name,
                layer,
                [_key(v) for v in eqn.invars],
                [value(v, self._values) for v in eqn.outvars],
                views=[0] * len(eqn.outvars) if self.is_view(eqn, name) else None,
                backward=backward,
                inline=inline,
                has_body=name not in OPAQUE_BODY_OK and _has_body(eqn.params),
            ):
                yield
        finally:
            self._calls.pop()
