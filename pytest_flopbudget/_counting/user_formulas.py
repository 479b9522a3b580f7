"""`register_formula`: users' own cost formulas, for their custom ops or to replace a built-in one.

The formula tables (`torch/ops.py`, `onnx/ops.py`) import neither torch nor onnx, and this module imports them only
when a formula is registered, so `import pytest_flopbudget` stays light.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from types import TracebackType
from typing import Any, Callable, Literal, Union

from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FREE, FormulaRegistry

Backend = Literal["torch", "onnx"]
#: What a user's formula may return: a `Cost`, or `(flops, macs)` as two non-negative integers.
FormulaResult = Union[Cost, tuple[int, int]]

BACKENDS = ("torch", "onnx")


class UserFormula:
    """A user's formula as the registry holds it: calls `fn` and checks what it returns (`as_cost`)."""

    __slots__ = ("fn", "label")

    def __init__(self, fn: Callable[..., FormulaResult], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, *args: Any) -> Cost:
        return as_cost(self.fn(*args))

    def __repr__(self) -> str:
        return f"<formula for {self.label}: {getattr(self.fn, '__qualname__', self.fn)!r}>"


class FormulaHandle:
    """One registration: `remove()` it, or use it as a context manager (`with register_formula(...):`).

    Removing brings back what the op had before (the built-in formula, or an earlier registration); removing
    twice does nothing.
    """

    def __init__(self, registry: FormulaRegistry[Any], key: Hashable, formula: UserFormula) -> None:
        self._registry = registry
        self.key = key
        self.formula = formula

    @property
    def op(self) -> str:
        """The op as messages name it: `torch op 'mylib.fused_gelu'`, `ONNX op 'com.mycompany.FusedGelu'`."""
        return self.formula.label

    def remove(self) -> None:
        self._registry.pop_user(self.key, self.formula)

    @property
    def active(self) -> bool:
        """Whether this registration is still in place (in use, or under a newer one for the same op)."""
        return any(entry is self.formula for entry in self._registry.user_formulas(self.key))

    def __enter__(self) -> FormulaHandle:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<formula for {self.op} ({self._registry.name}){'' if self.active else ', removed'}>"


def register_formula(
    op: object,
    fn: Callable[..., FormulaResult],
    *,
    backend: Backend,
    override: bool = False,
) -> FormulaHandle:
    """Count `op` with `fn`, in every count of this process that follows (until the returned handle is removed).

    `backend="torch"`: `op` is the key the report lists the op under, `"namespace.op"` without the overload and
    without the in-place underscore (`"mylib.fused_gelu"` for `torch.ops.mylib.fused_gelu.default` and its
    in-place variant), or the op object itself (`torch.ops.mylib.fused_gelu`). `fn(args, out)` receives the
    op's arguments bound to their schema names, defaults filled in (`args["input"]`, `args["approximate"]`),
    and the op's output; in fake execution (the default) tensors are fake: read shapes, never values.

    `backend="onnx"`: `op` is `(domain, op_type)` (`("com.mycompany", "FusedGelu")`; `""` or `"ai.onnx"` for the
    default domain), or the label the report lists it under (`"com.mycompany.FusedGelu"`, `"Gelu"`). `fn(node)`
    receives a `NodeContext` (`pytest_flopbudget._counting.onnx.node`): `node.input_shape(i)`,
    `node.output_shape(i)`, `node.input_numel(i)`, `node.output_numel(i)`, `node.attr(name, default)`,
    `node.const_ints(i)`, `node.version`. A shape that inference left open raises inside those accessors, and
    the op is reported as skipped with the reason. The formula applies at every opset version.

    `fn` returns a `Cost(flops, macs)` or a `(flops, macs)` pair of non-negative integers. A formula that raises
    or returns anything else does not stop the count: the op is listed in `report.skipped` with the error.

    Registering over an op that already has a formula (built-in, including the ops counted as free, or
    registered earlier) needs `override=True`; otherwise a `ValueError` names the op. The returned handle undoes
    the registration: `handle.remove()`, or `with register_formula(...):` for a block. Registrations are
    per process: under pytest-xdist make them in a `conftest.py` (or the module that defines the model), which
    every worker imports; the `flopbudget` CLI sees those made when it imports the model's module.

        from pytest_flopbudget import Cost, register_formula

        def fused_gelu(args, out):
            n = out.numel()
            return Cost(flops=8 * n, macs=0)

        register_formula("mylib.fused_gelu", fused_gelu, backend="torch")
        register_formula(("com.mycompany", "FusedGelu"), lambda node: (8 * node.output_numel(0), 0), backend="onnx")
    """
    if backend not in BACKENDS:
        raise ValueError(f"register_formula: backend must be 'torch' or 'onnx', got {backend!r}")
    if not callable(fn):
        raise TypeError(f"register_formula: the formula for {op!r} must be callable, got {type(fn).__name__}")
    registry: FormulaRegistry[Any]
    key: Hashable
    if backend == "torch":
        registry, key, label = _torch_key(op)
    else:
        registry, key, label = _onnx_key(op)
    if not override:
        if registry.user_formulas(key):
            raise ValueError(
                f"register_formula: {label} already has a formula registered with register_formula; remove that "
                f"one first or pass override=True"
            )
        builtin = registry.builtin(key)
        if builtin is not None:
            kind = "is counted as free" if builtin is FREE else "has a built-in formula"
            raise ValueError(
                f"register_formula: {label} {kind} in the {backend} backend; pass override=True to replace it"
            )
    formula = UserFormula(fn, label)
    registry.push_user(key, formula)
    return FormulaHandle(registry, key, formula)


def registered_formulas() -> list[FormulaHandle]:
    """Every formula registered with `register_formula` and still in place (newest last per op)."""
    handles = []
    for registry in _registries():
        for key in registry.user_keys():
            for formula in registry.user_formulas(key):
                if isinstance(formula, UserFormula):
                    handles.append(FormulaHandle(registry, key, formula))
    return handles


def _registries() -> list[FormulaRegistry[Any]]:
    from pytest_flopbudget._counting.onnx.ops import ONNX_OPS
    from pytest_flopbudget._counting.torch.ops import TORCH_OPS

    return [TORCH_OPS, ONNX_OPS]


def _torch_key(op: object) -> tuple[FormulaRegistry[Any], str, str]:
    from pytest_flopbudget._counting.torch.ops import TORCH_OPS, op_key

    if hasattr(op, "overloadpacket"):  # torch.ops.mylib.fused_gelu.default
        key = op_key(op)
    elif hasattr(op, "_qualified_op_name"):  # torch.ops.mylib.fused_gelu
        key = str(op._qualified_op_name).replace("::", ".")
    elif isinstance(op, str):
        key = op.replace("::", ".")
    else:
        raise TypeError(
            f"register_formula: a torch op is named 'namespace.op' (e.g. 'mylib.fused_gelu') or given as "
            f"torch.ops.namespace.op; got {type(op).__name__} {op!r:.60}"
        )
    parts = key.split(".")
    if len(parts) != 2 or not all(part.isidentifier() for part in parts):
        raise ValueError(
            f"register_formula: torch op {op!r} is not 'namespace.op' (e.g. 'mylib.fused_gelu', without the overload)"
        )
    namespace, name = parts
    if name.endswith("_") and not name.endswith("__"):  # in-place variants share the key, as in op_key
        name = name[:-1]
    key = f"{namespace}.{name}"
    return TORCH_OPS, key, f"torch op '{key}'"


def _onnx_key(op: object) -> tuple[FormulaRegistry[Any], tuple[str, str], str]:
    from pytest_flopbudget._counting.onnx.graph import normalize_domain
    from pytest_flopbudget._counting.onnx.ops import ONNX_OPS, op_label

    if isinstance(op, tuple) and len(op) == 2 and all(isinstance(part, str) for part in op):
        domain, op_type = op
    elif isinstance(op, str):
        domain, _, op_type = op.rpartition(".")
    else:
        raise TypeError(
            f"register_formula: an ONNX op is (domain, op_type), e.g. ('com.mycompany', 'FusedGelu'), or its "
            f"label 'com.mycompany.FusedGelu'; got {type(op).__name__} {op!r:.60}"
        )
    if not op_type or "." in op_type:
        raise ValueError(f"register_formula: ONNX op {op!r} has no op_type (expected (domain, op_type))")
    key = (normalize_domain(domain), op_type)
    return ONNX_OPS, key, f"ONNX op '{op_label(*key)}'"


def as_cost(result: object) -> Cost:
    """A formula's `Cost`, or `(flops, macs)` as one; anything else raises a short TypeError (the backend puts it
    in the skipped op's reason, beside the op's name). A `Cost` may carry integer ops (`Cost(0, 0, int_ops=n)`)."""
    if not isinstance(result, Cost) and (not isinstance(result, (tuple, list)) or len(result) != 2):
        raise TypeError(f"the formula returned {result!r:.40}, not a Cost or (flops, macs)")
    figures: tuple[Any, ...] = tuple(result)
    try:
        counts = [operator.index(value) for value in figures]
    except TypeError:
        raise TypeError(f"the formula returned {result!r:.40}: FLOPs and MACs must be integers") from None
    if any(value < 0 for value in counts):
        raise TypeError(f"the formula returned {result!r:.40}: FLOPs and MACs must not be negative")
    return Cost(*counts)
