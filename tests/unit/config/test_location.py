"""Where a budget, a model or a problem was declared, and which kind of place that is
(pytest_flopbudget/_config/location.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError, Location, Origin
from pytest_flopbudget._config.pyproject import load_settings, parse_settings


def test_every_pyproject_location_says_it_is_in_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.flopbudget.models.net]\ntarget = "m:net"\ninputs = [[1, 8]]\nflops = "1k"\n')
    settings = load_settings(pyproject)
    entry = settings.models["net"]
    assert settings.source.origin is Origin.PYPROJECT
    assert entry.source.origin is Origin.PYPROJECT
    limit = entry.budget.limit("flops")
    assert limit is not None and limit.source.origin is Origin.PYPROJECT
    assert not limit.source.marker


def test_a_problem_of_the_whole_file_is_in_pyproject(tmp_path: Path) -> None:
    with pytest.raises(LocatedError) as raised:
        parse_settings("[tool.flopbudget\n", tmp_path / "pyproject.toml")
    assert raised.value.problems[0].source.origin is Origin.PYPROJECT


def test_a_marker_argument_is_in_a_marker() -> None:
    assert Location("t.py", 3, "test_x: flop_budget(flops=...)", ("flops",), marker=True).origin is Origin.MARKER
    with pytest.raises(ValueError, match="in a marker"):
        Location("t.py", 3, "k", ("flops",), marker=True, origin=Origin.PYPROJECT)


def test_the_origin_travels_with_the_location_and_prints_nowhere() -> None:
    for origin in (*Origin, None):
        location = Location("/p/pyproject.toml", 3, "a.b", origin=origin)
        assert Location.from_dict(location.to_dict()) == location
        assert location.where("/p") == "pyproject.toml:3: a.b"
    assert Location.from_dict({"file": None, "line": None, "key": ""}).origin is None
    assert Location(origin=Origin.TEST).to_dict()["origin"] == "test"
