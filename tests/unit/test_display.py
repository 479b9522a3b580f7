"""The `_repr_html_` seam (`display.py`): each type's renderer plugged in by the package root, found for
subclasses too, None where there is none, and no picture code loaded until something is displayed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_flopbudget import _display as display

ROOT = Path(__file__).resolve().parents[2]


class Shape:
    pass


class Square(Shape):
    pass


def test_a_type_and_its_subclasses_use_its_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(display, "_RENDERERS", {})
    assert display.html_of(Square()) is None  # Jupyter then shows the repr
    display.use_html(Shape, lambda shape: f"<b>{type(shape).__name__}</b>")
    assert display.html_of(Square()) == "<b>Square</b>" and display.html_of(object()) is None


def test_importing_the_package_loads_no_renderer_until_a_display() -> None:
    code = (
        "import sys, pytest_flopbudget as f\n"
        "drawn = [m for m in sys.modules if m.endswith('notebook') or m.endswith('flame')]\n"
        "html = f.Report(model='m')._repr_html_()\n"
        "print(drawn, 'pytest_flopbudget._render.notebook' in sys.modules, html.startswith('<div'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )  # run in the checkout: `-c` puts the working directory first on the path
    assert done.stdout.split() == ["[]", "True", "True"]
