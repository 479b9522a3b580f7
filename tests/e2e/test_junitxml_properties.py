"""`pytest --junitxml`: each flop-budget test case carries its model's figures as `<property>` elements, serially
and under `-n 2` (where the controller writes the file from the workers' reports). The XML is the file a real
run wrote, read with the standard library's parser."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from e2e_helpers import MODELS, RunPytest, inner_pytest

pytest.importorskip("torch")

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = 1000

[tool.flopbudget.models.wide]
target = "models:wide"
inputs = [[1, 8]]
macs = 10

[tool.flopbudget.models.broken]
target = "no_such_module:model"
inputs = [[1, 8]]
macs = 10
"""

TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget(macs=100, params=100)
def test_net(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.zeros(1, 8))


def test_plain():
    pass
"""


@pytest.fixture(params=["serial", pytest.param("xdist", marks=pytest.mark.slow)])
def run(request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunPytest:
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(models=MODELS, test_net=TESTS)
    return inner_pytest(pytester, monkeypatch, request.param, subprocess_run=True)


def properties(path: str) -> dict[str, list[tuple[str, str]]]:
    """test case name -> its properties, in order, from the JUnit XML at `path`."""
    root = ET.parse(path).getroot()
    cases = {}
    for case in root.iter("testcase"):
        cases[case.get("name", "")] = [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]
    return cases


def test_each_budget_test_case_carries_its_figures(run, pytester: pytest.Pytester) -> None:
    result = run("--junitxml=out/junit.xml", "pyproject.toml", "test_net.py")
    result.assert_outcomes(passed=3, failed=2)
    cases = properties(str(pytester.path / "out" / "junit.xml"))
    assert set(cases) == {"small", "wide", "broken", "test_net", "test_plain"}
    small = dict(cases["small"])
    assert small["flopbudget.model"] == "small" and small["flopbudget.verdict"] == "pass"
    assert (small["flopbudget.macs"], small["flopbudget.macs.budget"], small["flopbudget.flops"]) == (
        "16",
        "1000",
        "34",
    )
    assert small["flopbudget.params"] == "18" and small["flopbudget.peak-memory"].isdigit()
    assert "flopbudget.flops.budget" not in small and "flopbudget.macs.baseline" not in small  # none set, none yet
    wide = dict(cases["wide"])
    assert (wide["flopbudget.verdict"], wide["flopbudget.macs"], wide["flopbudget.macs.budget"]) == (
        "fail",
        "512",
        "10",
    )
    assert cases["broken"] == [("flopbudget.model", "broken"), ("flopbudget.verdict", "unchecked")]
    net = dict(cases["test_net"])
    assert net["flopbudget.model"] == "test_net.test_net" and net["flopbudget.verdict"] == "pass"
    assert (net["flopbudget.macs"], net["flopbudget.macs.budget"], net["flopbudget.params.budget"]) == (
        "16",
        "100",
        "100",
    )
    assert cases["test_plain"] == []  # a test without a budget records nothing
    # figures in metric order, each followed by its budget
    names = [name for name, _ in cases["small"]]
    assert names[:5] == ["flopbudget.model", "flopbudget.verdict", "flopbudget.flops", "flopbudget.macs",
                         "flopbudget.macs.budget"]  # fmt: skip


def test_a_recorded_baseline_is_a_property(run, pytester: pytest.Pytester) -> None:
    run("--flopbudget-update", "pyproject.toml")
    run("--junitxml=junit.xml", "pyproject.toml")
    small = dict(properties(str(pytester.path / "junit.xml"))["small"])
    assert small["flopbudget.macs.baseline"] == "16" and small["flopbudget.flops.baseline"] == small["flopbudget.flops"]
