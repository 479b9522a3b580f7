"""`flopbudget count --input 1,seq --dim seq=LOW..HIGH`: a model's formulas, in process through `main()`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model_sources import MLP_MODULE

pytest.importorskip("torch")

from pytest_flopbudget._cli import main
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._report import Report

# MLP(8 -> 4 -> 2) on [rows, 8]: fc1 rows*32 MACs, fc2 rows*8: 40*rows MACs; FLOPs 2 per MAC + bias adds (4 + 2)
# per row + the activation's 4 per row: 90*rows.
PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "{module}:MLP"
inputs = [["rows", 8]]
dims = {{ rows = 4 }}
curve = {{ rows = [1, 64] }}
flops = "1M"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[str]:
    module = "curve_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    (tmp_path / f"{module}.py").write_text(MLP_MODULE)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(module=module))
    monkeypatch.chdir(tmp_path)
    yield module
    sys.modules.pop(module, None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_gives_the_formulas_beside_the_count_at_the_point(
    project: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "count", f"{project}:MLP", "--input", "rows,8", "--dim", "rows=1..64", "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["formula"]["macs"] == "40*rows" and data["formula"]["flops"] == "90*rows"
    assert data["formula"]["params"] == "46"
    assert data["curve"]["holds"]["text"] == "exact on rows in [1, 64]"
    assert data["curve"]["layers"]["fc1"]["macs"] == "32*rows"
    assert data["inputs"][0]["shape"] == [64, 8] and data["totals"]["macs"] == 40 * 64  # the range's high end
    assert str(Formula.from_dict(data).total("flops")) == "90*rows"
    assert Report.from_dict(data).macs == 40 * 64  # still a Report: the two keys are beside its own


def test_the_table_prints_the_formulas_under_it(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", "mlp")  # the pyproject's dims and curve
    assert code == 0
    assert f"{project}:MLP" not in out and "mlp: 4x8 float32; inference" in out
    lines = out.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("Formula in rows: exact on rows in [1, 64] (")]
    assert lines[start + 1].split() == ["FLOPs", "90*rows"]
    assert lines[start + 2].split() == ["MACs", "40*rows"]
    assert "FLOPs per layer:" in lines and lines[-1].split() == ["fc2", "18*rows"]


def test_a_point_dim_counts_there_without_a_formula(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", f"{project}:MLP", "--input", "rows,8", "--dim", "rows=3", "--format", "json")
    data = json.loads(out)
    assert code == 0 and "formula" not in data and data["totals"]["macs"] == 120


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "rows,8"], "--input 'rows,8' is not a shape"),
        (["--input", "rows,8", "--dim", "cols=4"], "--input 'rows,8' is not a shape"),
        (["--input", "2,8", "--dim", "rows=4"], "--dim rows: no --input names the dim 'rows'"),
        (["--input", "rows,8", "--dim", "rows=1..3"], "rows in [1, 3] has fewer than 6 sizes"),
    ],
)
def test_bad_dims_are_one_line(project: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "count", f"{project}:MLP", *argv)
    assert code != 0 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_picture_draws_the_formulas_against_the_dim(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    code, out, _ = run(capsys, "count", "mlp", "--format", "svg", "--metric", "macs")
    assert code == 0
    root = ET.fromstring(out)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "mlp: MACs against rows" in texts and "exact on rows in [1, 64]; log-log" in texts
    assert {"(model)", "fc1", "fc2"} <= set(texts)  # act has no MACs: no line
    assert len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) == 3
    code, page, _ = run(capsys, "count", "mlp", "--format", "html")
    assert code == 0 and page.startswith("<!DOCTYPE html>") and "<svg " in page


def test_input_given_for_a_curve_model_replaces_its_dims(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", "mlp", "--input", "3,8", "--format", "json")
    data = json.loads(out)
    assert code == 0 and "formula" not in data and data["totals"]["macs"] == 120
    code, out, _ = run(capsys, "count", "mlp", "--dim", "rows=5", "--format", "json")  # the pyproject's range stays
    data = json.loads(out)
    assert data["totals"]["macs"] == 200 and data["formula"]["macs"] == "40*rows"
