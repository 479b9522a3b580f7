"""`flopbudget count --format svg|html|json`, `--metric` and `--output`, in process through `main()`."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model_sources import MLP_MODULE

pytest.importorskip("torch")

from pytest_flopbudget.cli import main

SVG = "{http://www.w3.org/2000/svg}"

EXTRA = '''

class Odd(nn.Module):
    """A module whose child is called `##[x`: legal in torch, a legacy runner command in a CI log."""

    def __init__(self):
        super().__init__()
        self.add_module("##[x", nn.Linear(8, 2))

    def forward(self, x):
        return getattr(self, "##[x")(x)


def mlp():
    return MLP()


def odd():
    return Odd()
'''

PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "{module}:mlp"
inputs = [[2, 8]]
flops = "200"
params = "50"

[tool.flopbudget.models.tight]
target = "{module}:mlp"
inputs = [[2, 8]]
flops = "100"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[str]:
    module = "fmt_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    (tmp_path / f"{module}.py").write_text(MLP_MODULE + EXTRA)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(module=module))
    monkeypatch.chdir(tmp_path)
    yield module
    sys.modules.pop(module, None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def layer_boxes(svg: str) -> dict[str, str]:
    root = ET.fromstring(svg)
    return {g.get("data-path", ""): g.get("data-depth", "") for g in root.iter(f"{SVG}g") if g.get("class") == "layer"}


def test_svg_of_a_factory_on_stdout(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", f"{project}:mlp", "--input", "2,8", "--format", "svg")
    assert code == 0 and err == ""
    assert out.startswith("<svg ") and out.endswith("</svg>\n")
    # MLP(8 -> 4 -> 2) on [2, 8]: fc1 2*(2*8*4) + 2*4 bias = 136, act 8, fc2 2*(2*4*2) + 4 = 36: 180 FLOPs
    assert layer_boxes(out) == {"": "0", "fc1": "1", "act": "1", "fc2": "1"}
    assert f"{project}:mlp: 2x8 float32; inference" in out  # the same title the table prints
    assert 'class="budget"' not in out  # a factory has no budget


def test_html_to_a_file_is_the_page_stdout_would_show(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, page, _ = run(capsys, "count", "mlp", "--format", "html")
    assert code == 0 and page.startswith("<!DOCTYPE html>")
    target = Path("out/dir/mlp.html")  # missing directories are made
    code, out, err = run(capsys, "count", "mlp", "--format", "html", "--output", str(target))
    assert (code, out, err) == (0, "", "")
    assert target.read_text(encoding="utf-8") == page
    assert sorted(os.listdir("out/dir")) == ["mlp.html"]  # no temp file left behind


def test_a_budgeted_model_shows_its_budget_use(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, within, _ = run(capsys, "count", "mlp", "--format", "svg")
    _, over, _ = run(capsys, "count", "tight", "--format", "svg")
    bars = {
        name: [(g.get("data-metric"), g.get("data-over"), "".join(g.itertext())) for g in ET.fromstring(svg).iter(
            f"{SVG}g") if g.get("class") == "budget"]
        for name, svg in (("mlp", within), ("tight", over))
    }  # fmt: skip
    assert bars == {
        "mlp": [("flops", "false", "180 FLOPs of 200 FLOPs budget, 90.0%"),
                ("params", "false", "46 params of 50 params budget, 92.0%")],
        "tight": [("flops", "true", "180 FLOPs of 100 FLOPs budget, 180.0% (over budget)")],
    }  # fmt: skip


def test_metric_sets_the_box_widths(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "count", "mlp", "--format", "svg", "--metric", "params")
    widths = {
        g.get("data-path"): g.find(f"{SVG}rect").get("width")  # type: ignore[union-attr]
        for g in ET.fromstring(out).iter(f"{SVG}g")
        if g.get("class") == "layer"
    }
    # params: fc1 8*4 + 4 = 36, fc2 4*2 + 2 = 10, of 46 over 1180 px; act has none and is left out
    assert widths == {"": "1180.00", "fc1": "923.48", "fc2": "256.52"}
    assert "box width: inclusive params" in out


def test_metric_without_a_picture_is_refused(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", "mlp", "--metric", "params")
    assert (code, out) == (2, "")
    assert err == (
        "flopbudget: error: --metric sets what a picture shows; give it with --format svg or html, not table\n"
    )


def test_unwritable_output_is_one_line_and_writes_nothing(
    project: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    Path("file.txt").write_text("x")
    code, out, err = run(capsys, "count", "mlp", "--format", "svg", "--output", "file.txt/pic.svg")
    assert (code, out) == (2, "")
    assert err.startswith("flopbudget: error: --output file.txt/pic.svg: cannot write it: ") and err.count("\n") == 1
    code, _, err = run(capsys, "count", "mlp", "--format", "svg", "--output", ".")
    assert code == 2 and err.startswith("flopbudget: error: --output .: cannot write it: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", f"{project}.py", "pyproject.toml"]


def test_table_and_json_can_go_to_a_file_too(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, table, _ = run(capsys, "count", "mlp")
    assert run(capsys, "count", "mlp", "-o", "mlp.txt") == (0, "", "")
    assert Path("mlp.txt").read_text(encoding="utf-8") == table
    _, document, _ = run(capsys, "count", "mlp", "--format", "json")
    assert run(capsys, "count", "mlp", "--format", "json", "-o", "mlp.json") == (0, "", "")
    assert Path("mlp.json").read_text(encoding="utf-8") == document and json.loads(document)["totals"]["flops"] == 180


def test_json_stays_valid_when_a_layer_is_named_like_a_runner_command(
    project: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "count", f"{project}:odd", "--input", "2,8", "--format", "json")
    assert code == 0 and "##[" not in out  # the stdout filter would have broken it up
    assert list(json.loads(out)["layers"]) == ["##[x"]
    _, svg, _ = run(capsys, "count", f"{project}:odd", "--input", "2,8", "--format", "svg")
    assert "##[" not in svg and layer_boxes(svg) == {"": "0", "##[x": "1"}
