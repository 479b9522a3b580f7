"""`flopbudget count --format json`: the Report's JSON with the figures derived from it for a reader.

The document is the Report's own layout (`Report.to_dict`, what a baseline holds), so it still reads back as a
Report; on top, where the report measures bytes, the arithmetic intensity (FLOPs per byte) of the model and of each
layer that moves bytes, with `--hardware` the roofline estimate, and the figures of the metrics other packages add
(`plugin_metrics`, only where one is installed). These are derived, never stored in a baseline: a baseline keeps
counts, and the `--report json:` results keep their layout.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from pytest_flopbudget._metrics import BYTES, METRICS
from pytest_flopbudget._render.roofline import Estimate, intensity
from pytest_flopbudget._render.roofline_report import Roofline, layer_intensity
from pytest_flopbudget._report import ROOT, Report


def count_document(report: Report, roofline: Roofline | None = None) -> str:
    """The JSON text (sorted keys, ASCII, ending in a newline) of `report` with its intensities and estimate."""
    return json.dumps(count_data(report, roofline), sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def count_data(report: Report, roofline: Roofline | None = None) -> dict[str, Any]:
    """`report.to_dict()` plus `intensity` (the model's, and each layer's own, exclusive of its children, as the
    layers' figures are) where bytes are measured and non-zero, and `roofline_estimate` (the model's, with the
    profile and the dtype) and each layer's `roofline_estimate` with `roofline`."""
    data = report.to_dict()
    if METRICS.plugins:
        data["plugin_metrics"] = plugin_metrics(report)
    if not report.measures(BYTES):
        return data
    total = intensity(report.flops, report.metric(BYTES))
    if total is not None:
        data["intensity"] = float(total)
    layers = data["layers"]
    for path, cost in report.layers.items():
        ratio = layer_intensity(cost)
        if ratio is not None:
            layers[path]["intensity"] = float(ratio)
    if roofline is not None:
        estimates = roofline.estimates(report)
        for path, cost in report.layers.items():
            layers[path]["roofline_estimate"] = _estimate(roofline.estimate(cost))
        model = estimates.get(ROOT, Estimate(Fraction(0), Fraction(0)))  # a model without layers takes no time
        data["roofline_estimate"] = {**roofline.describe(), **_estimate(model)}
    return data


def plugin_metrics(report: Report) -> dict[str, Any]:
    """The figures of the metrics other packages added, read off the report's ops (never stored in it): each
    one's total, its layers with a figure (exclusive of their children, as the layers' figures are), and how and by
    whom it is defined."""
    return {
        str(metric): {
            "total": report.metric(metric),
            "layers": {path: value for path, value in sorted(report.layer_metric(metric).items()) if value},
            "label": metric.label,
            "unit": metric.symbol,
            "convention": metric.conventions[metric],
            "entry_point": metric.origin,
        }
        for metric in METRICS.plugins
    }


def _estimate(estimate: Estimate) -> dict[str, Any]:
    return {
        "seconds": float(estimate.seconds),
        "bound": estimate.bound,
        "compute_bound_seconds": float(estimate.compute_seconds),
        "memory_bound_seconds": float(estimate.memory_seconds),
    }
