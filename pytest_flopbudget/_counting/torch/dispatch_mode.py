"""The dispatch mode a PyTorch count runs under: `CountingMode` sees every ATen op after autograd and composite
decomposition (the ops that would really run), runs it (on fake tensors, with the shape memo, the known values and
the upper bounds of data-dependent sizes), prices it with the formula registry (`ops.py`) and the bytes it moves
(`traffic.py`), and charges it to the running module. An op that fails is recorded with whether it fails only on
fake tensors (`fails_only_in_fake`: replayed on real zeros of the same shapes), for the failure's explanation.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from pytest_flopbudget._counting import signals
from pytest_flopbudget._counting.formulas import Cost, on_integers
from pytest_flopbudget._counting.registry import Free
from pytest_flopbudget._counting.tally import DATA_DEPENDENT_SHAPE, NO_FORMULA, Tally, formula_failed
from pytest_flopbudget._counting.torch.data_dependent import (
    _DYNAMIC_TAGS,
    _SCALAR_OP,
    BOUND_RULE,
    ROUTING_RULE,
    KnownValues,
    UpperBounds,
)
from pytest_flopbudget._counting.torch.fake_fallbacks import FAKE_FALLBACKS
from pytest_flopbudget._counting.torch.lazy_shape_env import LazyShapeEnv
from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._counting.torch.ops import TORCH_OPS, integer_output, op_key
from pytest_flopbudget._counting.torch.peak_memory import LiveBytes
from pytest_flopbudget._counting.torch.shape_memo import ShapeMemo
from pytest_flopbudget._counting.torch.traffic import Rule, Unsized, bytes_moved, free_op_traffic
from pytest_flopbudget._counting.torch.unknown_values import UnknownReads
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, Metric

_PRIM_DEVICE = torch.ops.prim.device.default


_SCHEMA_NAMES: dict[Any, list[tuple[str, bool, Any]]] = {}


def bind_arguments(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments by schema name with defaults filled in, so formulas need not know positional layouts."""
    spec = _SCHEMA_NAMES.get(func)
    if spec is None:
        spec = [
            (arg.name, arg.has_default_value(), arg.default_value if arg.has_default_value() else None)
            for arg in func._schema.arguments
        ]
        _SCHEMA_NAMES[func] = spec
    bound: dict[str, Any] = {}
    for index, (name, has_default, default) in enumerate(spec):
        if index < len(args):
            bound[name] = args[index]
        elif name in kwargs:
            bound[name] = kwargs[name]
        elif has_default:
            bound[name] = default
    return bound


#: Replaying a failed op on real zeros tells a fake-only failure from a real one; above this many elements the
#: exception type decides instead (a meta kernel's missing dtype raises NotImplementedError).
_REPLAY_LIMIT = 1 << 24


class CountingMode(TorchDispatchMode):
    """Looks up each dispatched op in the formula registry and charges it to the running module."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No `torch._dynamo.disable` wrapper around `__torch_dispatch__`: nothing compiles a count, and the
        wrapper costs a call per op (and, on its first call, the import of Dynamo; see defer_dynamo.py)."""
        return False

    def __init__(
        self,
        tracker: ModulePathTracker,
        memo: ShapeMemo | None = None,
        values: KnownValues | None = None,
        bounds: UpperBounds | None = None,
        shapes: LazyShapeEnv | None = None,
    ) -> None:
        super().__init__()
        self.tracker = tracker
        self.memo = memo
        self.values = values
        self.bounds = bounds
        self.shapes = shapes
        #: reads of values fake mode does not know, to name the one a failure needed (fake execution only)
        self.value_reads = UnknownReads() if values is not None else None
        self.tally = Tally()
        self.failed_op: str | None = None
        self.fake_only_failure = False
        #: every op failure seen here: (exception, op, whether it fails only on fake tensors), so that the error
        #: the count ends with is judged by the op that raised it, not by an earlier one the model caught
        self.op_failures: list[tuple[BaseException, str, bool]] = []
        #: values the model read that fake mode does not know (`.item()` of an unknown tensor): what it computes
        #: from them is made up, so an error after one is no proof that the model itself is wrong
        self.unknown_reads: list[str] = []
        self._costs: dict[Any, Cost | str | Free] = {}
        #: bytes moved per memo key, like `_costs` (the same shapes and dtypes move the same bytes)
        self._bytes: dict[Any, int] = {}
        #: what a priced op adds to the tally, per memo key and aliasing (`_charge`)
        self._charges: dict[Any, dict[Metric, int]] = {}
        #: ops whose bytes could not be sized (an unbacked size): the count's `bytes` is then not measured
        self.unsized_bytes: list[str] = []
        self._maybe_dynamic: dict[Any, bool] = {}
        #: follows live tensor bytes when the count measures peak memory (peak_memory.py)
        self.peak: LiveBytes | None = None
        if values is not None:
            values.where = lambda: tracker.current

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if func is _PRIM_DEVICE:
            # C++ reading a fake tensor's device (`matmul`, `to`): 76k of Mamba's 132k dispatches at sequence 128.
            # Free, never a known value, and the fake tensor answers it: nothing else here applies. Never where a
            # signal's exception is raised: some C++ callers (autograd's InputMetadata) abort on any exception.
            return args[0].device
        if signals.has_pending():  # a signal's handler raised during the count: the count ends here, at an op
            signals.raise_pending()
        kwargs = kwargs or {}
        memo_key = None
        out = None
        key = op_key(func)
        ran = False
        if self.values and self.values.involved(args, kwargs):
            ran, out = self._guarded(func, args, kwargs, self.values.run)
            self._note_routing_used()
            if ran and func is _SCALAR_OP:
                return out
            if not ran:
                out = None
        if func is _SCALAR_OP and not ran:
            where = self.tracker.current
            self.unknown_reads.append(f".item() of a tensor{f' in layer {where!r}' if where else ''}")
        if out is None and self.memo is not None:
            out = self.memo.shortcut(func, args, kwargs)
            if out is None:
                memo_key = self.memo.key(func, args, kwargs)
                out = self.memo.replay(memo_key, args) if memo_key is not None else None
            else:  # `relu_`, `add_`: nothing to replay, but their cost and bytes are memoised alike
                memo_key = self.memo.shortcut_key(func, args, kwargs)
        node = torch._C._current_autograd_node()
        path = self.tracker.path_for_node(node) if node is not None else self.tracker.current
        if out is None:
            out = self._guarded(func, args, kwargs)
            if func is _SCALAR_OP and self.value_reads is not None:
                self.value_reads.note(args[0], out, path)
            if memo_key is not None and self.memo is not None:
                self.memo.store(memo_key, out)
            if self.bounds is not None and self._is_maybe_dynamic(func):
                out, bounded = self.bounds.concretize(key, args, out)
                if bounded:
                    self.tally.estimate(path, key, BOUND_RULE)
        # also for outputs the shape memo replayed
        if self.values is not None and not ran and not self.values.invent(key, func, args, kwargs, out, path):
            self.values.source(key, func, args, kwargs, out)
        cost = self._costs.get(memo_key) if memo_key is not None else None
        if cost is None:
            cost = self._cost(func, key, args, kwargs, out)
            if memo_key is not None:
                self._costs[memo_key] = cost
        if isinstance(cost, str):
            self.tally.skip(path, key, cost)
        elif not isinstance(cost, Free):
            self.tally.add_values(
                path, key, self._charge(cost, key, func, memo_key, args, kwargs, out), backward=node is not None
            )
        else:  # free of FLOPs, but a copy, a gather or a fill still moves memory (traffic.py); a view moves none
            rule = free_op_traffic(func, key)
            moved = self._moved(rule, key, func, memo_key, args, kwargs, out) if rule is not None else 0
            if moved:
                self.tally.add_values(path, key, {BYTES: moved}, backward=node is not None)
        if self.peak is not None:
            try:
                self.peak.observe(args, out, node, path)
            except Exception:  # what the tracker cannot follow leaves peak memory not measured, never wrong
                self.peak.failed = True
                self.peak = None
        return out

    def _charge(
        self, cost: Cost, key: str, func: Any, memo_key: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> dict[Metric, int]:
        """What a priced op adds to the tally: its cost's figures and the bytes it moves, the zeros left out (a
        tally keeps none), memoised with its bytes (the same shapes, dtypes and aliasing add the same figures)."""
        charge_key = (memo_key, _aliasing(args, kwargs)) if memo_key is not None else None
        charge = self._charges.get(charge_key) if charge_key is not None else None
        if charge is None:
            unsized = len(self.unsized_bytes)
            moved = self._moved(bytes_moved, key, func, None, args, kwargs, out)
            charge = {metric: value for metric, value in cost.values().items() if value}
            if moved:
                charge[BYTES] = moved
            if charge_key is not None and len(self.unsized_bytes) == unsized:
                self._charges[charge_key] = charge
        return charge

    def _moved(
        self,
        rule: Rule,
        key: str,
        func: Any,
        memo_key: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
    ) -> int:
        """The bytes the op moves by `rule`, memoised like its cost; 0 with `unsized_bytes` noted for a size fake
        mode does not know (the report then leaves `bytes` not measured)."""
        # the shape memo's key says nothing of which arguments are the same tensor (`x * x` reads x once,
        # `x * y` reads both): the bytes memo keys on that too, or a replay would answer for the other
        bytes_key = (memo_key, _aliasing(args, kwargs)) if memo_key is not None else None
        moved = self._bytes.get(bytes_key) if bytes_key is not None else None
        if moved is None:
            try:
                moved = rule(func, args, kwargs, out)
            except Unsized:
                self.unsized_bytes.append(key)
                return 0
            if bytes_key is not None:
                self._bytes[bytes_key] = moved
        return moved

    def _guarded(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[..., Any] | None = None
    ) -> Any:
        """Runs the op (or `run(func, args, kwargs)`); on failure records which op failed and whether it fails
        only on fake tensors."""
        try:
            if run is None:
                return self._run_fake_or_fallback(func, args, kwargs)
            return run(func, args, kwargs)
        except CountingError:
            raise
        except Exception as exc:
            fake_only = self.bounds is not None and _fails_only_in_fake(func, args, kwargs, exc)
            self.op_failures.append((exc, str(func), fake_only))
            if self.failed_op is None:
                self.failed_op = str(func)
                self.fake_only_failure = fake_only
            raise

    def failure_of(self, exc: BaseException) -> tuple[str, bool] | None:
        """(op, fails only on fake tensors) when `exc`, or an exception it was raised from, is an op failure."""
        chain: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and current not in chain:
            chain.append(current)
            current = current.__cause__ or current.__context__
        for failed, op, fake_only in reversed(self.op_failures):
            if any(failed is link for link in chain):
                return op, fake_only
        return None

    def stand_ins_read(self) -> list[str]:
        """Made-up values the model read: `.item()` of unknown tensors, f-strings of unknown 0-d tensors."""
        return [*self.unknown_reads, *(self.values.unknown_reads if self.values is not None else [])]

    def _note_routing_used(self) -> None:
        """Invented routing indices that were just read: their figures rest on the routing rule."""
        if self.values is not None and self.values.used:
            for op, layer in self.values.used:
                self.tally.estimate(layer, op, ROUTING_RULE)
            self.values.used.clear()

    def _run_fake_or_fallback(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception:
            if self.shapes is not None and self.shapes.install():  # see lazy_shape_env.py
                return self._run_fake_or_fallback(func, args, kwargs)
            fallback = FAKE_FALLBACKS.get(op_key(func)) if self.bounds is not None else None
            if fallback is None:
                raise
            return fallback(func, args, kwargs)

    def _is_maybe_dynamic(self, func: Any) -> bool:
        """Ops that can return data-dependent sizes: tagged ATen ops and every op outside ATen (custom ops)."""
        known = self._maybe_dynamic.get(func)
        if known is None:
            known = func.namespace not in ("aten", "prims") or any(tag in func.tags for tag in _DYNAMIC_TAGS)
            self._maybe_dynamic[func] = known
        return known

    @staticmethod
    def _cost(func: Any, key: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Cost | str | Free:
        """The op's cost, the reason it is skipped, or `FREE` (no FLOPs; recorded only for the bytes it moves)."""
        entry = TORCH_OPS.lookup(key)
        if isinstance(entry, Free):
            return entry
        if entry is None:
            return NO_FORMULA
        try:
            return on_integers(entry(bind_arguments(func, args, kwargs), out), integer_output(out))
        except Exception as exc:
            return _formula_failure(exc)


def _aliasing(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """For each tensor argument (top level, or one level down in a list), the position of the first argument that
    is the same tensor: what `bytes_moved` depends on beyond shapes and dtypes. `()` when all are distinct (the
    common case, and the positions would then follow from the shape memo's key)."""
    ids: list[int] = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, torch.Tensor):
            ids.append(id(value))
        elif isinstance(value, (list, tuple)):
            ids.extend(id(item) for item in value if isinstance(item, torch.Tensor))
    if len(set(ids)) == len(ids):
        return ()
    first: dict[int, int] = {}
    return tuple(first.setdefault(tensor, index) for index, tensor in enumerate(ids))


def is_free(op: str) -> bool:
    return isinstance(TORCH_OPS.lookup(op), Free)


def _formula_failure(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if "data-dependent" in text or "GuardOnDataDependent" in text or "unbacked" in text.lower():
        return DATA_DEPENDENT_SHAPE
    return formula_failed(text[:120])


def is_fake_mode_exception(exc: BaseException) -> bool:
    """Exceptions that only fake execution raises: fake tensors refusing an op, or a guard on an unbacked size."""
    from torch._subclasses import fake_tensor
    from torch.fx.experimental import symbolic_shapes

    names = (
        "UnsupportedFakeTensorException",
        "DataDependentOutputException",
        "DynamicOutputShapeException",
        "UnsupportedOperatorException",
        "MetadataMismatchError",
    )
    kinds = tuple(getattr(fake_tensor, name) for name in names if hasattr(fake_tensor, name))
    guard = getattr(symbolic_shapes, "GuardOnDataDependentSymNode", None)
    if guard is not None:
        kinds = (*kinds, guard)
    return isinstance(exc, kinds)


def _fails_only_in_fake(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception) -> bool:
    """Replays an op that failed on fake tensors on real zeros of the same shapes: if it runs, fake mode (a meta
    kernel without this dtype, a missing fake implementation) is what failed, not the model's inputs."""
    if is_fake_mode_exception(exc):
        return True
    tensors = [v for v in tree_flatten((args, kwargs))[0] if isinstance(v, torch.Tensor)]
    if any(not all(isinstance(s, int) for s in t.shape) for t in tensors):
        return True
    if sum(t.numel() for t in tensors) > _REPLAY_LIMIT:
        return isinstance(exc, NotImplementedError)
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def real(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return torch.zeros(tuple(value.shape), dtype=value.dtype)
        if isinstance(value, torch.device):
            return torch.device("cpu")
        return value

    try:
        with unset_fake_temporarily(), torch.no_grad():
            real_args, real_kwargs = tree_map(real, (args, kwargs))
            func(*real_args, **real_kwargs)
    except Exception:
        return False
    return True
