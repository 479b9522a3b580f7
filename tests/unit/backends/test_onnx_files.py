"""The ONNX backend: a missing file located at the target key, shapes bound by input name, the graph's real inputs
(initializers excluded), and the PyTorch-only options `count()` refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._backends import CountOptions
from pytest_flopbudget._backends.onnx_files import OnnxFiles
from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import ModelEntry, load_settings
from pytest_flopbudget._errors import CountingError

onnx = pytest.importorskip("onnx")


def write_matmul(path: Path) -> None:
    """x[batch, 8] @ W[8, 4], W an initializer that is also listed as a graph input (older exporters do)."""
    from onnx import TensorProto, helper

    weight = helper.make_tensor("W", TensorProto.FLOAT, [8, 4], [0.0] * 32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
            helper.make_tensor_value_info("W", TensorProto.FLOAT, [8, 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def entry_for(root: Path, target: str, inputs: str) -> ModelEntry:
    (root / "pyproject.toml").write_text(
        f'[tool.flopbudget.models.m]\ntarget = "{target}"\ninputs = {inputs}\nflops = "1G"\n'
    )
    return load_settings(root / "pyproject.toml").models["m"]


def test_load_binds_shapes_by_name_and_count_counts_them(tmp_path: Path) -> None:
    write_matmul(tmp_path / "net.onnx")
    loaded = OnnxFiles().load(entry_for(tmp_path, "net.onnx", "{ x = [2, 8] }"), tmp_path)
    assert (loaded.model, loaded.args, loaded.kwargs) == (
        str(tmp_path.resolve() / "net.onnx"),
        (),
        {"inputs": {"x": [2, 8]}},
    )
    report = OnnxFiles().count(loaded)
    assert (report.macs, report.params, report.backend) == (64, 32, "onnx")


def test_a_missing_file_is_located_at_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LocatedError) as info:
        OnnxFiles().load(entry_for(tmp_path, "gone.onnx", "{ x = [1] }"), tmp_path)
    assert str(info.value) == (
        f"pyproject.toml:2: tool.flopbudget.models.m.target: no such ONNX file: {tmp_path.resolve() / 'gone.onnx'}"
    )


def test_input_names_are_the_real_inputs(tmp_path: Path) -> None:
    write_matmul(tmp_path / "net.onnx")
    assert OnnxFiles().input_names(str(tmp_path / "net.onnx")) == ["x"]


@pytest.mark.parametrize(
    ("args", "kwargs", "options"),
    [((1,), {}, CountOptions()), ((), {"x": 1}, CountOptions()), ((), {}, CountOptions(training=True))],
)
def test_pytorch_options_are_refused(tmp_path: Path, args: tuple, kwargs: dict, options: CountOptions) -> None:
    with pytest.raises(CountingError, match=r"^an ONNX model takes input shapes as inputs=\{'name': \[dims\]\}; "):
        OnnxFiles().count_model(str(tmp_path / "net.onnx"), args, kwargs, options)


def test_a_refusal_names_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The entry's location already names the file; the counter's resolved path is not repeated after it."""
    from pytest_flopbudget._cli import main

    write_matmul(tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    assert main(["count", "m.onnx"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("flopbudget: error: m.onnx: the sizes of some input dimensions are not known;")
    assert str(tmp_path) not in error and error.count("m.onnx") == 1
