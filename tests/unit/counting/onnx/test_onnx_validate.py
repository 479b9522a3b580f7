"""ONNX graphs onnxruntime refuses are refused with one line naming the file and the node, not counted.

Each bad model differs from a good one in one detail (the good one counts, with its FLOPs derived by hand), so a
refusal is about that detail. The ONNX project's own backend test models, shipped with the onnx package, must all
still count.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._counting.onnx.backend import count_onnx
from pytest_flopbudget._errors import CountingError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

REFUSED = "onnxruntime refuses this graph"


def conv_model(onnx_model: Any, group: int, channels: int = 4, out_channels: int = 4, op: str = "Conv") -> Any:
    """X [1, channels, 5, 5] -> 1x1 conv, W [out, channels/group, 1, 1] (ConvTranspose: W [channels, out/group])."""
    per_group = max(channels // group, 1) if group > 0 else channels
    w = [out_channels, per_group, 1, 1] if op == "Conv" else [channels, max(out_channels // abs(group or 1), 1), 1, 1]
    node = helper.make_node(op, ["x", "w"], ["y"], name="/features/conv/Conv", group=group)
    return onnx_model([node], inputs={"x": [1, channels, 5, 5]}, inits={"w": w})


def one_line(exc: pytest.ExceptionInfo[CountingError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_valid_grouped_conv_counts(onnx_model: Any) -> None:
    # group 2, 4 -> 4 channels, 1x1 kernel, 5x5 output: MACs = N*M*(C/group)*H*W = 1*4*2*25 = 200, FLOPs = 2*200
    report = count_onnx(conv_model(onnx_model, group=2))
    assert (report.flops, report.macs) == (400, 200)


@pytest.mark.parametrize(
    ("group", "channels", "out_channels", "shown"),
    [
        (-1, 4, 4, "group = -1"),
        (0, 4, 4, "group = 0"),
        (3, 4, 3, "group = 3 must be a positive divisor of the input channels (4)"),  # 3 does not divide C_in = 4
        (2, 4, 3, "group = 2 must be a positive divisor of the input channels (4) and the output channels (3)"),
    ],
)
def test_conv_with_an_impossible_group_is_refused(
    onnx_model: Any, group: int, channels: int, out_channels: int, shown: str
) -> None:
    with pytest.raises(CountingError) as exc:
        count_onnx(conv_model(onnx_model, group, channels, out_channels))
    line = one_line(exc)
    assert line.startswith("<ModelProto test>: node '/features/conv/Conv' (Conv): ")
    assert shown in line and REFUSED in line


@pytest.mark.parametrize("group", [-1, 3])
def test_conv_transpose_with_an_impossible_group_is_refused(onnx_model: Any, group: int) -> None:
    """X [1, 4, 5, 5]: group -1, or 3 (not a divisor of C_in = 4); shape inference already refuses these."""
    with pytest.raises(CountingError, match=r"/features/conv/Conv.*group") as exc:
        count_onnx(conv_model(onnx_model, group=group, out_channels=3, op="ConvTranspose"))
    one_line(exc)


def test_two_nodes_writing_one_value_are_refused(onnx_model: Any) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="first"),
        helper.make_node("Sigmoid", ["x"], ["y"], name="second"),
    ]
    with pytest.raises(CountingError) as exc:
        count_onnx(onnx_model(nodes, inputs={"x": [2, 3]}, outputs=["y"]))
    assert one_line(exc) == (
        "<ModelProto test>: node 'second' (Sigmoid) writes 'y', already written by node 'first' (Relu); every value "
        "of an ONNX graph is defined once (onnxruntime refuses this graph): fix the exporter or the edit that wrote it"
    )


def test_a_node_writing_a_graph_input_is_refused(onnx_model: Any) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="inplace")]
    with pytest.raises(CountingError, match=r"node 'inplace' \(Relu\) writes 'x', already written by a graph input"):
        count_onnx(onnx_model(nodes, inputs={"x": [2, 3]}, outputs=["x"]))


def test_a_graph_output_listed_twice_is_refused(onnx_model: Any) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    with pytest.raises(CountingError, match=r"the graph output 'y' is listed twice"):
        count_onnx(onnx_model(nodes, inputs={"x": [2, 3]}, outputs=["y", "y"]))


def test_a_duplicate_inside_an_if_branch_is_refused(onnx_model: Any) -> None:
    def branch(name: str) -> Any:
        return helper.make_graph(
            [helper.make_node("Relu", ["x"], ["t"], name=f"{name}1"),
             helper.make_node("Neg", ["x"], ["t"], name=f"{name}2")],
            name, [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
        )  # fmt: skip

    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("then"), else_branch=branch("else"))
    model = onnx_model([node], inputs={"c": (TensorProto.BOOL, []), "x": [2, 3]})
    with pytest.raises(CountingError, match=r"node '(then|else)2' \(Neg\) writes 't', already written by node"):
        count_onnx(model)


def test_what_the_checker_finds_is_refused_in_one_line(onnx_model: Any) -> None:
    """An attribute of the wrong type: onnx.checker's finding, in one line."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    node.attribute.append(helper.make_attribute("alpha", "not a number"))  # Relu has no attributes at all
    leaky = helper.make_node("LeakyRelu", ["y"], ["z"], name="leaky")
    leaky.attribute.append(helper.make_attribute("alpha", "zero"))  # a string where a float belongs
    with pytest.raises(CountingError) as exc:
        count_onnx(onnx_model([node, leaky], inputs={"x": [2, 3]}))
    line = one_line(exc)
    assert line.startswith("<ModelProto test>: not a valid ONNX model (onnx.checker: ")


def test_the_checker_never_reads_external_weights(onnx_model: Any, tmp_path: Path) -> None:
    """A model whose weights live in a data file that is not there (never downloaded) still counts."""
    # MatMul [2, 8] @ [8, 4]: 2*8*4 = 64 MACs, 128 FLOPs; the weight's 32 parameters come from its dims
    model = onnx_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], inputs={"x": [2, 8]},
                       inits={"w": [8, 4]})  # fmt: skip
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    os.unlink(tmp_path / "m.onnx.data")
    report = count_onnx(path)
    assert (report.flops, report.macs, report.params) == (128, 64, 32)


BACKEND_MODELS = sorted(
    glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "**", "*.onnx"), recursive=True)
)


@pytest.mark.skipif(not BACKEND_MODELS, reason="this onnx build ships no backend test models")
def test_the_onnx_backend_test_models_are_not_refused() -> None:
    """Every model of the ONNX project's backend tests is one onnxruntime runs: none may be refused as invalid."""
    refused = []
    for path in BACKEND_MODELS:
        try:
            count_onnx(path)
        except CountingError as exc:
            if REFUSED in str(exc) or "not a valid ONNX model" in str(exc):
                refused.append(f"{path}: {exc}")
    assert refused == []
    assert len(BACKEND_MODELS) > 100
