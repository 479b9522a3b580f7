"""Both backends agree on what a FLOP is: random layer configurations, counted as torch modules and as ONNX nodes.

The ONNX graphs are built directly with onnx.helper (no export), so each example costs milliseconds.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

SETTINGS = settings(max_examples=12, deadline=None)


def onnx_costs(node: Any, x_shape: list[int], inits: dict[str, list[int]], opset: int = 17) -> tuple[int, int]:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, d, [0.0] * _numel(d)) for n, d in inits.items()],
    )
    report = count(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    assert report.skipped == {}
    return report.flops, report.macs


def torch_costs(module: Any, x_shape: list[int]) -> tuple[int, int]:
    report = count(module.eval(), torch.randn(x_shape))
    assert report.skipped == {}
    return report.flops, report.macs


def _numel(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


@st.composite
def conv_configs(draw: Any) -> dict[str, Any]:
    groups = draw(st.integers(1, 3))
    return {
        "groups": groups,
        "in_channels": groups * draw(st.integers(1, 3)),
        "out_channels": groups * draw(st.integers(1, 3)),
        "kernel": draw(st.integers(1, 3)),
        "stride": draw(st.integers(1, 2)),
        "padding": draw(st.integers(0, 2)),
        "dilation": draw(st.integers(1, 2)),
        "bias": draw(st.booleans()),
        "size": draw(st.integers(5, 9)),
    }


@SETTINGS
@given(conv_configs())
def test_conv2d(c):
    module = torch.nn.Conv2d(
        c["in_channels"],
        c["out_channels"],
        c["kernel"],
        c["stride"],
        c["padding"],
        c["dilation"],
        c["groups"],
        c["bias"],
    )
    x = [1, c["in_channels"], c["size"], c["size"]]
    node = helper.make_node(
        "Conv",
        ["x", "w", "b"] if c["bias"] else ["x", "w"],
        ["y"],
        group=c["groups"],
        strides=[c["stride"]] * 2,
        pads=[c["padding"]] * 4,
        dilations=[c["dilation"]] * 2,
    )
    inits = {"w": list(module.weight.shape), **({"b": [c["out_channels"]]} if c["bias"] else {})}
    assert onnx_costs(node, x, inits) == torch_costs(module, x)


@SETTINGS
@given(conv_configs())
def test_conv_transpose2d(c):
    module = torch.nn.ConvTranspose2d(
        c["in_channels"],
        c["out_channels"],
        c["kernel"],
        c["stride"],
        c["padding"],
        groups=c["groups"],
        bias=c["bias"],
        dilation=c["dilation"],
    )
    x = [1, c["in_channels"], c["size"], c["size"]]
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"] if c["bias"] else ["x", "w"],
        ["y"],
        group=c["groups"],
        strides=[c["stride"]] * 2,
        pads=[c["padding"]] * 4,
        dilations=[c["dilation"]] * 2,
    )
    inits = {"w": list(module.weight.shape), **({"b": [c["out_channels"]]} if c["bias"] else {})}
    if min(torch_shape(module, x)) <= 0:
        return
    torch_flops, torch_macs = torch_costs(module, x)
    flops, macs = onnx_costs(node, x, inits)
    assert macs == torch_macs
    # the PyTorch backend's convolution formula adds its bias separately only when the kernel gets one
    assert flops == torch_flops


def torch_shape(module: Any, x: list[int]) -> list[int]:
    with torch.no_grad():
        return list(module(torch.zeros(x)).shape)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 16), st.integers(1, 16), st.booleans())
def test_linear(rows, features_in, features_out, bias):
    module = torch.nn.Linear(features_in, features_out, bias=bias)
    node = helper.make_node("Gemm", ["x", "w", "b"] if bias else ["x", "w"], ["y"], transB=1)
    inits = {"w": [features_out, features_in], **({"b": [features_out]} if bias else {})}
    assert onnx_costs(node, [rows, features_in], inits) == torch_costs(module, [rows, features_in])


@SETTINGS
@given(
    st.sampled_from(["MaxPool", "AveragePool"]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 1),
    st.integers(4, 9),
)
def test_pool2d(op, kernel, stride, padding, size):
    if padding * 2 > kernel:
        return
    module_type = torch.nn.MaxPool2d if op == "MaxPool" else torch.nn.AvgPool2d
    module = module_type(kernel, stride, padding)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=[padding] * 4)
    x = [1, 2, size, size]
    assert onnx_costs(node, x, {}) == torch_costs(module, x)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 8), st.integers(2, 16), st.booleans())
def test_layer_norm_and_softmax(batch, seq, width, bias):
    module = torch.nn.LayerNorm(width, bias=bias)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"] if bias else ["x", "s"], ["y"], axis=-1)
    inits = {"s": [width], **({"b": [width]} if bias else {})}
    x = [batch, seq, width]
    assert onnx_costs(node, x, inits) == torch_costs(module, x)
    softmax = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    assert onnx_costs(softmax, x, {}) == torch_costs(torch.nn.Softmax(dim=-1), x)
