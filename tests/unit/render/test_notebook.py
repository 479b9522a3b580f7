"""A Report in a notebook (`Report._repr_html_`, `render/notebook.py`): the layer table and the icicle inline, as
headless Chromium renders them, with no name from the model running as code and nothing loaded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from growth import assert_linear

from pytest_flopbudget import Report, count
from pytest_flopbudget import _display as display
from pytest_flopbudget._render.notebook import MAX_ROWS, report_html
from pytest_flopbudget._render.table import layer_table
from pytest_flopbudget._report import LayerCost, PhaseTotals
from tests.browser import ATTRIBUTE_NAME, SCRIPT_NAME, TITLE, assert_self_contained, render


def report_of(layers: dict[str, LayerCost], model: str = "Net") -> Report:
    flops = sum(cost.flops for cost in layers.values())
    macs = sum(cost.macs for cost in layers.values())
    return Report(layers=layers, forward=PhaseTotals(flops=flops, macs=macs), model=model)


def test_the_browser_helper_sees_a_payload_that_runs() -> None:
    """The control: both payloads, written unescaped, do run (each appends `!` to the title), so a title left as
    it was below means that none ran."""
    page = render(SCRIPT_NAME, ATTRIBUTE_NAME.removeprefix('">'))
    assert page.title == TITLE + "!!"


def test_a_torch_report_shows_its_table_and_icicle_and_runs_no_name() -> None:
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Linear(16, 32)
            self.add_module(SCRIPT_NAME, torch.nn.Linear(32, 32))
            self.add_module(ATTRIBUTE_NAME, torch.nn.Linear(32, 10))

        def forward(self, x: Any) -> Any:
            for layer in self.children():
                x = torch.relu(layer(x))
            return x

    report = count(Net(), torch.randn(4, 16))
    html = report._repr_html_()
    assert html is not None
    assert_self_contained(html)
    page = render(html)
    assert page.title == TITLE  # neither name ran
    header, *rows = page.tables["layers"]
    assert header[:5] == ["layer", "FLOPs", "MACs", "params", "share"]
    # stem: 2*4*16*32 + 4*32 (bias) = 4224 FLOPs, 4*16*32 = 2048 MACs, 16*32 + 32 = 544 params
    # the script-named layer: 2*4*32*32 + 4*32 = 8320 FLOPs; the other: 2*4*32*10 + 4*10 = 2600 FLOPs
    # the model: + the ReLUs in its own forward, 4*32 + 4*32 + 4*10 = 296: 15,440 FLOPs
    assert [row[:4] for row in rows] == [
        ["(model)", "15.4k", "7.42k", "1.93k"],
        ["  stem", "4.22k", "2.05k", "544"],
        [f"  {SCRIPT_NAME}", "8.32k", "4.10k", "1.06k"],
        [f"  {ATTRIBUTE_NAME}", "2.60k", "1.28k", "330"],
    ]
    assert "total: 15,440 FLOPs, 7,424 MACs, 1,930 params" in page.dom
    assert page.count("svg") == 1 and page.count("g", "layer") == 4  # the icicle: the model and its three layers
    assert page.count("script") == page.count("img") == 0
    assert page.non_white_pixels() > 5_000  # drawn: the table's text and the icicle's boxes


def test_a_jax_report_displays_the_same_rows_as_the_same_torch_model() -> None:
    """`_repr_html_` reads the Report only, so every backend's displays; one convention table, so the same MLP
    shows the same figures whichever framework wrote it."""
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    import jax.numpy as jnp

    class MLP(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.fc1 = nnx.Linear(16, 32, rngs=rngs)
            self.fc2 = nnx.Linear(32, 10, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.fc2(jax.nn.relu(self.fc1(x)))

    model = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))  # abstract: no weight allocated, no initialiser compiled
    report = count(model, jax.ShapeDtypeStruct((4, 16), jnp.float32))
    html = report._repr_html_()
    assert html is not None and "MLP (jax, inference)" in html
    page = render(html)
    rows = [row[:5] for row in page.tables["layers"][1:]]
    # fc1: 2*4*16*32 + 4*32 = 4224 FLOPs; fc2: 2*4*32*10 + 4*10 = 2600; the ReLU 4*32 = 128: 6952 in all
    assert rows == [
        ["(model)", "6.95k", "3.33k", "874", "100.0%"],
        ["  fc1", "4.22k", "2.05k", "544", "60.8%"],
        ["  fc2", "2.60k", "1.28k", "330", "37.4%"],
    ]
    assert page.count("g", "layer") == 3 and page.title == TITLE


def test_the_cells_are_the_text_tables() -> None:
    layers = {"stem": LayerCost(flops=200, macs=100, params=10), "blocks.0.conv": LayerCost(flops=600, macs=300)}
    report = report_of(layers)
    html = report_html(report)
    table = layer_table(report)
    for row in table.rows:
        assert "<tr><td>" + "</td><td>".join([row.label, *row.cells]) + "</td></tr>" in html
    assert all(note in html for note in table.notes)
    assert str(report).splitlines()[0] == "Net (torch, inference)" and "<strong>Net (torch, inference)</strong>" in html


def test_names_are_text_wherever_they_appear() -> None:
    layers = {
        SCRIPT_NAME: LayerCost(flops=6, macs=3),
        ATTRIBUTE_NAME: LayerCost(flops=4, macs=2),
        "\x1b[2J": LayerCost(),
    }
    html = report_html(report_of(layers, model="</div><script>x</script>"))
    assert_self_contained(html)
    assert "<script" not in html and "<img" not in html and "\x1b" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=" in html and "\\x1b[2J" in html


def test_a_large_table_is_cut_and_says_how_many_rows_it_left_out() -> None:
    layers = {f"blocks.{i}": LayerCost(flops=2, macs=1, params=1) for i in range(1_000)}
    html = report_html(report_of(layers, model="Big"))
    assert html.count("<tr><td>") == MAX_ROWS
    # rows: the model, `blocks` and its 1,000 children: 1,002, of which MAX_ROWS = 200 shown
    assert "… 802 more rows not shown (report.table() prints them all)" in html


def deep_report(size: int) -> Report:
    """`size` layers under `size / 100` blocks of 100, as a deep model's names run."""
    return report_of({f"h.{i // 100}.mlp{i % 100}": LayerCost(flops=2 * (i % 7 + 1), macs=1) for i in range(size)})


def test_a_large_model_displays_small_in_time_linear_in_its_layers() -> None:
    # 20,000 layers: 200 blocks, the table cut at MAX_ROWS, the icicle drawing the boxes wide enough to see
    html = report_html(deep_report(20_000))
    assert len(html) < 150_000 and "… 2 more rows not shown" in html

    def display(size: int) -> Callable[[], str]:
        report = deep_report(size)
        return lambda: report_html(report)

    assert_linear(display, 1_000)


def test_without_the_package_root_a_report_leaves_display_to_its_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(display, "_RENDERERS", {})
    assert report_of({})._repr_html_() is None  # Jupyter then shows repr(report)
