"""pytest-flopbudget: count the compute of neural networks exactly and keep it within budget.

The core (counting, reports, budgets, baselines) imports neither pytest nor torch nor onnx at import time: a
backend is imported when `count()` first needs it, so the CLI starts fast and ONNX-only projects never load torch.
"""

from __future__ import annotations

from pytest_flopbudget._backends import backends, count
from pytest_flopbudget._backends.formulas import register_formula
from pytest_flopbudget._config.budget import Budget, parse_quantity, use_convention_names
from pytest_flopbudget._config.target_kinds import use_target_kinds
from pytest_flopbudget._conventions.registry import profile_named, profile_names
from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.named import count_curve
from pytest_flopbudget._errors import FlopBudgetError, FlopBudgetWarning
from pytest_flopbudget._render.table import report_text
from pytest_flopbudget._report import (
    LayerCost,
    OpCost,
    PhaseTotals,
    Report,
    SkippedOp,
    use_conventions,
    use_text_renderer,
)
from pytest_flopbudget._version import __version__

# `print(report)` draws the layer table: the package root connects the data type to its renderer, so that
# report.py imports no presentation (render/ sits above it).
use_text_renderer(report_text)
# `[tool.flopbudget]` is validated against the backends that will run its entries (the entry keys they honour, how
# their targets are spelled); config/ sits below backends/, so the root hands it the registry.
use_target_kinds(backends)
# `report.under("megatron")`: the profiles read Reports (conventions/ sits above report.py), so the root connects them.
use_conventions(profile_named)
use_convention_names(profile_names)

__all__ = [
    "Budget",
    "Cost",
    "FlopBudgetError",
    "FlopBudgetWarning",
    "Formula",
    "LayerCost",
    "OpCost",
    "PhaseTotals",
    "Report",
    "SkippedOp",
    "__version__",
    "count",
    "count_curve",
    "parse_quantity",
    "register_formula",
]
