"""Counting a PyTorch model at the ATen level, on fake tensors by default.

The model's forward (and, for a training step, the backward) runs under a `TorchDispatchMode` that sees every ATen
op after autograd and composite decomposition, i.e. the ops that would really run. Under `FakeTensorMode` those ops
only propagate shapes: no arithmetic and no weight memory. Parameters and buffers are swapped for fake stand-ins
with `torch.func.functional_call`, so the caller's model is never modified: no new buffers, no `.grad`, no hooks
left behind, same train/eval mode.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..errors import CountingError
from ..report import LayerCost, PhaseTotals, Report, SkippedOp
from .formulas import Cost
from .module_paths import ModulePathTracker
from .registry import FREE_OP
from .shape_memo import ShapeMemo
from .torch_ops import SAME_SHAPE_INPLACE, TORCH_OPS, op_key

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


@dataclass
class _Tally:
    layers: dict[str, LayerCost] = field(default_factory=dict)
    forward: PhaseTotals = field(default_factory=PhaseTotals)
    backward: PhaseTotals = field(default_factory=PhaseTotals)
    skipped: dict[str, SkippedOp] = field(default_factory=dict)

    def add(self, path: str, op: str, cost: Cost, backward: bool) -> None:
        self.layers.setdefault(path, LayerCost()).add_op(op, cost.flops, cost.macs)
        phase = self.backward if backward else self.forward
        phase.flops += cost.flops
        phase.macs += cost.macs

    def skip(self, path: str, op: str, reason: str) -> None:
        self.layers.setdefault(path, LayerCost()).add_skipped(op)
        entry = self.skipped.setdefault(op, SkippedOp(reason=reason))
        entry.calls += 1
        if path not in entry.layers:
            entry.layers.append(path)


class CountingMode(TorchDispatchMode):
    """Looks up each dispatched op in the formula registry and charges it to the running module."""

    def __init__(self, tracker: ModulePathTracker, memo: ShapeMemo | None = None) -> None:
        super().__init__()
        self.tracker = tracker
        self.memo = memo
        self.tally = _Tally()
        self.failed_op: str | None = None
        self._costs: dict[Any, Cost | str] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        memo_key = None
        out = self.memo.shortcut(func, args, kwargs) if self.memo is not None else None
        if out is None and self.memo is not None:
            memo_key = self.memo.key(func, args, kwargs)
            out = self.memo.replay(memo_key) if memo_key is not None else None
        if out is None:
            try:
                out = func(*args, **kwargs)
            except Exception:
                if self.failed_op is None:
                    self.failed_op = str(func)
                raise
            if memo_key is not None:
                self.memo.store(memo_key, out)
        node = torch._C._current_autograd_node()
        path = self.tracker.path_for_node(node) if node is not None else self.tracker.current
        key = op_key(func)
        cost = self._costs.get(memo_key) if memo_key is not None else None
        if cost is None:
            cost = self._cost(func, key, args, kwargs, out)
            if memo_key is not None:
                self._costs[memo_key] = cost
        if isinstance(cost, str):
            self.tally.skip(path, key, cost)
        elif cost is not _FREE:
            self.tally.add(path, key, cost, node is not None)
        return out

    @staticmethod
    def _cost(func: Any, key: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Cost | str:
        """The op's cost, or the reason it is skipped."""
        entry = TORCH_OPS.lookup(key)
        if entry is FREE_OP:
            return _FREE
        if entry is None:
            return "no formula"
        try:
            return entry(bind_arguments(func, args, kwargs), out)
        except Exception as exc:
            return _formula_failure(exc)


_FREE = Cost(0, 0)


def _formula_failure(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if "data-dependent" in text or "GuardOnDataDependent" in text or "unbacked" in text.lower():
        return "data-dependent shape"
    return f"formula failed ({text[:120]})"


def count_torch(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    training: bool = False,
    execution: str = "fake",
    loss_fn: Callable[[Any], Any] | None = None,
) -> Report:
    if not isinstance(model, torch.nn.Module):
        raise CountingError(
            f"count() needs a torch.nn.Module, a path to an .onnx file or an onnx.ModelProto; "
            f"got {type(model).__name__}"
        )
    if execution not in ("fake", "real"):
        raise CountingError(f"execution={execution!r} is not supported; use 'fake' (default) or 'real'")

    tracker = ModulePathTracker(model)
    modes = [(module, module.training) for module in model.modules()]
    mode: CountingMode | None = None
    try:
        with _quiet_fake_tensor_log(), _execution_context(execution) as (convert, memo):
            mode = CountingMode(tracker, memo)
            stand_in = _by_identity(convert)
            state = _stand_in_state(model, stand_in, execution)
            fake_args, fake_kwargs = tree_map(stand_in, (args, kwargs))
            if training:
                model.train()
            try:
                with mode, _grad_mode(training):
                    output = torch.func.functional_call(
                        model, state, tuple(fake_args), fake_kwargs, tie_weights=True, strict=False
                    )
                    if training:
                        loss = loss_fn(output) if loss_fn is not None else _sum_outputs(output)
                        _check_loss(loss)
                        torch.autograd.grad(loss, _grad_leaves(loss), allow_unused=True)
            except CountingError:
                raise
            except Exception as exc:
                raise _explain(exc, model, tracker, mode, execution) from None
    finally:
        tracker.close()
        for module, was_training in modes:
            module.training = was_training

    return _build_report(model, mode.tally, tracker, training, execution, args, kwargs)


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """Fake mode logs a full traceback when an op fails on fake tensors; we report that failure in one line."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was_disabled = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was_disabled


@contextlib.contextmanager
def _execution_context(execution: str) -> Iterator[tuple[Callable[[Any], Any], ShapeMemo | None]]:
    """Yields the function that turns a real or meta tensor into the tensor the forward will see."""
    if execution == "real":
        yield _real_stand_in, None
        return
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)

    def to_fake(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        # Shape, strides and dtype are all a count needs. Wrapping a fresh meta tensor is several times cheaper
        # than `from_tensor` (which describes the real tensor in full); a meta tensor stands in on the CPU.
        device = torch.device("cpu") if value.is_meta else value.device
        fake = make_fake(value.shape, value.stride(), value.dtype, device)
        if value.requires_grad and (value.is_floating_point() or value.is_complex()):
            fake.requires_grad_(True)
        return fake

    def make_fake(shape: tuple, stride: tuple, dtype: torch.dtype, device: torch.device) -> Any:
        with unset_fake_temporarily():
            meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return FakeTensor(fake_mode, meta, device)

    with fake_mode:
        yield to_fake, ShapeMemo(make_fake, SAME_SHAPE_INPLACE)


def _real_stand_in(value: Any) -> Any:
    """Real execution: alias parameters (no copy) so gradients land on the alias, never on the caller's tensor."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_meta:
        raise CountingError("execution='real' cannot run a model or input on the meta device; use execution='fake'")
    alias = value.detach()
    if value.requires_grad:
        alias.requires_grad_(True)
    return alias


def _by_identity(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """One stand-in per tensor object: tied weights stay tied, and `m(x, x, x)` still passes the same tensor
    three times (nn.MultiheadAttention's fast path and any `a is b` branch depend on it)."""
    seen: dict[int, Any] = {}

    def stand_in(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) not in seen:
            seen[id(value)] = convert(value)
        return seen[id(value)]

    return stand_in


def _stand_in_state(model: torch.nn.Module, stand_in: Callable[[Any], Any], execution: str) -> dict[str, Any]:
    """Fake (or aliased) parameters and buffers for `functional_call`."""
    state: dict[str, Any] = {}
    copies: dict[int, Any] = {}
    for name, tensor in _named_state(model):
        if execution == "real" and not isinstance(tensor, torch.nn.Parameter):
            # Buffers may be updated in place (batch-norm running stats): count on a private copy.
            state[name] = copies.setdefault(id(tensor), tensor.clone())
        else:
            state[name] = stand_in(tensor)
    return state


def _named_state(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    yield from model.named_parameters(remove_duplicate=False)
    for name, buffer in model.named_buffers(remove_duplicate=False):
        if buffer is not None:
            yield name, buffer


@contextlib.contextmanager
def _grad_mode(training: bool) -> Iterator[None]:
    if training:
        with torch.enable_grad():
            yield
    else:
        yield


def _sum_outputs(output: Any) -> Any:
    leaves = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        raise CountingError(
            "training=True needs an output that requires grad; the model's outputs do not "
            "(are all parameters frozen?), or pass loss_fn= to build the loss"
        )
    loss = leaves[0].sum()
    for leaf in leaves[1:]:
        loss = loss + leaf.sum()
    return loss


def _check_loss(loss: Any) -> None:
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise CountingError("loss_fn must return a scalar tensor (one element) to run the backward pass")


def _explain(
    exc: Exception, model: torch.nn.Module, tracker: ModulePathTracker, mode: CountingMode, execution: str
) -> CountingError:
    """One line that says where the model failed and what to change."""
    where = tracker.error_path
    if where is None:
        layer = "the model's forward"
    elif where == "":
        layer = f"the model ({type(model).__name__})"
    else:
        layer = f"layer '{where}' ({_module_type(model, where)})"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if execution == "fake" and _is_fake_mode_failure(exc):
        op = f" running {mode.failed_op}" if mode.failed_op else ""
        return CountingError(
            f"fake-tensor execution failed in {layer}{op}: {detail}; "
            f"count this model with execution='real' (runs the real forward)"
        )
    return CountingError(f"the model raised in {layer}: {detail}; check the example inputs' shapes and dtypes")


def _module_type(model: torch.nn.Module, path: str) -> str:
    try:
        return type(model.get_submodule(path)).__name__
    except AttributeError:
        return "?"


def _is_fake_mode_failure(exc: Exception) -> bool:
    from torch._subclasses import fake_tensor

    fake_errors = tuple(
        getattr(fake_tensor, name)
        for name in (
            "UnsupportedFakeTensorException",
            "DataDependentOutputException",
            "DynamicOutputShapeException",
            "UnsupportedOperatorException",
            "MetadataMismatchError",
        )
        if hasattr(fake_tensor, name)
    )
    if isinstance(exc, fake_errors):
        return True
    name = type(exc).__name__
    text = str(exc)
    return (
        "GuardOnDataDependent" in name
        or "DataDependent" in name
        or "FakeTensor" in text
        or "fake tensor" in text.lower()
        or "meta tensor" in text.lower()
        or "data-dependent" in text.lower()
        or "Cannot access data pointer" in text
    )


def _build_report(
    model: torch.nn.Module,
    tally: _Tally,
    tracker: ModulePathTracker,
    training: bool,
    execution: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Report:
    layers = tally.layers
    seen: set[int] = set()
    total = 0
    for path, module in model.named_modules():
        own = 0
        for param in module.parameters(recurse=False):
            if id(param) not in seen:
                seen.add(id(param))
                own += param.numel()
        if own:
            layers.setdefault(path, LayerCost()).params += own
            total += own
    return Report(
        params=total,
        layers=layers,
        forward=tally.forward,
        backward=tally.backward,
        skipped_ops=tally.skipped,
        training=training,
        backend="torch",
        model=type(model).__name__,
        inputs=[_describe(v) for v in tree_flatten((args, kwargs))[0]],
        versions={"torch": torch.__version__, "execution": execution, **_tool_version()},
    )


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return type(value).__name__


def _tool_version() -> dict[str, str]:
    from .. import __version__

    return {"pytest-flopbudget": __version__}


def _grad_leaves(loss: Any) -> list[Any]:
    """Every leaf the backward would accumulate into; autograd.grad to them writes no .grad anywhere."""
    seen: set[Any] = set()
    stack, leaves = [loss.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves
