"""library_imports: which installed libraries a model's module imports, read from its source, never run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_flopbudget._cache.library_imports import import_all, library_imports, module_file, top_level_imports


def test_top_level_imports_are_read_from_the_module_body_try_and_if() -> None:
    source = (
        "import os, torch.nn as tnn\n"
        "from transformers import BertModel, LlamaConfig\n"
        "from . import sibling\n"
        "try:\n    import fastlib\nexcept ImportError:\n    import slowlib\n"
        "if True:\n    from numpy import *\n"
        "def build():\n    import inside_a_function\n"
    )
    assert top_level_imports(source) == [
        ("os", ()), ("torch.nn", ()), ("transformers", ("BertModel", "LlamaConfig")),
        ("fastlib", ()), ("slowlib", ()), ("numpy", ()),
    ]  # fmt: skip
    assert top_level_imports("def broken(:\n") == []


def test_module_files_are_found_without_importing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (tmp_path / "pkg" / "model.py").write_text("")
    assert module_file("pkg.model", [str(tmp_path)]) == tmp_path / "pkg" / "model.py"
    assert module_file("pkg", [str(tmp_path)]) == tmp_path / "pkg" / "__init__.py"
    assert module_file("missing", [str(tmp_path)]) is None
    assert "pkg" not in sys.modules


def test_only_installed_libraries_are_kept_and_never_the_projects_modules(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "helpers.py").write_text("")
    (tmp_path / "json_tools").mkdir()
    (tmp_path / "models.py").write_text(
        "import json\nimport helpers\nimport torch\nfrom torch import nn\nimport pytest\nimport json_tools\n"
    )
    (tmp_path / "pytest.py").write_text("")  # the project's own `pytest` module shadows the library in the child
    found = library_imports(["models", "models", "missing"], [str(tmp_path)])
    assert found == [("torch", ()), ("torch", ("nn",))]  # not json (stdlib), helpers, json_tools nor pytest


def test_import_all_ignores_what_fails() -> None:
    import_all([("no_such_module_anywhere", ()), ("json", ("dumps", "no_such_name"))])
    assert "json" in sys.modules
