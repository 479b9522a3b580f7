"""counting/torch/library_versions.py: a model library's version is recorded when the model is built from it."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from pytest_flopbudget._counting.torch.library_versions import model_library_versions  # noqa: E402


@pytest.fixture
def fake_transformers(monkeypatch: pytest.MonkeyPatch) -> type:
    """A stand-in `transformers` package (version 9.9.9) with one module class."""
    package = types.ModuleType("transformers")
    package.__version__ = "9.9.9"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", package)
    block = type("Block", (torch.nn.Module,), {"__module__": "transformers.models.tiny.modeling_tiny"})
    return block


def test_a_plain_model_records_no_library(fake_transformers: type) -> None:
    """transformers being imported is not transformers being used."""
    assert model_library_versions(torch.nn.Linear(2, 2)) == {}


def test_a_submodule_from_the_library_records_its_version(fake_transformers: type) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), fake_transformers())
    assert model_library_versions(model) == {"transformers": "9.9.9"}


def test_a_user_subclass_of_a_library_class_counts_as_using_it(fake_transformers: type) -> None:
    mine = type("Mine", (fake_transformers,), {"__module__": "my_project.models"})
    assert model_library_versions(mine()) == {"transformers": "9.9.9"}


def test_a_count_stamps_the_version_on_the_report(fake_transformers: type) -> None:
    from pytest_flopbudget._counting.torch.backend import count_torch

    class Wrapped(fake_transformers):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    report = count_torch(Wrapped(), (torch.randn(1, 4),), {})
    assert report.versions["transformers"] == "9.9.9"
    assert "transformers" not in count_torch(torch.nn.Linear(4, 4), (torch.randn(1, 4),), {}).versions
