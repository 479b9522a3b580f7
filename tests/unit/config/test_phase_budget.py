"""config/phase_budget.py and `phases = {...}` in pyproject: ceilings per phase, every mistake located."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import LocatedError, Location
from pytest_flopbudget._config.phase_budget import parse_phase_budgets
from pytest_flopbudget._config.pyproject import parse_settings
from pytest_flopbudget._metrics import BYTES, FLOPS, MACS

HEAD = '[tool.flopbudget.models.m]\ntarget = "pkg.models:build"\ninputs = [[1, 16]]\ngenerate = 8\n'


def test_limits_per_phase_are_parsed_with_the_budget_grammar() -> None:
    limits = parse_phase_budgets(
        {"prefill": {"flops": "30T"}, "decode-mean": {"flops": "15 GMACs", "bytes": "2GiB"}}, Location()
    )
    assert limits["prefill"][FLOPS].value == 30 * 10**12
    assert limits["decode-mean"][MACS].value == 15 * 10**9  # a MAC unit in the flops slot is a MAC budget
    assert limits["decode-mean"][BYTES].value == 2 * 2**30


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"decode": {"flops": "1G"}}, "unknown phase 'decode'"),
        ({"prefill": {"params": "1G"}}, "a phase budget is one of flops, macs, int-ops, bytes"),
        ({"prefill": {}}, "expected a table"),
        ({"prefill": {"flops": "1 Gi"}}, "'1 Gi' is not a budget"),
        ("1G", "expected a table of phases"),
    ],
)
def test_a_wrong_phase_budget_is_refused(value: object, message: str) -> None:
    with pytest.raises(LocatedError, match=message):
        parse_phase_budgets(value, Location())


def test_pyproject_phases_are_a_budget_of_their_own_located_to_their_key(tmp_path: Path) -> None:
    text = HEAD + 'phases = { decode-last = { flops = "2G" }, backward = { macs = "1G" } }\n'
    entry = parse_settings(text, tmp_path / "pyproject.toml").models["m"]
    assert entry.budget.phases["decode-last"][FLOPS].value == 2 * 10**9
    assert entry.budget.phases["decode-last"][FLOPS].source.line == 5
    assert not entry.budget.is_empty and entry.budget.limits == {}
    with pytest.raises(LocatedError, match=r"models.m.phases.prefill.flops: 'x' is not a budget"):
        parse_settings(HEAD + 'phases = { prefill = { flops = "x" } }\n', tmp_path / "pyproject.toml")


def test_a_budget_round_trips_its_phases_and_others_keep_their_json() -> None:
    budget = Budget(phases=parse_phase_budgets({"decode-mean": {"flops": "15G"}}, Location()))
    assert Budget.from_dict(budget.to_dict()) == budget
    assert "phases" not in Budget().to_dict()
    assert Budget().override(budget).phases == budget.phases
