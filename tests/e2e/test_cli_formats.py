"""`flopbudget check --format json | jq` and `flopbudget count --format svg > pic.svg` as a user runs them: real
subprocesses, stdout parsed as JSON or XML, exit codes as documented."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from e2e_helpers import MODELS, flopbudget

pytest.importorskip("torch")

#: `small` is nn.Linear(8, 2) on one row: 16 MACs, 34 FLOPs (2 per MAC + 2 bias adds), 18 params.
PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
flops = {flops}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(flops=40))
    return tmp_path


def test_check_format_json_is_the_results_document_alone_on_stdout(project: Path) -> None:
    result = flopbudget(project, "check", "--format", "json", "--report", "json:results.json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # nothing else on stdout
    assert result.stdout == (project / "results.json").read_text(encoding="utf-8")  # the --report json:PATH text
    assert document["format"] == "pytest-flopbudget/results/2" and document["passed"] is True
    (model,) = document["models"]
    assert (model["name"], model["metrics"]["flops"]["now"], model["metrics"]["flops"]["limit"]) == ("small", 34, 40)
    assert "small" in result.stderr and "1 model counted" in result.stderr  # the text went to stderr


def test_check_format_json_over_budget_exits_1_and_github_commands_stay_off_stdout(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT.format(flops=30))
    summary = project / "summary.md"
    result = flopbudget(
        project, "check", "--format", "json",
        GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(project), GITHUB_STEP_SUMMARY=str(summary),
    )  # fmt: skip
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["passed"] is False and document["counts"]["failed"] == 1
    assert document["models"][0]["reason"] == "small: 34 FLOPs > budget 30 FLOPs (+13.3%)"
    # the runner reads workflow commands on stderr as well; the job summary gets its budget-use bar
    assert "::error file=pyproject.toml,line=4," in result.stderr and "::error" not in result.stdout
    assert "| ██████████ 113.3% over |" in summary.read_text(encoding="utf-8")


def test_check_format_json_with_an_error_still_exits_2(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT.format(flops=40).replace("models:small", "models:gone"))
    result = flopbudget(project, "check", "--format", "json")
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["passed"] is False and document["unchecked"][0]["name"] == "small"


def test_count_svg_is_the_same_bytes_in_every_process(project: Path) -> None:
    first = flopbudget(project, "count", "small", "--format", "svg", PYTHONHASHSEED="1")
    second = flopbudget(project, "count", "small", "--format", "svg", "--output", "pic.svg", PYTHONHASHSEED="2")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert (project / "pic.svg").read_text(encoding="utf-8") == first.stdout and second.stdout == ""
    root = ET.fromstring(first.stdout)
    budget = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "budget"]
    assert [[t.text for t in g.iter("{http://www.w3.org/2000/svg}text")] for g in budget] == [
        ["FLOPs", "34 FLOPs of 40 FLOPs budget, 85.0%"]
    ]  # the bar names its metric


#: `small` with a named dim: 34 FLOPs per row, a curve over rows 1..64 and its point at 4 rows (136 FLOPs).
CURVE_PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [["rows", 8]]
dims = { rows = 4 }
curve = { rows = [1, 64] }
flops = 200
"""


def test_count_html_of_a_curve_model_draws_the_icicle_with_its_budget_bars_and_the_curve(project: Path) -> None:
    (project / "pyproject.toml").write_text(CURVE_PYPROJECT)
    result = flopbudget(project, "count", "small", "--format", "html")
    assert result.returncode == 0, result.stderr
    page = result.stdout
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg ") == 2
    # first the count at the point: the icicle and the bar of its budget, named
    icicle = ET.fromstring(page[page.index("<svg ") : page.index("</svg>") + len("</svg>")])
    budget = [g for g in icicle.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "budget"]
    assert [[t.text for t in g.iter("{http://www.w3.org/2000/svg}text")] for g in budget] == [
        ["FLOPs", "136 FLOPs of 200 FLOPs budget, 68.0%"]
    ]
    assert any(g.get("class") == "layer" for g in icicle.iter("{http://www.w3.org/2000/svg}g"))
    # then the curve, whose style cannot restyle the icicle's text (a style element applies to the whole page)
    curve = page[page.index('<svg xmlns="http://www.w3.org/2000/svg" class="curve"') :]
    assert "small: FLOPs against rows" in curve and "<polyline" in curve
    styles = [style.split("</style>")[0] for style in curve.split("<style>")[1:]]
    assert styles and all(rule.startswith(".curve ") for style in styles for rule in style.split("}") if rule)
    # svg: the same two pictures, one under the other, in one document
    svg = flopbudget(project, "count", "small", "--format", "svg")
    assert svg.returncode == 0, svg.stderr
    root = ET.fromstring(svg.stdout)
    nested = root.findall("{http://www.w3.org/2000/svg}svg")
    assert [n.get("y") for n in nested] == ["0", nested[0].get("height")] and nested[1].get("class") == "curve"
    assert int(root.get("height", "")) == sum(int(n.get("height", "")) for n in nested)
