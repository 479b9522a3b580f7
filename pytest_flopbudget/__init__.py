"""pytest-flopbudget: count the compute of neural networks exactly and keep it within budget.

The core (counting, reports, budgets, baselines) imports neither pytest nor torch nor onnx at import time: a
backend is imported when `count()` first needs it, so the CLI starts fast and ONNX-only projects never load torch.
"""

from __future__ import annotations

from pytest_flopbudget.config.budget import Budget, parse_quantity

from .backends import count
from .counting.formulas import Cost
from .counting.user_formulas import register_formula
from .errors import FlopBudgetError
from .report import LayerCost, OpCost, PhaseTotals, Report, SkippedOp

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "Cost",
    "FlopBudgetError",
    "LayerCost",
    "OpCost",
    "PhaseTotals",
    "Report",
    "SkippedOp",
    "__version__",
    "count",
    "parse_quantity",
    "register_formula",
]
