"""Which backend takes a target or a model: PyTorch references and modules, ONNX paths and protos, the message for
what no backend takes, and a third backend used by registering it alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._backends import (
    CountOptions,
    Loaded,
    backend_for,
    backend_for_model,
    backend_for_target,
    count,
    count_entry,
    entry_counter,
    registry,
)
from pytest_flopbudget._backends.protocol import SymbolicCount
from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import LocatedError, Location
from pytest_flopbudget._config.pyproject import InputSpec, ModelEntry
from pytest_flopbudget._counting.symbolic import PointsOnly
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report
from pytest_flopbudget.backends import Backend


def entry(target: str, inputs: Any = None) -> ModelEntry:
    return ModelEntry(name="m", target=target, inputs=inputs, budget=Budget(), source=Location(key="m"))


# -- the two backends ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["pkg.models:resnet", "pkg:build.model"])
def test_a_python_reference_is_torchs(target: str) -> None:
    backend = backend_for_target(target)
    assert backend is not None and backend.name == "torch" and not backend.files
    assert backend_for(entry(target)) is backend


@pytest.mark.parametrize("target", ["model.onnx", "graphs/Net.ONNX", "pkg.models:net.onnx"])
def test_an_onnx_path_is_onnxs_even_when_it_reads_as_a_reference(target: str) -> None:
    backend = backend_for_target(target)
    assert backend is not None and backend.name == "onnx" and backend.files
    assert backend_for(entry(target)) is backend


def test_a_module_object_is_torchs() -> None:
    torch = pytest.importorskip("torch")
    backend = backend_for_model(torch.nn.Linear(2, 2))
    assert backend is not None and backend.name == "torch"


def test_an_onnx_path_or_proto_object_is_onnxs() -> None:
    onnx = pytest.importorskip("onnx")
    for model in ("m.onnx", Path("m.onnx"), onnx.ModelProto()):
        backend = backend_for_model(model)
        assert backend is not None and backend.name == "onnx", model


@pytest.mark.parametrize("target", ["model.pt", "resnet", "pkg.models"])
def test_a_target_no_backend_takes_is_located(target: str) -> None:
    assert backend_for_target(target) is None
    with pytest.raises(LocatedError) as info:
        backend_for(entry(target))
    assert str(info.value).endswith(
        f'm: {target!r} is not a target; expected "package.module:factory" (returning a torch.nn.Module, or the '
        f"module itself), a path to a SavedModel directory or a path to an .onnx file"
    )


@pytest.mark.parametrize(("model", "shown"), [(42, "int 42"), ("model.pt", "str 'model.pt'"), (b"x", "bytes b'x'")])
def test_a_model_no_backend_takes_is_refused_by_count(model: object, shown: str) -> None:
    assert backend_for_model(model) is None
    with pytest.raises(CountingError) as info:
        count(model)
    assert str(info.value) == (
        f"count() needs a torch.nn.Module, a Flax module or JAX function, a Keras model or tf.function, a path to "
        f"an .onnx file or a SavedModel directory, or an onnx.ModelProto; got {shown}"
    )


# -- a third backend -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class FakeModel:
    name: str


class FakeFiles(Backend):
    """`.fake` files and `FakeModel` objects; each count is recorded (the optional members inherited)."""

    name = "fake"
    framework = "Fake"
    grammar = "a path to a .fake file"
    files = True
    suffixes = (".fake",)

    def __init__(self) -> None:
        self.counted: list[tuple[Any, dict[str, Any]]] = []

    def accepts(self, target: str) -> bool:
        return target.endswith(".fake")

    def accepts_model(self, model: object) -> bool:
        return isinstance(model, FakeModel)

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        return Loaded(entry, FakeModel(str(root / entry.target)), kwargs={"inputs": entry.inputs})

    def count(self, loaded: Loaded) -> Report:
        return self.count_model(loaded.model, (), {}, CountOptions(inputs=loaded.kwargs["inputs"]))

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        self.counted.append((model, {"args": args, "kwargs": kwargs, "inputs": options.inputs}))
        return Report(model=model.name, backend=self.name)

    def input_names(self, path: str) -> list[str]:
        return ["image", "mask"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeFiles:
    backend = FakeFiles()
    monkeypatch.setattr(registry, "_backends", registry._ordered([backend, *registry.backends()]))
    return backend


def test_a_registered_backend_is_chosen_for_its_targets_and_models(fake: FakeFiles) -> None:
    assert backend_for_target("net.fake") is fake and backend_for(entry("net.fake")) is fake
    assert backend_for_model(FakeModel("x")) is fake
    others = backend_for_target("pkg.models:net"), backend_for_target("net.onnx")
    assert [backend.name if backend else None for backend in others] == ["torch", "onnx"]


def test_a_registered_backend_loads_and_counts_entries(fake: FakeFiles, tmp_path: Path) -> None:
    report = count_entry(entry("net.fake", {"image": InputSpec((1, 3))}), tmp_path)
    assert (report.model, report.backend) == (str(tmp_path / "net.fake"), "fake")
    assert fake.counted == [
        (FakeModel(str(tmp_path / "net.fake")), {"args": (), "kwargs": {}, "inputs": {"image": InputSpec((1, 3))}})
    ]


def test_a_registered_backend_counts_for_the_public_count(fake: FakeFiles) -> None:
    report = count(FakeModel("direct"), 1, 2, flag=True, inputs={"x": [1]})
    assert report.model == "direct"
    assert fake.counted == [(FakeModel("direct"), {"args": (1, 2), "kwargs": {"flag": True}, "inputs": {"x": [1]}})]


def test_a_registered_file_backend_binds_command_line_shapes_by_its_input_names(
    fake: FakeFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_flopbudget._cli.count import CountRequest, resolve_target

    monkeypatch.chdir(tmp_path)
    counted, root = resolve_target(CountRequest(target="net.fake", input=["1,3", "1,1"]))
    assert root == Path.cwd()
    assert counted.inputs == {"image": InputSpec((1, 3)), "mask": InputSpec((1, 1))}


# -- the optional symbolic count -------------------------------------------------------------------------------------


def test_a_backend_without_a_symbolic_count_counts_at_points(fake: FakeFiles, tmp_path: Path) -> None:
    """`count_symbolic` came after third parties wrote backends: one that lacks it is no less a backend, and its
    curves interpolate point counts."""
    assert set(registry.OPTIONAL_MEMBERS).isdisjoint(registry.MEMBERS)
    assert all(hasattr(SymbolicCount, member) for member in registry.OPTIONAL_MEMBERS)  # each one described
    assert not hasattr(fake, "count_symbolic") and all(hasattr(fake, member) for member in registry.MEMBERS)
    counter = entry_counter(entry("net.fake"), tmp_path)
    with pytest.raises(PointsOnly, match=r"^the fake backend counts at points only$"):
        counter.symbolic(entry("net.fake"), ("seq",))
    assert len(fake.counted) == 1  # the entry was loaded and counted once, to find its backend
