"""Verdicts for reporter tests, made by the real core: a pyproject.toml parsed by `config`, judged by `check`.

Budgets, their file and line, and the findings all come from the production code, so a change in the core's
messages or sources shows up here as a failing golden test rather than passing against a stale mock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import parse_budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.pyproject import Settings, load_settings
from pytest_flopbudget._judge.verdict import Measurement, Verdict, evaluate
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report, SkippedOp


def build_report(layers: dict[str, int], skipped: dict[str, int] | None = None, params: int | None = None) -> Report:
    """A Report from layer path -> FLOPs (MACs are half, one parameter per layer), skipped ops on the root."""
    costs = {path: LayerCost(flops=f, macs=f // 2, params=1) for path, f in layers.items()}
    if params is not None and layers:  # a Report's params are its layers' sum: the first layer holds the rest
        first = next(iter(layers))
        costs[first] = LayerCost(flops=layers[first], macs=layers[first] // 2, params=params - len(layers) + 1)
    skipped_ops = {}
    for op, calls in (skipped or {}).items():
        costs.setdefault("", LayerCost()).skipped[op] = calls
        skipped_ops[op] = SkippedOp(calls, [""])
    return Report(
        layers=costs,
        forward=PhaseTotals(flops=sum(layers.values()), macs=sum(f // 2 for f in layers.values())),
        skipped_ops=skipped_ops,
    )


@dataclass
class Project:
    """A project directory with a pyproject.toml; `verdict` judges a Report against one of its models."""

    root: Path
    settings: Settings

    def verdict(self, name: str, now: Report, baseline: Report | None = None) -> Verdict:
        entry = self.settings.models[name]
        measurement = Measurement(name, now, entry.budget, entry.source, f"pyproject.toml::{name}")
        return evaluate(measurement, baseline, baseline_file=f".flopbudget/{name}.json")

    def marker_verdict(
        self, test_file: str, line: int, test: str, now: Report, baseline: Report | None = None, **budget: object
    ) -> Verdict:
        """As the plugin judges a marker: the budget's source is the test function's line."""
        origin = Location(str(self.root / test_file), line, test)
        sources = {slot: Location(origin.file, line, f"{test}: flop_budget({slot}=...)") for slot in budget}
        name = f"tests.{test}"
        measurement = Measurement(name, now, parse_budget(budget, sources, origin), origin, f"{test_file}::{test}")
        return evaluate(measurement, baseline, baseline_file=f".flopbudget/{name}.json")


@pytest.fixture
def make_report() -> Callable[..., Report]:
    """`make_report({"layer": flops}, skipped={"aten.op": calls})` -> Report (see `build_report`)."""
    return build_report


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    """`make_project(pyproject_text, subdir="")` writes the file and loads it with the real config parser."""

    def make(text: str, subdir: str = "") -> Project:
        root = tmp_path / subdir if subdir else tmp_path
        root.mkdir(parents=True, exist_ok=True)
        pyproject = root / "pyproject.toml"
        pyproject.write_text(text, encoding="utf-8")
        return Project(root, load_settings(pyproject))

    return make
