"""Ops whose output size depends on tensor values, under fake tensors that have no values.

Two rules make such models countable in fake mode, each exact where its premise holds and reported where it is used
(`Report.estimated`), so no figure rests on a rule silently:

* Routing. An index op on a fake float (`topk`, `argmax`/`argmin`, `max`/`min` with a dim, `sort`) gets invented,
  deterministic indices: top-k picks round-robin (row t takes `(t*k + j) % n`), so every choice is distinct and the
  load is balanced; argmax/argmin pick `t % n`; sort keeps the order. Ops whose tensor arguments all carry such
  known values run for real on small CPU tensors, so Python control flow on them works (`for e in expert_hit`,
  `if idx == n`) and a mixture-of-experts loop sends exactly tokens x top-k rows through the experts in total:
  the routed count, exact for top-k routing without token dropping, whichever experts are picked.
  Known values are carried up to `VALUE_LIMIT` elements (a one-hot routing mask over many experts, a pixel mask
  of ones); beyond it a tensor is `Untracked`, and an op that needs its values fails naming it (`_needed`),
  never reading zeros or a `FakeTensor(...)` string in their place.
* Upper bound. Any other data-dependent size (`nonzero`, boolean masks, `unique`, `torchvision::nms`) is counted
  at its upper bound: every element (or box) kept. Caps later in the model (`keep[:100]`, `topk(k)`) then apply as
  usual, because the sizes downstream are concrete again.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from pytest_flopbudget._errors import CountingError

ROUTING_RULE = "routing indices invented (balanced round-robin); exact for top-k routing without token dropping"
BOUND_RULE = "data-dependent size counted at its upper bound (every element kept)"

#: Upper bounds that the op's fake kernel does not state, by op: the size of the first dim of the named argument.
KNOWN_BOUNDS: dict[str, tuple[int, int]] = {
    "torchvision.nms": (0, 0),  # nms keeps at most every box
    "torchvision.batched_nms": (0, 0),
}

#: Known values are kept for tensors up to this many elements (routing masks, index vectors, pixel masks), so that
#: running them for real stays a small fraction of a count. A value over it is not lost silently: the tensor is
#: marked `Untracked`, ops on it alone stay untracked, and an op that needs its values (a size, `.item()`, an
#: f-string) fails with one line naming it.
VALUE_LIMIT = 1 << 24
#: Sources (`zeros`, `ones`, `full`...) up to this many elements are computed when made; larger ones are kept as a
#: recipe and computed only when an op needs them (most, such as a KV cache's zeros, are overwritten unread).
EAGER_SOURCE_LIMIT = 1 << 16
_VALUE_SOURCES = frozenset(
    {
        "aten.zeros",
        "aten.ones",
        "aten.full",
        "aten.arange",
        "aten.scalar_tensor",
        "aten.zeros_like",
        "aten.ones_like",
        "aten.full_like",
        "aten.eye",
    }
)
_INDEX_SOURCES = frozenset({"aten.arange"})
_ROUTING_OPS = frozenset({"aten.topk", "aten.argmax", "aten.argmin", "aten.max", "aten.min", "aten.sort"})
_DYNAMIC_TAGS = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output)
_SCALAR_OP = torch.ops.aten._local_scalar_dense.default


MakeFake = Callable[[tuple[int, ...], tuple[int, ...], torch.dtype, torch.device], Any]


@dataclass(frozen=True)
class Untracked:
    """A tensor whose values follow from known ones but are not kept (over `VALUE_LIMIT`): where it came from."""

    op: str
    layer: str
    numel: int
    dtype: torch.dtype

    def describe(self) -> str:
        where = f" in layer '{self.layer}'" if self.layer else ""
        dtype = str(self.dtype).replace("torch.", "")
        return f"a {self.numel}-element {dtype} tensor made by {self.op}{where}"


@dataclass(frozen=True)
class _Like:
    """A tensor argument of a source op (`zeros_like(x)`), by metadata: the source reads nothing else of it."""

    shape: tuple[int, ...]
    dtype: torch.dtype


class _Recipe:
    """A large source's value, computed on first use: `func` on real stand-ins of its arguments."""

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        def describe(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return _Like(tuple(int(s) for s in value.shape), value.dtype)
            return torch.device("cpu") if isinstance(value, torch.device) else value

        self._func = func
        self._args, self._kwargs = tree_map(describe, (args, kwargs))

    def make(self) -> torch.Tensor:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        def real(value: Any) -> Any:
            return torch.zeros(value.shape, dtype=value.dtype) if isinstance(value, _Like) else value

        with unset_fake_temporarily():
            real_args, real_kwargs = tree_map(real, (self._args, self._kwargs))
            value: torch.Tensor = self._func(*real_args, **real_kwargs)
            return value


class _View:
    """A view (`detach`, `view`, `permute`...) of a tensor whose value is a recipe: a view of the base's value once
    that is computed, so it aliases it as a real view would."""

    def __init__(self, make: Callable[[], torch.Tensor]) -> None:
        self.make = make


_Entry = Any  # torch.Tensor (the value), _Recipe or _View (computed on first use) or Untracked (not kept)


class KnownValues:
    """Real values carried beside fake index tensors, keyed by the fake tensor's identity.

    Each entry holds its fake by a weak reference: a known tensor dies when the model lets go of it, as in the real
    run. Holding it (T5's relative positions, a (seq x seq) integer tensor per attention) kept every one alive to the
    count's end, and the peak of live bytes (peak_memory.py) grew with seq squared over the real run's. A dead
    entry is dropped at the next `_put` once enough have died; the weak references' callback is a builtin
    (`list.append`), which runs no bytecode a signal's exception could be lost in (counting/signals.py)."""

    def __init__(self, make_fake: MakeFake) -> None:
        self._make_fake = make_fake
        #: id of a fake -> (weak reference to it, its value)
        self._values: dict[int, tuple[weakref.ref[Any], _Entry]] = {}
        #: weak references whose fake died (appended by their builtin callback), dropped from `_values` in bulk
        self._dead: list[weakref.ref[Any]] = []
        #: the module running now, for messages (the counting mode sets it)
        self.where: Callable[[], str] = lambda: ""
        #: what the model read of tensors whose values fake mode does not know: f-strings of 0-d tensors
        #: (`self[f"expert_{idx}"]`), which come out as `FakeTensor(...)`; an error after one is fake mode's
        self.unknown_reads: list[str] = []
        #: invented index tensors not read yet -> (op, layer); read ones move to `used`, so that the report lists
        #: the routing ops whose invented indices decided something, not every `max(dim)` whose indices nobody read
        self._invented: dict[int, tuple[weakref.ref[Any], str, str]] = {}
        self.used: list[tuple[str, str]] = []

    def __bool__(self) -> bool:
        return bool(self._values)

    def value(self, tensor: Any) -> torch.Tensor | None:
        """The value (a recipe's computed now), or None for unknown and untracked tensors."""
        entry = self._entry(tensor)
        if isinstance(entry, (_Recipe, _View)):
            entry = entry.make()
            self._remember(tensor, entry)
        return entry if isinstance(entry, torch.Tensor) else None

    def _entry(self, tensor: Any) -> _Entry | None:
        entry = self._values.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        # a constant fake mode lifted from Python (`keep[:5] = True`) carries its value
        constant = getattr(tensor, "constant", None)
        return constant if isinstance(constant, torch.Tensor) else None

    @contextlib.contextmanager
    def formatting(self) -> Iterator[None]:
        """`f"expert_{idx}"` on a 0-d index with a known value formats the number, as on a real tensor.

        `Tensor.__format__` formats the value only when `type(self) is Tensor`, so a fake index would format as
        `FakeTensor(...)` (Switch Transformers and NLLB-MoE look their experts up by that name). The class
        attribute is set for the count only and removed after it.
        """
        from torch._subclasses.fake_tensor import FakeTensor

        def format_known(tensor: Any, spec: str) -> str:
            from torch.utils._python_dispatch import _disable_current_modes

            entry = self._entry(tensor)
            if isinstance(entry, Untracked):
                raise self._needed(entry, "to format it (an f-string)")
            with _disable_current_modes():  # a recipe computed here runs for real, neither counted nor fake
                known = self.value(tensor)
            self._note_read(tensor)
            if known is None and tensor.dim() == 0:
                where = self.where()
                self.unknown_reads.append(f"an f-string of a 0-d tensor{f' in layer {where!r}' if where else ''}")
            if known is not None and known.dim() == 0:
                with _disable_current_modes():  # read the real value, not through fake mode
                    return str(format(known.item(), spec))
            return str(torch.Tensor.__format__(tensor, spec))

        previous = FakeTensor.__dict__.get("__format__")
        FakeTensor.__format__ = format_known  # type: ignore[method-assign]
        try:
            yield
        finally:
            if previous is not None:
                FakeTensor.__format__ = previous  # type: ignore[method-assign]
            else:
                del FakeTensor.__format__

    @contextlib.contextmanager
    def readable(self) -> Iterator[None]:
        """transformers reads no value of a fake tensor, which it takes for a traced one (`is_tracing`): where it
        would read a value to skip work (SDPA's causal mask, built only where the padding cannot be read), it does
        the work. For a fake tensor whose value the count knows (token ids, the positions made from them), the
        value is readable as in the real run, so for the count transformers' `is_fake_tensor` says no for it, and
        the real run's path is counted; a tensor of unknown value stays traced. Only where transformers is already
        imported (a transformers model), for the count only."""
        import sys

        utilities = sys.modules.get("transformers.utils.import_utils")
        original = getattr(utilities, "is_fake_tensor", None)
        if utilities is None or not callable(original):
            yield
            return

        def is_fake_tensor(value: Any) -> bool:
            if not original(value):
                return False
            entry = self._entry(value)
            return entry is None or isinstance(entry, Untracked)

        setattr(utilities, "is_fake_tensor", is_fake_tensor)  # noqa: B010
        try:
            yield
        finally:
            setattr(utilities, "is_fake_tensor", original)  # noqa: B010

    def _remember(self, fake: Any, value: torch.Tensor) -> None:
        self._put(fake, value)

    def _put(self, fake: Any, entry: _Entry) -> None:
        """Keep `entry` for `fake` while `fake` is alive (see the class's docstring)."""
        if len(self._dead) > 64 and 2 * len(self._dead) > len(self._values):  # amortised: O(1) per entry
            self._dead.clear()
            self._values = {key: item for key, item in self._values.items() if item[0]() is not None}
        self._values[id(fake)] = (weakref.ref(fake, self._dead.append), entry)

    def involved(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether a known tensor is among the arguments (one level into lists: `cat`, `index`). Runs for every op
        once any value is known, so it avoids pytree."""
        values = self._values
        for group in (args, kwargs.values()):
            for arg in group:
                if type(arg) in (list, tuple):
                    for item in arg:
                        entry = values.get(id(item))
                        if entry is not None and entry[0]() is item:
                            return True
                else:
                    entry = values.get(id(arg))
                    if entry is not None and entry[0]() is arg:
                        return True
        return False

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """Run an op that reads known values: (True, result) when it ran here, (False, None) when the caller
        should run it on fake tensors as usual."""
        if func.namespace == "prim":  # metadata (prim.device): the fake tensor answers
            return False, None
        tensors = _tensors((args, kwargs))
        entries = [self._entry(t) for t in tensors]
        unknown = [t for t, entry in zip(tensors, entries) if entry is None and _is_fake(t)]
        untracked = next((entry for entry in entries if isinstance(entry, Untracked)), None)
        dynamic = any(tag in func.tags for tag in _DYNAMIC_TAGS)
        if unknown:
            self._forget_written(func, args, kwargs)
            if not dynamic or any(not (t.is_floating_point() or t.is_complex()) for t in unknown):
                # An unknown mask or index decides the size: the upper-bound rule applies, in the caller.
                return False, None
            # Known indices into unknown data (`hidden[token_idx]`): the fake kernel usually knows the size; a
            # boolean mask (`x[:, keep]`) it cannot know, and the real run below gives it.
            try:
                out = func(*args, **kwargs)
            except Exception:
                out = None
            if out is not None and not any(
                isinstance(v, torch.Tensor) and _symbolic(v.shape) for v in tree_flatten(out)[0]
            ):
                return True, out
            self._require(func, untracked)
            return True, self._fakes_from(self._real_run(func, args, kwargs), tensors)
        if func is _SCALAR_OP or dynamic:
            self._require(func, untracked)
            real_out = self._real_run(func, args, kwargs)
            if func is _SCALAR_OP:
                return True, real_out
            # A data-dependent size is known only from the real result.
            out = self._fakes_from(real_out, tensors)
            self._remember_all(out, real_out, func)
            return True, out
        # Other ops keep fake aliasing semantics; their sizes are known before anything runs for real.
        out = func(*args, **kwargs)
        untracked = untracked or self._too_large(func, out)
        if untracked is not None:
            self._untrack(func, args, out, untracked)
            return True, out
        first = entries[0] if entries else None
        if isinstance(out, torch.Tensor) and isinstance(first, (_Recipe, _View)) and _is_view(func):
            # a view of a recipe stays one: computed only if read
            self._put(out, _View(lambda: self._real_run(func, args, kwargs)))
            return True, out
        self._remember_all(out, self._real_run(func, args, kwargs), func)
        return True, out

    def source(self, key: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """Small tensors made from nothing but arguments (`zeros`, `arange`, `full`, `zeros_like`) have known
        values: one-hot masks, padding masks and index arithmetic built on them stay known."""
        if key not in _VALUE_SOURCES or not isinstance(out, torch.Tensor):
            return
        if out.is_floating_point() and key in _INDEX_SOURCES:
            return  # float positions (rotary tables) decide no size; computing them for real would cost time
        numel = out.numel()
        if numel <= EAGER_SOURCE_LIMIT:
            self._remember_all(out, self._real_run(func, args, kwargs), func)
        elif numel <= VALUE_LIMIT:
            self._put(out, _Recipe(func, args, kwargs))  # a pixel mask of ones, a KV cache of zeros
        else:
            self._put(out, Untracked(key, self.where(), numel, out.dtype))

    def _real_run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # the stand-ins `_real` makes (zeros) must be real tensors too
            real_args, real_kwargs = tree_map(self._real, (args, kwargs))
            return func(*real_args, **real_kwargs)

    def _fakes_from(self, real_out: Any, tensors: list[Any]) -> Any:
        device = next((t.device for t in tensors if _is_fake(t)), torch.device("cpu"))
        return tree_map(lambda v: self._fake_like(v, device), real_out)

    def _remember_all(self, out: Any, real_out: Any, func: Any) -> None:
        fakes, _ = tree_flatten(out)
        reals, _ = tree_flatten(real_out)
        for fake, real in zip(fakes, reals):
            if isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor):
                if real.numel() <= VALUE_LIMIT:
                    self._remember(fake, real)
                else:
                    self._put(fake, self._untracked(func, real))

    def _untracked(self, func: Any, tensor: Any) -> Untracked:
        return Untracked(str(func.overloadpacket), self.where(), tensor.numel(), tensor.dtype)

    def _too_large(self, func: Any, out: Any) -> Untracked | None:
        """The first output over `VALUE_LIMIT`, as untracked (sizes are concrete: no operand is unknown)."""
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor) and value.numel() > VALUE_LIMIT:
                return self._untracked(func, value)
        return None

    def _untrack(self, func: Any, args: tuple[Any, ...], out: Any, untracked: Untracked) -> None:
        """Outputs, and arguments the op writes, follow from known values that are not kept."""
        written = _written(func, args)
        for value in (*tree_flatten(out)[0], *written):
            if isinstance(value, torch.Tensor):
                self._put(value, untracked)
        for value in written:
            for key in self._aliases(value):
                self._values[key] = (self._values[key][0], untracked)

    def _require(self, func: Any, untracked: Untracked | None) -> None:
        """An op is about to read values (a data-dependent size, `.item()`): an untracked operand cannot give them."""
        if untracked is not None:
            if func is _SCALAR_OP:
                raise self._needed(untracked, "for .item() (a Python number)")
            raise self._needed(untracked, f"to run {func.overloadpacket}, whose output size depends on them")

    def _needed(self, untracked: Untracked, purpose: str) -> CountingError:
        where = self.where()
        at = f"layer '{where}'" if where else "the model"
        return CountingError(
            f"fake mode cannot run this model: {at} needs the values of {untracked.describe()} {purpose}, and "
            f"fake mode keeps values of at most {VALUE_LIMIT} elements; count it with execution='real' "
            f"(runs the real forward)"
        )

    def invent(self, key: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, path: str) -> bool:
        """Give a routing op's index output invented values; True when it did."""
        if key not in _ROUTING_OPS or not isinstance(out, (torch.Tensor, tuple)):
            return False
        source = args[0] if args else None
        if not isinstance(source, torch.Tensor) or source.is_complex() or not source.is_floating_point():
            return False
        indices = out[1] if isinstance(out, tuple) else out
        if not isinstance(indices, torch.Tensor) or indices.dtype != torch.int64:
            return False
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            self._remember(indices, _invented(key, func, args, kwargs, source, indices))
        self._invented[id(indices)] = (weakref.ref(indices), key, path)
        return True

    def _note_read(self, tensor: Any) -> None:
        origin = self._invented.pop(id(tensor), None)
        if origin is not None and origin[0]() is tensor:  # not a dead tensor's whose id is `tensor`'s now
            self.used.append(origin[1:])

    def _real(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            known = self._entry(value)
            if isinstance(known, (_Recipe, _View)):
                known = self.value(value)
            if isinstance(known, Untracked):  # callers check first (`_require`), to name the op
                raise self._needed(known, "to run an op on them for real")
            if known is not None:
                self._note_read(value)
                return known
            if _is_fake(value):
                # An unknown fake beside known ones in a dynamic op: its values do not decide the output size.
                return torch.zeros(tuple(int(s) for s in value.shape), dtype=value.dtype)
            return value.to("cpu") if value.device.type != "meta" else torch.zeros(value.shape, dtype=value.dtype)
        if isinstance(value, torch.device):
            return torch.device("cpu")
        return value

    def _fake_like(self, value: Any, device: torch.device) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        return self._make_fake(tuple(value.shape), value.stride(), value.dtype, device)

    def _forget_written(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An op that writes unknown data into a tensor with known values makes those values stale, and those of
        every view of the same storage (`keep[:5] = mask` writes `keep`)."""
        for value in _written(func, args):
            # views of a known tensor are made by running the view op here, so they are tracked too
            if self._values.pop(id(value), None) is not None:
                for key in self._aliases(value):
                    del self._values[key]

    def _aliases(self, tensor: Any) -> list[int]:
        """Keys of the other tracked tensors on `tensor`'s storage."""
        try:
            storage = tensor.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError):
            return []
        aliases = []
        for key, (reference, _) in self._values.items():
            fake = reference()
            if fake is not tensor and isinstance(fake, torch.Tensor):
                try:
                    if fake.untyped_storage()._cdata == storage:
                        aliases.append(key)
                except (RuntimeError, NotImplementedError):
                    continue
        return aliases


def _invented(key: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], source: Any, indices: Any) -> Any:
    """Index values for a routing op's output: round-robin picks (top-k, argmax), the identity order (sort)."""
    shape = tuple(int(s) for s in indices.shape)
    dim = _argument(func, args, kwargs, "dim")
    if dim is None or source.dim() == 0:
        return torch.zeros(shape, dtype=torch.int64)  # argmax/argmin over everything: the first element
    dim %= source.dim()
    size = max(int(source.shape[dim]), 1)
    if key not in ("aten.topk", "aten.sort"):
        # argmax/argmin/max/min along dim (kept or not): output position t picks t % size
        return (torch.arange(max(indices.numel(), 1)) % size)[: indices.numel()].reshape(shape)
    picks = shape[dim]
    others = [s for i, s in enumerate(shape) if i != dim]
    rows = 1
    for s in others:
        rows *= s
    if key == "aten.sort":
        flat = torch.arange(picks).expand(rows, picks)
    else:  # topk: row t takes (t*k + j) % size, k distinct choices per row, every choice used equally often
        flat = (torch.arange(rows).unsqueeze(1) * picks + torch.arange(picks)) % size
    return flat.reshape(*others, picks).movedim(-1, dim).contiguous()


class UpperBounds:
    """Replaces outputs whose sizes are unbacked symbols by fakes at the symbols' upper bounds."""

    def __init__(self, make_fake: MakeFake, shape_env: Callable[[], Any]) -> None:
        self._make_fake = make_fake
        self._shape_env = shape_env  # called only for symbolic sizes, which exist only once fake mode has one

    def concretize(self, key: str, args: tuple[Any, ...], out: Any) -> tuple[Any, bool]:
        """(output, whether a bound was used)."""
        leaves, spec = tree_flatten(out)
        if not any(isinstance(v, torch.Tensor) and _symbolic(v.shape) for v in leaves):
            return out, False
        bounded = [self._bounded(key, args, v) if isinstance(v, torch.Tensor) else v for v in leaves]
        return tree_unflatten(bounded, spec), True

    def _bounded(self, key: str, args: tuple[Any, ...], value: torch.Tensor) -> Any:
        if not _symbolic(value.shape):
            return value
        shape = tuple(self._upper(key, args, size) for size in value.shape)
        return self._make_fake(shape, _contiguous_strides(shape), value.dtype, value.device)

    def _upper(self, key: str, args: tuple[Any, ...], size: Any) -> int:
        if isinstance(size, int):
            return size
        expr = size.node.expr
        try:
            upper = self._shape_env().bound_sympy(expr).upper
            if upper.is_finite:
                return int(upper)
        except Exception:  # fall through to the op's known bound
            pass
        known = KNOWN_BOUNDS.get(key)
        if known is not None:
            arg_index, dim = known
            source = args[arg_index] if len(args) > arg_index else None
            if isinstance(source, torch.Tensor):
                return int(source.shape[dim])
        raise CountingError(
            f"fake mode cannot run this model: {key} returns a data-dependent size with no known upper bound; "
            f"count it with execution='real' (runs the real forward)"
        )


def _written(func: Any, args: tuple[Any, ...]) -> list[Any]:
    """The tensor arguments an op writes in place."""
    return [
        value
        for arg, value in zip(func._schema.arguments, args)
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.Tensor)
    ]


def _is_view(func: Any) -> bool:
    """One tensor returned, aliasing the first argument, nothing written."""
    schema = func._schema
    returns, arguments = schema.returns, schema.arguments
    if len(returns) != 1 or returns[0].alias_info is None or returns[0].alias_info.is_write or not arguments:
        return False
    return all(arg.alias_info is None or not arg.alias_info.is_write for arg in arguments)


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """One argument by schema name, its default when not passed."""
    for index, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            if index < len(args):
                return args[index]
            if name in kwargs:
                return kwargs[name]
            return arg.default_value if arg.has_default_value() else None
    return None


def _symbolic(shape: Sequence[Any]) -> bool:
    return any(not isinstance(s, int) for s in shape)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _tensors(tree: Any) -> list[Any]:
    return [v for v in tree_flatten(tree)[0] if isinstance(v, torch.Tensor)]


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor)
