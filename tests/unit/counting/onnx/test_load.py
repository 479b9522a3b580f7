"""Reading an ONNX model without its weights (`counting/onnx/load.py`): what is accepted, and the one-line error
for everything that is not a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget._counting.onnx.load import load_model, opset_versions  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


def relu_model(name: str = "net", opsets: tuple[tuple[str, int], ...] = (("", 17),)) -> Any:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_a_file_and_a_proto_load_with_their_labels(tmp_path: Path) -> None:
    path = tmp_path / "net.onnx"
    onnx.save(relu_model(), str(path))
    proto, label = load_model(path)
    assert label == str(path) and proto.graph.node[0].op_type == "Relu"
    assert load_model(str(path))[1] == str(path)
    model = relu_model("tiny")
    assert load_model(model) == (model, "<ModelProto tiny>")
    assert load_model(relu_model(""))[1] == "<ModelProto unnamed>"


def test_external_weights_are_not_opened(tmp_path: Path) -> None:
    model = relu_model()
    model.graph.initializer.append(helper.make_tensor("w", TensorProto.FLOAT, [256], b"\0" * 1024, raw=True))
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="big.onnx.data", size_threshold=0)
    (tmp_path / "big.onnx.data").unlink()  # counting from the graph alone must not need it
    proto, _ = load_model(path)
    assert list(proto.graph.initializer[0].dims) == [256]


def test_paths_that_are_not_models(tmp_path: Path) -> None:
    with pytest.raises(CountingError, match=r"missing\.onnx: no such ONNX file; check the path \(relative paths"):
        load_model(tmp_path / "missing.onnx")
    with pytest.raises(CountingError, match=r": is a directory, not an \.onnx file$"):
        load_model(tmp_path)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(CountingError, match=r"garbage\.onnx: not a readable ONNX model \(\w+"):
        load_model(garbage)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")  # parses as an empty message: no graph, no IR version
    with pytest.raises(CountingError, match=r"empty\.onnx: not an ONNX model \(no graph or no IR version\)"):
        load_model(empty)


def test_a_proto_without_opsets_or_a_wrong_type_is_refused() -> None:
    with pytest.raises(CountingError, match=r"<ModelProto net>: the model declares no opset_import"):
        load_model(relu_model(opsets=()))
    with pytest.raises(CountingError, match=r"needs a path to an \.onnx file or an onnx\.ModelProto, got int"):
        load_model(42)


def test_opset_versions_fold_ai_onnx_into_the_default_domain() -> None:
    model = relu_model(opsets=(("ai.onnx", 13), ("com.microsoft", 1)))
    assert opset_versions(model) == {"": 13, "com.microsoft": 1}
