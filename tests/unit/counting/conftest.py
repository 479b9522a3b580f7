"""Shared by every counting test: the test folders named after the frameworks, and no formula leaking between tests.

The folders `torch/`, `onnx/`, `jax/` and `tensorflow/` beside this file mirror `pytest_flopbudget/_counting/`.
pytest's default `prepend` import mode puts this directory on `sys.path`, and there a folder without `__init__.py`
is a namespace package that `import torch` finds when no real torch is installed: `pytest.importorskip("torch")`
would then succeed and the tests fail instead of skipping. A framework that only this directory provides is
therefore marked as missing.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from pytest_flopbudget.formulas import registered_formulas

for _framework in ("torch", "onnx", "jax", "tensorflow"):
    if _framework not in sys.modules:
        _spec = importlib.util.find_spec(_framework)
        if _spec is not None and _spec.origin is None:  # only a namespace package: our test folder
            sys.modules[_framework] = None  # type: ignore[assignment]  # `import` raises ImportError


@pytest.fixture(autouse=True)
def _no_formula_leaks() -> Iterator[None]:
    """A test that registers a formula must remove it (`with register_formula(...):` or `handle.remove()`)."""
    before = {id(handle.formula) for handle in registered_formulas()}
    yield
    leaked = [handle for handle in registered_formulas() if id(handle.formula) not in before]
    for handle in leaked:
        handle.remove()
    assert not leaked, f"the test left formulas registered: {', '.join(handle.op for handle in leaked)}"


DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.fixture
def documented_example() -> Callable[[str, str], str]:
    """`documented_example("formulas.md", "PyTorch ops")`: the first Python block under that `##` heading."""

    def find(page: str, heading: str) -> str:
        text = (DOCS / page).read_text(encoding="utf-8")
        section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
        return section.split("```python\n", 1)[1].split("\n```", 1)[0]

    return find
