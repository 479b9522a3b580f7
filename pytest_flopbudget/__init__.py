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
from pytest_flopbudget._display import use_html
from pytest_flopbudget._errors import FlopBudgetError, FlopBudgetWarning
from pytest_flopbudget._explain.items import Explanation
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


# A notebook displays a Report, a curve's Formula and an explanation as HTML (`_repr_html_`): the data types sit
# below their renderers, so the root plugs these in too (`display.py`), each imported at its first display so that
# `import pytest_flopbudget` (and the CLI) loads no picture code.
def _report_html(report: Report) -> str:
    from pytest_flopbudget._render.notebook import report_html

    return report_html(report)


def _formula_html(formula: Formula) -> str:
    from pytest_flopbudget._curve.notebook import formula_html

    return formula_html(formula)


def _explanation_html(explanation: Explanation) -> str:
    from pytest_flopbudget._explain.notebook import explanation_html

    return explanation_html(explanation)


use_html(Report, _report_html)
use_html(Formula, _formula_html)
use_html(Explanation, _explanation_html)
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
