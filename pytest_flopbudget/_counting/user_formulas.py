"""Users' own cost formulas, for their custom ops or to replace a built-in one: what a registration is.

`register_formula` itself (`_backends/formulas.py`) finds the backend by name and asks it for its formula table and
the op's key; this module registers the formula there (`register_in`) and hands back the `FormulaHandle`, and
names the torch and ONNX ops for their backends (`torch_formula_key`, `onnx_formula_key`). The formula tables
(`torch/ops.py`, `onnx/ops.py`) import neither torch nor onnx, and are imported only when a formula is registered,
so `import pytest_flopbudget` stays light.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from types import TracebackType
from typing import Any, Callable, Union

from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FREE, FormulaRegistry

#: What a user's formula may return: a `Cost`, or `(flops, macs)` as two non-negative integers.
FormulaResult = Union[Cost, tuple[int, int]]


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


def register_in(
    table: FormulaRegistry[Any],
    key: Hashable,
    label: str,
    fn: Callable[..., FormulaResult],
    backend: str,
    override: bool,
) -> FormulaHandle:
    """Register `fn` for `key` (named `label` in messages) in `table`, the formula table of the backend named
    `backend`: what `register_formula` does once the backend has named the op (`_backends/formulas.py`)."""
    if not override:
        if table.user_formulas(key):
            raise ValueError(
                f"register_formula: {label} already has a formula registered with register_formula; remove that "
                f"one first or pass override=True"
            )
        builtin = table.builtin(key)
        if builtin is not None:
            kind = "is counted as free" if builtin is FREE else "has a built-in formula"
            raise ValueError(
                f"register_formula: {label} {kind} in the {backend} backend; pass override=True to replace it"
            )
    formula = UserFormula(fn, label)
    table.push_user(key, formula)
    return FormulaHandle(table, key, formula)


def registered_in(tables: list[FormulaRegistry[Any]]) -> list[FormulaHandle]:
    """Every formula registered with `register_formula` in `tables` and still in place (newest last per op)."""
    handles = []
    for registry in tables:
        for key in registry.user_keys():
            for formula in registry.user_formulas(key):
                if isinstance(formula, UserFormula):
                    handles.append(FormulaHandle(registry, key, formula))
    return handles


def torch_formula_key(op: object) -> tuple[str, str]:
    """A torch op as the torch formula table keys it, and its label (`register_formula(..., backend="torch")`)."""
    from pytest_flopbudget._counting.torch.ops import op_key

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
    return key, f"torch op '{key}'"


def onnx_formula_key(op: object) -> tuple[tuple[str, str], str]:
    """An ONNX op as the ONNX formula table keys it, and its label (`register_formula(..., backend="onnx")`)."""
    from pytest_flopbudget._counting.onnx.graph import normalize_domain
    from pytest_flopbudget._counting.onnx.ops import op_label

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
    return key, f"ONNX op '{op_label(*key)}'"


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
