"""pytest-flopbudget: count the compute of neural networks exactly and keep it within budget.

The core (counting, reports, budgets, baselines) imports neither pytest nor torch nor onnx at import time: a
backend is imported when `count()` first needs it, so the CLI starts fast and ONNX-only projects never load torch.
"""

from __future__ import annotations

from pytest_flopbudget.backends import count
from pytest_flopbudget.config.budget import Budget, parse_quantity
from pytest_flopbudget.counting.formulas import Cost
from pytest_flopbudget.counting.user_formulas import register_formula
from pytest_flopbudget.errors import FlopBudgetError
from pytest_flopbudget.render.table import report_text
from pytest_flopbudget.report import LayerCost, OpCost, PhaseTotals, Report, SkippedOp, use_text_renderer
from pytest_flopbudget.version import __version__

# `print(report)` draws the layer table: the package root connects the data type to its renderer, so that
# report.py imports no presentation (render/ sits above it).
use_text_renderer(report_text)

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
