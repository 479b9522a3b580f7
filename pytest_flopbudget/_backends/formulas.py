"""`register_formula` over the backends' formula tables: the backend is named through the registry, so a third
party's backend can own a table (its `formula_table` and `formula_key`) or say it has none."""

from __future__ import annotations

from typing import Any, Callable

from pytest_flopbudget._backends.registry import backend_named, general_first
from pytest_flopbudget._config.target_kinds import joined
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._counting.user_formulas import FormulaHandle, FormulaResult, register_in, registered_in


def register_formula(
    op: object,
    fn: Callable[..., FormulaResult],
    *,
    backend: str,
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

    `backend="jax"`: `op` is a jaxpr primitive's name (`"erf"`, `"mylib_fused_gelu"`) or the
    `jax.extend.core.Primitive` itself. `fn(eqn)` receives an `EqnContext` (`pytest_flopbudget.formulas`):
    `eqn.in_shapes`, `eqn.out_shapes`, `eqn.in_numel(i)`, `eqn.out_numel(i)`, `eqn.params`, `eqn.out_integer`.

    `backend="tensorflow"` (or `"savedmodel"`, the same table): `op` is a graph op type (`"Erf"`,
    `"MatrixInverse"`). `fn(op)` receives the op's `in_shapes` and `out_shapes` (tuples of ints), `attrs`,
    `out_integer`, `out_numel(i)` and `attr(name, default)`.

    Any other installed backend (`pytest_flopbudget.backends`) is named the same way: one that owns a formula
    table says how its ops are named; registering for one without a table is a `ValueError`.

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
    found = backend_named(backend) if isinstance(backend, str) else None
    if found is None:
        raise ValueError(f"register_formula: backend must be {_tabled()}, got {backend!r}")
    table = found.formula_table()
    if table is None:
        raise ValueError(
            f"register_formula: the {backend} backend has no formula table (it counts its ops itself); formulas "
            f"can be registered for {_tabled()}"
        )
    if not callable(fn):
        raise TypeError(f"register_formula: the formula for {op!r} must be callable, got {type(fn).__name__}")
    key, label = found.formula_key(op)
    return register_in(table, key, label, fn, backend, override)


def registered_formulas() -> list[FormulaHandle]:
    """Every formula registered with `register_formula` and still in place (newest last per op)."""
    return registered_in(_tables())


def _tables() -> list[FormulaRegistry[Any]]:
    """Each formula table once (the two TensorFlow backends, objects and SavedModels, share one)."""
    tables = (backend.formula_table() for backend in general_first())
    found: dict[int, FormulaRegistry[Any]] = {}
    for table in tables:
        if table is not None:
            found.setdefault(id(table), table)
    return list(found.values())


def _tabled() -> str:
    """`'torch' or 'onnx'`: the backends that own a formula table."""
    return joined([repr(b.name) for b in general_first() if b.formula_table() is not None]) or "none"
