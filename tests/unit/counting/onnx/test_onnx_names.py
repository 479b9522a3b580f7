"""Module paths recovered from what exporters leave in node names and metadata."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from pytest_flopbudget._counting.onnx.names import ModulePaths, module_of_parameter  # noqa: E402


def node(name: str = "", **metadata: str):
    proto = helper.make_node("Conv", ["x", "w"], ["y"], name=name)
    for key, value in metadata.items():
        proto.metadata_props.add(key=key.replace("__", "."), value=value)
    return proto


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("/layer1/layer1.0/conv1/Conv", "layer1.0.conv1"),  # Sequential item repeats its parent's name
        ("/layer2/layer2.0/downsample/downsample.0/Conv", "layer2.0.downsample.0"),
        ("/h.0/attn/c_attn/MatMul", "h.0.attn.c_attn"),  # ModuleList item: the list itself is never called
        ("/encoder/layers.1/mlp/mlp.0/MatMul", "encoder.layers.1.mlp.0"),
        ("/Add_3", ""),  # an op in the model's own forward
        ("/0/Conv", "0"),  # a bare nn.Sequential model
        ("sequential/dense/MatMul", "sequential.dense"),  # TensorFlow-style scopes
        ("node_Conv_17", "node_Conv_17"),  # nothing to recover: the node name itself
        ("", ""),
    ],
)
def test_names(name, path):
    assert ModulePaths().path(node(name)) == path


def test_known_parameter_paths_settle_ambiguous_torchscript_names():
    # `/blocks/blocks.0/..` is normally Sequential item 0; a ModuleList attribute also named `blocks` would give the
    # same component, and the parameter names tell which module really exists.
    assert ModulePaths().path(node("/blocks/blocks.0/Conv")) == "blocks.0"
    known = ModulePaths(["blocks.blocks.0"])
    assert known.path(node("/blocks/blocks.0/Conv")) == "blocks.blocks.0"


def test_dynamo_name_scopes():
    n = node("node_add", pkg__torch__onnx__name_scopes="['', 'layer1', 'layer1.0', 'add']")
    assert ModulePaths().path(n) == "layer1.0"
    root = node("node_add", pkg__torch__onnx__name_scopes="['', 'add']")
    assert ModulePaths().path(root) == ""


def test_dynamo_namespace_only():
    n = node("node_relu", namespace=": Net/layer1: Sequential/layer1.0: Block/relu: aten.relu.default")
    assert ModulePaths().path(n) == "layer1.0"


def test_metadata_wins_over_the_name():
    n = node("/wrong/Conv", pkg__torch__onnx__name_scopes="['', 'right', 'conv2d']")
    assert ModulePaths().path(n) == "right"


def test_batch_norm_folded_into_conv_goes_back_to_the_conv():
    """The rewrite that folds a batch norm keeps the norm's metadata on the conv; the conv's weight names it."""
    fused = node(
        "node_Conv_295",
        pkg__torch__onnx__name_scopes="['', 'layer1', 'layer1.0', 'layer1.0.bn1', '_native_batch_norm_legit_1']",
        pkg__onnxscript__rewriter__rule_name="RemoveOptionalBiasFromConv, FuseBatchNormIntoConv",
    )
    assert ModulePaths().path(fused, weight_module="layer1.0.conv1") == "layer1.0.conv1"
    plain = node("node_Gemm", pkg__torch__onnx__name_scopes="['', 'attn', 'linear']")
    assert ModulePaths().path(plain, weight_module="attn.out_proj") == "attn"  # only folding moves a node


def test_malformed_metadata_falls_back_to_the_name():
    n = node("/fc/Gemm", pkg__torch__onnx__name_scopes="not a list [")
    assert ModulePaths().path(n) == "fc"


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("layer1.0.conv1.weight", "layer1.0.conv1"),
        ("fc.bias", "fc"),
        ("onnx::Conv_193", None),
        ("val_3", None),
        ("model/dense/kernel:0", None),
        ("weight", None),
    ],
)
def test_module_of_parameter(name, module):
    assert module_of_parameter(name) == module
