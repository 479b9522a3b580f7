"""The small ONNX model and its pyproject.toml that the end-to-end tests of ONNX-only projects (no torch) share.

A plain module (not a conftest): pytest's prepend import mode puts this directory on sys.path, so the test files
beside it import it directly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: The pyproject.toml for `net.onnx`: 4 channels fit the 30k FLOPs budget, 16 channels do not.
NET_PYPROJECT = '[tool.flopbudget.models.net]\ntarget = "net.onnx"\ninputs = { x = [2, 3, 8, 8] }\nflops = "30k"\n'


def write_onnx(path: Path, channels: int = 4) -> None:
    """Conv(3 -> channels, 3x3) + ReLU on [batch, 3, 8, 8], with node names that map to module paths."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [channels, 3, 3, 3], b"\0" * (4 * 27 * channels), raw=True)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="/features/conv/Conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="/features/relu/Relu"),
        ],
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
