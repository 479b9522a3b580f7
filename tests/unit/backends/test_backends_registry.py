"""The backend registry: the bundled backends, ordered by priority, and third parties' entry points, a broken one
costing one line on stderr and nothing else."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._backends import registry
from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import parse_settings
from pytest_flopbudget._config.target_kinds import article, honouring, joined, target_grammar
from pytest_flopbudget.backends import Backend, Loaded, ModelEntry
from pytest_flopbudget.formulas import register_formula


class Toy(Backend):
    name = "toy"
    framework = "toy"
    grammar = "a path to a .toy file"
    files = True
    suffixes = (".toy",)
    honours = frozenset({"training"})

    def accepts(self, target: str) -> bool:
        return target.endswith(".toy")

    def accepts_model(self, model: object) -> bool:
        return False

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        raise NotImplementedError

    def count(self, loaded: Loaded) -> Any:
        raise NotImplementedError

    def count_model(self, model: Any, args: Any, kwargs: Any, options: Any) -> Any:
        raise NotImplementedError


class Named:
    """An object that is no backend."""

    name = "named"


def _boom() -> None:
    raise RuntimeError("factory failed\nsecond line")


#: The bundled backends and the toy, in the order they are asked.
WITH_TOY = ["onnx", "savedmodel", "toy", "jax", "tensorflow", "torch"]


def points(monkeypatch: pytest.MonkeyPatch, *found: EntryPoint) -> None:
    monkeypatch.setattr(registry, "_entry_points", lambda: list(found))
    monkeypatch.setattr(registry, "_backends", None)


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name, value, registry.GROUP)


def test_the_bundled_backends_are_there_without_metadata_onnx_first(monkeypatch: pytest.MonkeyPatch) -> None:
    points(monkeypatch)
    assert [backend.name for backend in registry.backends()] == ["onnx", "savedmodel", "jax", "tensorflow", "torch"]
    assert [backend.name for backend in registry.general_first()] == [
        "torch", "jax", "tensorflow", "savedmodel", "onnx"
    ]  # fmt: skip


def test_the_bundled_entry_points_are_the_bundled_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    points(
        monkeypatch,
        point("torch", "pytest_flopbudget._backends.torch_models:TorchModels"),
        point("onnx", "pytest_flopbudget._backends.onnx_files:OnnxFiles"),
        point("savedmodel", "pytest_flopbudget._backends.saved_models:SavedModels"),
        point("tensorflow", "pytest_flopbudget._backends.tensorflow_models:TensorflowModels"),
    )
    assert [backend.name for backend in registry.backends()] == ["onnx", "savedmodel", "jax", "tensorflow", "torch"]


def test_a_third_party_backend_is_asked_by_priority_and_joins_the_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    points(monkeypatch, point("toy", f"{__name__}:Toy"))
    assert [backend.name for backend in registry.backends()] == WITH_TOY
    assert target_grammar() == (
        '"package.module:factory" (returning a torch.nn.Module, or the module itself), a path to a .toy file, a '
        "path to a SavedModel directory or a path to an .onnx file"
    )
    assert honouring("training") == "PyTorch, JAX, TensorFlow or toy"
    assert honouring("method") == "PyTorch"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("toy_nowhere:Backend", "ModuleNotFoundError: No module named 'toy_nowhere'"),
        (f"{__name__}:Missing", f"AttributeError: module {__name__!r} has no attribute 'Missing'"),
        (f"{__name__}:_boom", "RuntimeError: factory failed"),
        (f"{__name__}:Named", "TypeError: Named is no Backend: it lacks framework, grammar, priority, files"),
    ],
)
def test_a_broken_entry_point_costs_one_line_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str, why: str
) -> None:
    points(monkeypatch, point("broken", value), point("toy", f"{__name__}:Toy"))
    assert [backend.name for backend in registry.backends()] == WITH_TOY
    err = capsys.readouterr().err
    assert err.startswith(
        f"flopbudget: backend entry point 'broken = {value}' (pytest_flopbudget.backends) of an unknown "
        f"distribution: not loaded: {why}"
    )
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_entry_point_listed_twice_is_one_backend(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    points(monkeypatch, point("toy", f"{__name__}:Toy"), point("toy", f"{__name__}:Toy"))
    assert [backend.name for backend in registry.backends()] == WITH_TOY
    assert capsys.readouterr().err == ""


def test_a_name_is_taken_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    points(monkeypatch, point("torch", f"{__name__}:Toy"))
    assert [backend.name for backend in registry.backends()] == ["onnx", "savedmodel", "jax", "tensorflow", "torch"]
    assert "not loaded: ValueError: the name 'torch' is taken by another backend" in capsys.readouterr().err


def test_registering_a_formula_for_a_backend_without_a_table_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    points(monkeypatch, point("toy", f"{__name__}:Toy"))
    with pytest.raises(ValueError) as info:
        register_formula("toy.op", lambda node: (0, 0), backend="toy")
    assert str(info.value) == (
        "register_formula: the toy backend has no formula table (it counts its ops itself); formulas can be "
        "registered for 'torch', 'jax', 'tensorflow', 'savedmodel' or 'onnx'"
    )


@pytest.mark.parametrize(
    ("word", "expected"),
    [("ONNX", "an ONNX"), ("PyTorch", "a PyTorch"), ("JAX", "a JAX"), ("toy", "a toy"), ("MLX", "an MLX")],
)
def test_article(word: str, expected: str) -> None:
    assert article(word) == expected


def test_joined() -> None:
    assert [joined([]), joined(["a"]), joined(["a", "b"]), joined(["a", "b", "c"])] == ["", "a", "a or b", "a, b or c"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("training = true", []),  # honoured
        (
            'execution = "real"',
            ["execution: execution applies to PyTorch targets only, not to toy files"],
        ),
        ('method = "decode"', ["method: method applies to PyTorch targets only, not to toy files"]),
        ("generate = 3", ["generate: generate applies to PyTorch inference targets, not to toy files"]),
        (
            'inputs = {x = {shape = [4, 6], dtype = "int64"}}',
            ["inputs.x.dtype: a toy graph declares its own input dtypes; give the shape only"],
        ),
        (
            "inputs = [[4, 6]]",
            ["inputs: a toy target takes a table of input name = shape, e.g. {input = [1, 3, 224, 224]}"],
        ),
    ],
)
def test_a_third_partys_entry_is_validated_by_what_its_backend_honours(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str, expected: list[str]
) -> None:
    points(monkeypatch, point("toy", f"{__name__}:Toy"))
    text = f'[tool.flopbudget.models.m]\ntarget = "net.toy"\nflops = 1\n{body}\n'
    found: list[str] = []
    try:
        parse_settings(text, tmp_path / "pyproject.toml")
    except LocatedError as exc:
        found = [f"{p.source.key[len('tool.flopbudget.models.m.') :]}: {p.message}" for p in exc.problems]
    assert found == expected
