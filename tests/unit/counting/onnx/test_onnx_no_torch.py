"""The ONNX path works with onnx installed and torch not: checked in a child process where `import torch` fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from no_torch import BLOCK_TORCH

pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[4]

CHILD = BLOCK_TORCH + textwrap.dedent(
    """
    import onnx
    from onnx import TensorProto, helper
    from pytest_flopbudget import count

    conv = helper.make_node("Conv", ["x", "w"], ["c"], name="/features/conv/Conv", pads=[1, 1, 1, 1])
    relu = helper.make_node("Relu", ["c"], ["y"], name="/features/relu/Relu")
    graph = helper.make_graph(
        [conv, relu], "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], b"\\0" * 432, raw=True)],
    )
    path = sys.argv[1]
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    report = count(path, inputs={"x": [2, 3, 8, 8]})
    print(json.dumps({"flops": report.flops, "macs": report.macs, "params": report.params,
                      "layers": sorted(report.layers), "torch_loaded": "torch" in sys.modules}))
    """
)


def test_counts_an_onnx_model_without_torch(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "net.onnx")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    # out [2,4,8,8] = 512 elements * 27 taps = 13824 MACs; relu 512
    assert summary == {
        "flops": 2 * 13824 + 512,
        "macs": 13824,
        "params": 108,
        "layers": ["features.conv", "features.relu"],
        "torch_loaded": False,
    }
