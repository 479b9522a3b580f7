"""The budget a `flop_budget` marker sets on a test (pytest_flopbudget/_plugin/marker.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_flopbudget._config.location import Location, Origin
from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._plugin.failures import Failure
from pytest_flopbudget._plugin.marker import MARKER_HELP, marker_budget


def budget_of(tmp_path: Path, *args: Any, models: dict | None = None, **kwargs: Any) -> tuple[str, Any]:
    test = tmp_path / "test_net.py"
    test.write_text("import pytest\n\n@pytest.mark.flop_budget()\ndef test_net(flopbudget):\n    pass\n")
    item: Any = SimpleNamespace(name="test_net", nodeid="test_net.py::test_net")
    marker = pytest.mark.flop_budget(*args, **kwargs).mark
    return marker_budget(item, marker, Location(str(test), 3, "test_net"), models or {})


def test_help_shows_the_signature_users_write() -> None:
    assert MARKER_HELP.startswith(
        "flop_budget(flops=None, *, macs=None, int_ops=None, params=None, max_skipped_ops=None, "
    )


def test_a_marker_budget_is_named_after_the_test(tmp_path: Path) -> None:
    name, budget = budget_of(tmp_path, "4.1G", params="25.6M")
    assert name == "test_net.test_net"
    assert budget.limit("flops").value == 4_100_000_000 and budget.limit("params").value == 25_600_000


def test_an_unknown_argument_names_the_signature(tmp_path: Path) -> None:
    with pytest.raises(Failure, match=r"flop_budget: .*'flop'.*; the marker takes flop_budget\(flops=None"):
        budget_of(tmp_path, flop="1G")


def test_a_marker_without_limits_names_the_known_models(tmp_path: Path) -> None:
    with pytest.raises(Failure, match=r"name='nope' is not in \[tool.flopbudget.models\] \(known: none\)"):
        budget_of(tmp_path, name="nope")


def test_name_lends_the_pyproject_budget_which_the_marker_overrides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.net]\ntarget = "m:net"\ninputs = [[1, 8]]\nflops = "1G"\nparams = "1M"\n'
    )
    models = load_settings(tmp_path / "pyproject.toml", tmp_path).models
    name, budget = budget_of(tmp_path, params="2M", name="net", models=models)
    assert name == "net"
    assert budget.limit("flops").value == 1_000_000_000 and budget.limit("params").value == 2_000_000


def test_every_place_a_marker_budget_names_is_in_the_marker(tmp_path: Path) -> None:
    _, budget = budget_of(tmp_path, "1G", max_degree={"seq": 1}, phases={"forward": {"flops": "1k"}})
    assert budget.source is not None and budget.source.origin is Origin.MARKER
    sources = [budget.limit("flops").source, budget.degrees[0].source, budget.phases["forward"]["flops"].source]
    assert all(source.origin is Origin.MARKER and source.marker for source in sources)


def test_max_degree_and_at_are_marker_arguments(tmp_path: Path) -> None:
    _, budget = budget_of(tmp_path, max_degree={"seq": 1}, at=[{"seq": 8192, "flops": "2T"}])
    assert [(d.metric, d.dim, d.degree) for d in budget.degrees] == [
        ("flops", "seq", 1),
        ("macs", "seq", 1),
        ("int-ops", "seq", 1),
        ("params", "seq", 1),
    ]
    assert budget.degrees[0].source.key == "test_net: flop_budget(max_degree=...)['seq']"
    assert budget.at[0].point == {"seq": 8192} and budget.at[0].limits["flops"].value == 2 * 10**12


def test_a_bad_max_degree_names_the_marker_argument(tmp_path: Path) -> None:
    with pytest.raises(Failure, match=r"test_net: flop_budget\(max_degree=...\)\['seq'\]: expected a whole number"):
        budget_of(tmp_path, max_degree={"seq": "linear"})


def test_name_lends_no_budget_on_the_curve(tmp_path: Path) -> None:
    """A marker test counts one point: the pyproject model's max-degree is judged on its own item's curve count."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.net]\ntarget = "m:net"\ninputs = [[1, "seq"]]\ndims = { seq = 8 }\n'
        'curve = { seq = [8, 64] }\nflops = "1G"\nmax-degree = { seq = 1 }\n'
    )
    models = load_settings(tmp_path / "pyproject.toml", tmp_path).models
    _, budget = budget_of(tmp_path, name="net", models=models)
    assert budget.limit("flops").value == 1_000_000_000 and not budget.on_curve
