"""Time taken by huge and hostile inputs: the figures the suite's tests used to assert as wall-clock limits.

    python benchmarks/bench_hostile.py              # every case, median of 5 (about a minute)
    python benchmarks/bench_hostile.py --repeat 3

The tests (tests/unit/render/test_table.py, test_flame.py, tests/unit/counting/onnx/test_onnx_hostile.py,
tests/unit/config/test_budget.py) assert what does not depend on the machine: linear growth of CPU time between
two sizes (tests/growth.py) or the memory a parse allocates. This measures the times at the sizes the tests used
to time, each the median of several wall-clock runs after a warm-up, with the ratio to a size 8x smaller (about 8
for linear time). The time limits the tests asserted before, on the shared 2-core development machine:

- the per-layer table of 100,000 sibling layers: 8 s (about 1.5 s measured); the flame picture of them: 5 s
  (about 0.5 s)
- a 700 KB dotted layer name (350,000 levels): the table in 5 s; the same as an ONNX node name, counted, tabled
  and drawn: 5 s
- an ONNX node with 4 MB of `pkg.torch.onnx.name_scopes` metadata: counted in 2 s
- a hostile budget string (`1e10000000`, ten million digits): refused in 1 s; any accepted count in 0.5 s
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up: first-call imports and caches are not what we measure
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def scaling(work: Callable[[int], Callable[[], Any]], size: int, repeat: int) -> dict[str, float]:
    """Median seconds of `work(size)()` and of `work(size // 8)()`, and their ratio (8 for linear time)."""
    large = median_seconds(work(size), repeat)
    small = median_seconds(work(size // 8), repeat)
    return {"seconds": large, "seconds_at_one_eighth": small, "ratio": large / small if small else float("inf")}


def siblings(count: int) -> Any:
    from pytest_flopbudget._report import LayerCost, PhaseTotals, Report

    layers = {f"blocks.{i}": LayerCost(flops=2 * i, macs=i, params=1) for i in range(count)}
    layers["head"] = LayerCost(flops=2, macs=1)
    total = PhaseTotals(flops=sum(c.flops for c in layers.values()), macs=sum(c.macs for c in layers.values()))
    return Report(layers=layers, forward=total)


def render_cases(repeat: int) -> dict[str, Any]:
    from pytest_flopbudget._render.flame import render_svg
    from pytest_flopbudget._render.table import format_layer_table
    from pytest_flopbudget._report import LayerCost, PhaseTotals, Report

    def table(count: int) -> Callable[[], Any]:
        report = siblings(count)
        return lambda: format_layer_table(report, depth=None)

    def picture(count: int) -> Callable[[], Any]:
        report = siblings(count)
        return lambda: render_svg(report)

    def dotted(levels: int) -> Callable[[], Any]:
        layers = {"a." * levels + "relu": LayerCost(flops=8), "head": LayerCost(flops=2, macs=1)}
        report = Report(layers=layers, forward=PhaseTotals(flops=10, macs=1))
        return lambda: (report.inclusive(), format_layer_table(report, depth=None))

    return {
        "table_100k_siblings": scaling(table, 100_000, repeat),
        "flame_100k_siblings": scaling(picture, 100_000, repeat),
        "table_700kb_dotted_name": scaling(dotted, 350_000, repeat),
    }


def onnx_cases(repeat: int) -> dict[str, Any]:
    from onnx import TensorProto, helper

    from pytest_flopbudget._counting.onnx.backend import count_onnx
    from pytest_flopbudget._render.flame import render_svg
    from pytest_flopbudget._render.table import format_layer_table

    def relu(name: str = "n", scopes: str | None = None) -> Any:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        node = helper.make_node("Relu", ["x"], ["y"], name=name)
        if scopes is not None:
            helper.set_metadata_props(node, {"pkg.torch.onnx.name_scopes": scopes})
        graph = helper.make_graph([node], "g", [x], [y])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    scopes: dict[str, tuple[Callable[[int], str], int]] = {
        "long_list": (lambda n: repr(["", *(f"m{i}" for i in range(n)), "relu"]), 500_000),
        "f_string": (lambda n: "[f'" + "{1}" * n + "', 'relu']", 1_400_000),
        "escapes": (lambda n: repr(["", "\\x41" * n, "relu"]), 1_000_000),
    }
    names: dict[str, Callable[[int], str]] = {
        "dotted": lambda n: "a." * n + "relu",
        "torchscript": lambda n: "/a" * n + "/Relu",
    }
    results: dict[str, Any] = {}
    for kind, (value, size) in scopes.items():

        def counted(n: int, value: Callable[[int], str] = value) -> Callable[[], Any]:
            model = relu(scopes=value(n))
            return lambda: count_onnx(model)

        results[f"count_4mb_name_scopes_{kind}"] = scaling(counted, size, repeat)
    for kind, name in names.items():

        def shown(n: int, name: Callable[[int], str] = name) -> Callable[[], Any]:
            model = relu(name=name(n))

            def run() -> Any:
                report = count_onnx(model)
                return format_layer_table(report, depth=None), render_svg(report)

            return run

        results[f"count_table_svg_700kb_node_name_{kind}"] = scaling(shown, 350_000, repeat)
    return results


def budget_cases(repeat: int) -> dict[str, Any]:
    from pytest_flopbudget._config.budget import parse_quantity
    from pytest_flopbudget._config.location import LocatedError

    def parse(text: str) -> Callable[[], Any]:
        def run() -> None:
            with contextlib.suppress(LocatedError):
                parse_quantity(text, "flops")

        return run

    cases = {"1e10000000": "1e10000000", "1e + ten million 9s": "1e" + "9" * 10_000_000, "4.1 GFLOPs": "4.1 GFLOPs"}
    return {f"parse_{name}_us": 1e6 * median_seconds(parse(text), repeat) for name, text in cases.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    results = {**render_cases(args.repeat), **budget_cases(args.repeat)}
    try:
        results.update(onnx_cases(args.repeat))
    except ImportError:
        results["onnx"] = "not installed: pip install onnx"
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
