"""Formulas for your own ops: the public module a user's cost formula imports from.

`register_formula` gives a custom op (or a built-in one) a formula, `Cost` is what a formula returns, `NodeContext`
is what an ONNX formula receives, `EqnContext` what a JAX one receives (one jaxpr equation), and the helpers are the
shared conventions the built-in formulas follow (docs/formulas.md), so that a custom op's figures add up with the
built-in ones. Everything here imports neither torch, onnx nor jax.
"""

from __future__ import annotations

from pytest_flopbudget._backends.formulas import register_formula, registered_formulas
from pytest_flopbudget._counting.formulas import (
    Cost,
    binary_search,
    comparison_sort,
    elementwise,
    linear,
    matmul,
    reduction,
    selection,
    softmax,
)
from pytest_flopbudget._counting.jax.ops import EqnContext
from pytest_flopbudget._counting.onnx.node import NodeContext
from pytest_flopbudget._counting.user_formulas import FormulaHandle

__all__ = [
    "Cost",
    "EqnContext",
    "FormulaHandle",
    "NodeContext",
    "binary_search",
    "comparison_sort",
    "elementwise",
    "linear",
    "matmul",
    "reduction",
    "register_formula",
    "registered_formulas",
    "selection",
    "softmax",
]
