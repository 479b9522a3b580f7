"""Metrics from other packages: the public module a third-party metric imports from.

A package adds a metric by defining it with `define_metric` and naming it in the entry-point group
`pytest_flopbudget.metrics` (the entry named after the metric):

    # flopbudget_matmul.py
    from pytest_flopbudget.metrics import OpFigures, define_metric

    MATMULS = {"aten.mm", "aten.bmm", "aten.addmm", "MatMul", "Gemm"}

    def matmul_flops(op: str, figures: OpFigures) -> int:
        return 2 * figures.macs if op in MATMULS else 0

    MATMUL_FLOPS = define_metric(
        "matmul-flops", label="matmul FLOPs", unit="FLOPs", convention="2 per MAC of mm, bmm, addmm, MatMul, Gemm",
        of_op=matmul_flops,
    )

    # its pyproject.toml
    [project.entry-points."pytest_flopbudget.metrics"]
    matmul-flops = "flopbudget_matmul:MATMUL_FLOPS"

Once installed, `matmul-flops = "1.2M"` budgets it in `[tool.flopbudget.models.NAME]`,
`@pytest.mark.flop_budget(matmul_flops="1.2M")` in a test, and `report.metric("matmul-flops")` reads it. Entry points
are loaded while pytest_flopbudget itself is being imported, so a metric's module imports from this module only
(docs/architecture.md, "Metrics").
"""

from __future__ import annotations

from pytest_flopbudget._metrics import ENTRY_POINT_GROUP, OpFigures, define_metric

__all__ = ["ENTRY_POINT_GROUP", "OpFigures", "define_metric"]
