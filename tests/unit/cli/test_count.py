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

from pytest_flopbudget._cli import main

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
        name: [(g.get("data-metric"), g.get("data-over"), " | ".join(g.itertext())) for g in ET.fromstring(svg).iter(
            f"{SVG}g") if g.get("class") == "budget"]
        for name, svg in (("mlp", within), ("tight", over))
    }  # fmt: skip
    assert bars == {
        "mlp": [("flops", "false", "FLOPs | 180 FLOPs of 200 FLOPs budget, 90.0%"),
                ("params", "false", "params | 46 params of 50 params budget, 92.0%")],
        "tight": [("flops", "true", "FLOPs | 180 FLOPs of 100 FLOPs budget, 180.0% (over budget)")],
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


# -- memory: --metric bytes / param-bytes / peak-memory, --hardware ---------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "widths", "label"),
    [
        # bytes moved, fp32: fc1 reads x 2*8, W 4*8, b 4, writes 2*4 (60 elements, 240 B); act reads and writes 2*4
        # (64 B); fc2 reads 2*4, W 2*4, b 2, writes 2*2 (88 B): 392 B over the 1180-pixel chart
        ("bytes", {"": "1180.00", "fc1": "722.45", "act": "192.65", "fc2": "264.90"}, "bytes moved"),
        # parameter bytes: fc1 36 * 4 = 144, fc2 10 * 4 = 40 of 184
        ("param-bytes", {"": "1180.00", "fc1": "923.48", "fc2": "256.52"}, "param bytes"),
    ],
)
def test_memory_metrics_size_the_boxes(
    project: str, capsys: pytest.CaptureFixture[str], metric: str, widths: dict[str, str], label: str
) -> None:
    code, out, err = run(capsys, "count", "mlp", "--format", "svg", "--metric", metric)
    assert (code, err) == (0, "")
    shown = {
        g.get("data-path"): g.find(f"{SVG}rect").get("width")  # type: ignore[union-attr]
        for g in ET.fromstring(out).iter(f"{SVG}g")
        if g.get("class") == "layer"
    }
    assert shown == widths
    assert f"box width: inclusive {label}" in out


def test_metric_peak_memory_draws_live_bytes_with_the_peak(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, svg, err = run(capsys, "count", "mlp", "--format", "svg", "--metric", "peak-memory")
    assert (code, err) == (0, "")
    _, document, _ = run(capsys, "count", "mlp", "--format", "json")
    peak = json.loads(document)["peak_memory"]
    root = ET.fromstring(svg)
    (marker,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "peak"]
    assert (int(marker.get("data-bytes", "")), marker.get("data-layer")) == (peak["bytes"], peak["layer"])
    assert [p for p in root.iter(f"{SVG}path") if p.get("class") == "live"]
    assert "mlp: 2x8 float32; inference" in svg
    code, page, _ = run(capsys, "count", "mlp", "--format", "html", "--metric", "peak-memory")
    assert code == 0 and page.startswith("<!DOCTYPE html>") and svg.rstrip("\n") in page


def test_table_states_the_peak_memory_and_its_layer(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "count", "mlp")
    _, document, _ = run(capsys, "count", "mlp", "--format", "json")
    data = json.loads(document)
    peak = data["peak_memory"]
    assert f"peak memory {peak['bytes']} B at {peak['layer'] or '(model)'}" in out.splitlines()
    # the count JSON carries the intensity of the model and of every layer that moves bytes (exclusive figures)
    assert data["intensity"] == 180 / 392
    assert {path: layer["intensity"] for path, layer in data["layers"].items()} == {
        "fc1": 136 / 240, "act": 8 / 64, "fc2": 36 / 88
    }  # fmt: skip


def test_hardware_adds_the_roofline_estimate(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", "mlp", "--hardware", "h100-sxm")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].split()[-3:] == ["est.", "time", "bound"]
    # fc1 on H100 fp32 (fp32 parameters; ridge 67e12 / 3.35e12 = 20 FLOPs/byte): addmm at 136/240 FLOPs/byte is
    # memory-bound, 240 B / 3.35e12 B/s = 0.0716 ns
    fc1 = next(line for line in lines if line.split()[0] == "fc1")
    assert fc1.split()[-3:] == ["~0.0716", "ns", "memory"]
    assert (
        "roofline estimate on h100-sxm (NVIDIA H100 SXM5 80GB): fp32 peak 67 TFLOP/s (the dtype most parameters are "
        "stored in), 3,350 GB/s, ridge point 20 FLOPs/byte"
    ) in lines
    code, document, _ = run(capsys, "count", "mlp", "--hardware", "l4:bf16", "--format", "json")
    data = json.loads(document)
    assert code == 0 and data["roofline_estimate"]["dtype"] == "bf16"
    assert data["roofline_estimate"]["seconds"] == pytest.approx(392 / 300e9)  # every op memory-bound on the L4
    assert data["layers"]["fc1"]["roofline_estimate"]["bound"] == "memory"


def test_hardware_errors_are_one_line_before_any_count(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", "no.such:model", "--hardware", "h200")
    assert (code, out) == (2, "")
    assert err == (
        "flopbudget: error: unknown hardware profile 'h200': use one of a100-sxm-80gb, h100-sxm, l4, mi300x, rtx-4090\n"
    )
    code, _, err = run(capsys, "count", "mlp", "--hardware", "a100-sxm-80gb:fp8")
    assert code == 2 and err.count("\n") == 1 and "no published peak for dtype 'fp8'" in err
    code, _, err = run(capsys, "count", "mlp", "--hardware", "h100-sxm", "--format", "svg")
    assert (code, err) == (
        2, "flopbudget: error: --hardware adds a roofline estimate to the table and the JSON, not to a picture\n"
    )  # fmt: skip


def test_the_help_lists_the_profiles(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["count", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--hardware NAME[:DTYPE]" in out and "a100-sxm-80gb, h100-sxm, l4, mi300x, rtx-4090" in out
    assert "peak-memory" in out


def test_a_metric_the_backend_does_not_measure_is_refused(
    project: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report without memory figures (an older backend, ONNX before it measured them) draws no zero-width picture
    and gives no estimate as if no byte moved: one line each."""
    import dataclasses

    from pytest_flopbudget._cli import count as count_module

    counted = count_module.count_entry

    def without_memory(*args: object) -> object:
        report = counted(*args)  # type: ignore[arg-type]
        return dataclasses.replace(report, optional_metrics=frozenset(), backend="onnx")

    monkeypatch.setattr(count_module, "count_entry", without_memory)
    for metric, label in (("bytes", "bytes moved"), ("peak-memory", "peak memory")):
        code, out, err = run(capsys, "count", "mlp", "--format", "svg", "--metric", metric)
        assert (code, out) == (2, "")
        assert err == (
            f"flopbudget: error: --metric {metric}: the onnx backend does not measure {label} for this model, so "
            "there is nothing to draw\n"
        )
    code, _, err = run(capsys, "count", "mlp", "--hardware", "h100-sxm")
    assert code == 2 and err == (
        "flopbudget: error: --hardware needs the bytes each op moves, and the onnx backend does not measure them for "
        "this model: no roofline estimate\n"
    )
    code, out, _ = run(capsys, "count", "mlp")
    assert code == 0 and "FLOPs/B" not in out and "memory:" not in out and "peak memory" not in out
