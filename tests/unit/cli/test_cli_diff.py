"""`flopbudget diff NAME --format svg|html` (cli/diff.py): one model's base vs now as a coloured icicle, in process."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.model_sources import MLP_MODULE

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent))

from main_in_process import one_error_line, run_main  # noqa: E402

from pytest_flopbudget._render.diff_flame import UNCHANGED  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
PYPROJECT = """\
[project]
name = "demo"

[tool.flopbudget.models.mlp]
target = "{module}:mlp"
inputs = [[2, 8]]
flops = "1k"

[tool.flopbudget.models.other]
target = "{module}:mlp"
inputs = [[1, 8]]
flops = "1k"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    module = "diff_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    (tmp_path / f"{module}.py").write_text(MLP_MODULE + "\n\ndef mlp():\n    return MLP()\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(module=module))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fills(svg: str) -> dict[str, str]:
    return {
        g.get("data-path", ""): g.find(f"{SVG}rect").get("fill", "")  # type: ignore[union-attr]
        for g in ET.fromstring(svg).iter(f"{SVG}g")
        if g.get("class") == "layer"
    }


def totals(svg: str) -> str:
    return "".join(next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "totals").itertext())


def widen(root: Path) -> None:
    for path in root.glob("diff_models_*.py"):
        path.write_text(path.read_text().replace("HIDDEN = 4", "HIDDEN = 8"))


def test_svg_colours_growth_and_states_base_to_now(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["check", "--update"], project, capsys)[0] == 0
    code, out, err = run_main(["diff", "mlp", "--format", "svg"], project, capsys)
    assert (code, err) == (0, "")
    assert set(fills(out).values()) == {UNCHANGED}
    assert totals(out).startswith("FLOPs: base 180 FLOPs → now 180 FLOPs (+0.0%)")
    widen(project)
    files = sorted(p.name for p in project.rglob("*"))
    code, out, err = run_main(["diff", "mlp", "--format", "svg"], project, capsys)
    assert (code, err) == (0, "")
    coloured = fills(out)
    assert coloured["fc1"] not in (UNCHANGED,) and int(coloured["fc1"][1:3], 16) > int(coloured["fc1"][5:7], 16)
    assert totals(out).startswith("FLOPs: base 180 FLOPs → now 356 FLOPs (+97.8%)")
    assert sorted(p.name for p in project.rglob("*")) == files  # nothing written
    code, out, _ = run_main(["diff", "mlp", "--format", "svg", "--metric", "params"], project, capsys)
    assert code == 0 and totals(out).startswith("params: base 46 params → now 90 params")


def test_html_to_a_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_main(["check", "--update", "mlp"], project, capsys)
    code, out, _ = run_main(["diff", "mlp", "--format", "html", "-o", "diff.html"], project, capsys)
    assert (code, out) == (0, "")
    page = (project / "diff.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    svg = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert fills(svg)["fc1"] == UNCHANGED


def test_no_baseline_is_an_error_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["diff", "mlp", "--format", "svg"], project, capsys)
    assert (code, out) == (2, "")
    assert "mlp: no baseline yet" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diff", "--format", "svg"], "--format svg draws one model"),
        (["diff", "mlp", "--metric", "params"], "--metric sets what a picture shows"),
    ],
)
def test_usage_errors(project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run_main(argv, project, capsys)
    assert code == 2
    assert message in one_error_line(err)


def test_text_to_a_file_is_the_text_output(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_main(["check", "--update", "mlp"], project, capsys)
    _, printed, _ = run_main(["diff", "mlp"], project, capsys)
    code, out, _ = run_main(["diff", "mlp", "-o", "diff.txt"], project, capsys)
    assert (code, out) == (0, "")
    assert (project / "diff.txt").read_text() == printed
