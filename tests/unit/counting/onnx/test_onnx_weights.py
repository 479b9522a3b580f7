"""Weights are never read: parameters come from initializer dims, and external data files are never opened."""

from __future__ import annotations

import os

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

GIB = 2**30


def external(name: str, dims: list[int], location: str, offset: int = 0) -> onnx.TensorProto:
    """A float initializer whose data lives in `location` (relative to the model), without writing any data."""
    proto = onnx.TensorProto()
    proto.name = name
    proto.data_type = TensorProto.FLOAT
    proto.dims.extend(dims)
    proto.data_location = onnx.TensorProto.EXTERNAL
    length = 4
    for d in dims:
        length *= d
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = proto.external_data.add()
        entry.key, entry.value = key, value
    return proto


def test_huge_external_data_is_never_opened(tmp_path, onnx_model):
    """A 4 GiB weight in an external file (sparse on disk): the count needs only the dims, and still works after
    the file is deleted, i.e. it never opened it."""
    data = tmp_path / "weights.bin"
    with open(data, "wb") as handle:
        handle.truncate(4 * GIB)  # sparse: no disk space, but a real 4 GiB file
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/lm_head/MatMul")
    model = onnx_model([node], inputs={"x": [1, 32768]}, inits={"w": external("w", [32768, 32768], data.name)})
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    expected = (2 * 32768 * 32768, 32768 * 32768, 32768 * 32768)  # 1 row x 32768 x 32768: MACs = params = 2**30
    report = count(str(path))
    assert (report.flops, report.macs, report.params) == expected
    os.remove(data)
    report = count(str(path))
    assert (report.flops, report.macs, report.params) == expected
    assert report.layers["lm_head"].params == 32768 * 32768


def test_exported_external_data_file_deleted(tmp_path, onnx_model):
    """The usual layout written by `onnx.save(..., save_as_external_data=True)`, with the data file then removed."""
    import numpy as np
    from onnx import numpy_helper

    weight = numpy_helper.from_array(np.ones((64, 32), dtype=np.float32), "fc.weight")
    node = helper.make_node("Gemm", ["x", "fc.weight"], ["y"], name="/fc/Gemm", transB=1)
    model = onnx_model([node], inputs={"x": [4, 32]}, inits={"fc.weight": weight})
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    (tmp_path / "model.onnx.data").unlink()
    with pytest.raises((OSError, onnx.checker.ValidationError)):  # loading the weights would fail now
        onnx.load(str(path))
    report = count(path)
    assert (report.macs, report.params) == (4 * 64 * 32, 64 * 32)
    assert report.layers["fc"].params == 2048


def test_parameter_rules(onnx_model):
    """Counted: float weights read by some node, once each. Not counted: a batch norm's running statistics
    (buffers), int64 shape data, 0-d scalar constants, and initializers no node reads."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 32])
    eps = helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv"),
        helper.make_node(
            "BatchNormalization",
            ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
            ["b"],
            name="/bn/BatchNormalization",
        ),
        helper.make_node("Reshape", ["b", "shape"], ["r"], name="/Reshape"),
        helper.make_node("Add", ["r", "eps"], ["e"], name="/Add"),
        helper.make_node("MatMul", ["e", "onnx::MatMul_7"], ["m1"], name="/head/MatMul"),
        helper.make_node("MatMul", ["m1", "onnx::MatMul_7"], ["y"], name="/head2/MatMul"),  # shared weight
    ]
    inits = {
        "conv.weight": [8, 3, 1, 1],
        "bn.weight": [8],
        "bn.bias": [8],
        "bn.running_mean": [8],
        "bn.running_var": [8],
        "shape": shape,
        "eps": eps,
        "onnx::MatMul_7": [32, 32],
        "unused.weight": [100],
    }
    report = count(onnx_model(nodes, inputs={"x": [1, 3, 2, 2]}, inits=inits))
    # conv 24 + bn scale and shift 16 + the shared 32x32 matrix once (1024)
    assert report.params == 24 + 16 + 1024
    # named weights go to the module their name gives; generated names to their first reader's module
    assert {p: layer.params for p, layer in report.layers.items() if layer.params} == {
        "conv": 24,
        "bn": 16,
        "head": 1024,
    }
