"""Cost of a formula (`flopbudget count --dim LOW..HIGH`) against one point count of the same entry.

    python benchmarks/bench_curve.py [--repeat N]

Both go through `backends.count_entry` as `flopbudget count` does (loading the model each time): ResNet-50 on meta
weights in (height, width) over [64, 1024] each, and Llama-7B on meta weights in seq over [64, 4096]. The formula
is lattice interpolation (curve/fit.py): degree probes, the tensor grid, checks off the fit and the step search,
each a point count. The ratio that matters is a first formula (every size new to the process) against a point
count at new sizes: on the shared 2-core development machine about 16x for ResNet-50 (13 counts) and 7-9x for
Llama-7B (8 counts), against the issue's target of at most 3 (docs/curves.md says why).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PYPROJECT = """\
[tool.flopbudget.models.resnet50]
target = "examples.factories:resnet50_on_meta"
inputs = [[1, 3, "height", "width"]]
dims = { height = 224, width = 224 }
curve = { height = [64, 1024], width = [64, 1024] }
flops = "1P"

[tool.flopbudget.models.llama_7b]
target = "benchmarks.bench_curve:llama_7b_on_meta"
inputs = [{ shape = [1, "seq"], dtype = "int64" }]
dims = { seq = 2048 }
curve = { seq = [64, 4096] }
flops = "1P"
"""


def llama_7b_on_meta() -> Any:
    """Llama-2-7B shapes with meta (shape-only) weights."""
    import torch

    from examples.decoder import Llama, LlamaConfig

    with torch.device("meta"):
        return Llama(LlamaConfig.llama_7b())


def measure(name: str, repeat: int) -> dict[str, Any]:
    from pytest_flopbudget._backends import count_entry
    from pytest_flopbudget._config.pyproject import parse_settings
    from pytest_flopbudget._curve.engine import count_curve

    entry = parse_settings(PYPROJECT, ROOT / "pyproject.toml").models[name]
    count_entry(entry, ROOT)  # warm: imports, first-call caches
    points, fresh, curves = [], [], []
    formula = None
    for i in range(repeat):
        start = time.perf_counter()
        count_entry(entry, ROOT)  # the same sizes again: what the process has memoised of them helps
        points.append(time.perf_counter() - start)
        start = time.perf_counter()
        count_entry(entry.at({dim: size + 8 * (i + 1) for dim, size in entry.dims.items()}), ROOT)  # new sizes
        fresh.append(time.perf_counter() - start)
        start = time.perf_counter()
        _, formula = count_curve(entry, ROOT)
        curves.append(time.perf_counter() - start)
    assert formula is not None
    point, new = statistics.median(points), statistics.median(fresh)
    first, again = curves[0], statistics.median(curves[1:] or curves)
    return {
        "model": name,
        "point_new_sizes_s": round(new, 3),
        "point_again_s": round(point, 3),
        "formula_first_s": round(first, 3),
        "formula_again_s": round(again, 3),
        # the honest figure: a first formula (every size new to the process) against a count at new sizes
        "ratio": round(first / new, 1),
        "ratio_again": round(again / point, 1),
        "counts": formula.holds.samples,
        "holds": formula.holds.describe(),
        "flops": str(formula.total("flops")),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    for name in ("resnet50", "llama_7b"):
        print(json.dumps(measure(name, options.repeat)))


if __name__ == "__main__":
    main()
