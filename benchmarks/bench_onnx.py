"""Speed of the ONNX backend, measured against onnx-tool in the same run, and its scaling with graph size.

    python benchmarks/bench_onnx.py              # ResNet-50 vs onnx-tool, 10k vs 100k nodes (about a minute)
    python benchmarks/bench_onnx.py --quick      # fewer repetitions

Machines here are noisy, so every figure that matters is a ratio of two timings taken in the same process, each
the median of several repetitions after a warm-up.

- ResNet-50 (TorchScript export, ~100 MB of weights embedded in the .onnx file): `count(path)` against
  onnx-tool's `model_profile` on the same file (its table printing sent to /dev/null) and against onnx-tool's core
  (load, shape inference, profile; no printing). Both tools start from the path, so both pay for reading the file.
  The model is freshly initialised and exported in eval mode, so batch norm is folded into the convs and the
  exporter merges the identical (all-zero) folded biases: both tools report 25,507,944 parameters for this file.
  onnx-tool's MACs also include elementwise ops, hence its figure above 4,089,184,256.
- Linear time: a synthetic chain of 10,000 and of 100,000 nodes (MatMul, Add, Relu blocks with TorchScript-style
  names); for linear time the 100k count takes ~10x the 10k count (scaling exponent ~1.0).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up: first-call imports and caches are not what we compare
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def export_resnet50(directory: Path) -> Path:
    import torch

    from examples.resnet import resnet50

    path = directory / "resnet50.onnx"
    model = resnet50().eval()
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), dynamo=False, input_names=["input"])
    return path


def resnet50_vs_onnx_tool(path: Path, repeat: int) -> dict[str, Any]:
    from pytest_flopbudget import count

    results: dict[str, Any] = {"file_mb": round(path.stat().st_size / 2**20, 1)}
    report = count(str(path))
    results["ours_macs"] = report.macs
    results["ours_params"] = report.params
    results["count_s"] = median_seconds(lambda: count(str(path)), repeat)
    try:
        import onnx_tool
    except ImportError:
        results["onnx_tool"] = "not installed (pip install onnx-tool)"
        return results

    def peer_profile() -> None:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            onnx_tool.model_profile(str(path))

    def peer_core() -> Any:
        model = onnx_tool.loadmodel(str(path), {"verbose": False})
        graph = model.graph
        graph.graph_reorder_nodes()
        graph.shape_infer(None)
        graph.profile()
        return graph

    graph = peer_core()
    results["onnx_tool_version"] = getattr(onnx_tool, "VERSION", "?")
    results["onnx_tool_macs"] = int(graph.macs[0])  # it counts elementwise ops as MACs too
    results["onnx_tool_params"] = int(graph.params)
    results["onnx_tool_model_profile_s"] = median_seconds(peer_profile, repeat)
    results["onnx_tool_core_s"] = median_seconds(peer_core, repeat)
    results["speedup_vs_model_profile"] = results["onnx_tool_model_profile_s"] / results["count_s"]
    results["speedup_vs_core"] = results["onnx_tool_core_s"] / results["count_s"]
    return results


def synthetic_chain(nodes: int) -> Any:
    """`nodes` nodes in MatMul -> Add -> Relu blocks on an [8, 64] activation, TorchScript-style node names."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.zeros((64, 64), dtype=np.float32), "w")
    bias = numpy_helper.from_array(np.zeros((64,), dtype=np.float32), "b")
    graph_nodes = []
    current = "x"
    for index in range(nodes):
        block, step = divmod(index, 3)
        out = f"v{index}"
        scope = f"/blocks/blocks.{block}/fc"
        if step == 0:
            graph_nodes.append(helper.make_node("MatMul", [current, "w"], [out], name=f"{scope}/MatMul"))
        elif step == 1:
            graph_nodes.append(helper.make_node("Add", [current, "b"], [out], name=f"{scope}/Add"))
        else:
            graph_nodes.append(helper.make_node("Relu", [current], [out], name=f"/blocks/blocks.{block}/act/Relu"))
        current = out
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, None)],
        initializer=[weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def linear_time(repeat: int) -> dict[str, Any]:
    from pytest_flopbudget import count

    results: dict[str, Any] = {}
    for nodes in (10_000, 100_000):
        model = synthetic_chain(nodes)
        report = count(model, inputs={"x": [8, 64]})
        blocks = nodes // 3
        expected_macs = blocks * 8 * 64 * 64 + (8 * 64 * 64 if nodes % 3 else 0)
        assert report.macs == expected_macs, (report.macs, expected_macs)
        seconds = median_seconds(lambda model=model: count(model, inputs={"x": [8, 64]}), max(1, repeat // 3))
        results[f"count_{nodes}_nodes_s"] = seconds
        results[f"us_per_node_{nodes}"] = 1e6 * seconds / nodes
    ratio = results["count_100000_nodes_s"] / results["count_10000_nodes_s"]
    results["time_ratio_100k_over_10k"] = ratio
    results["scaling_exponent"] = math.log10(ratio)  # 1.0 = linear, 2.0 = quadratic
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    sys.path.insert(0, str(ROOT))

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = export_resnet50(Path(tmp))
        results["resnet50_embedded_weights"] = resnet50_vs_onnx_tool(path, repeat)
    results["linear_time_synthetic_chain"] = linear_time(repeat)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
