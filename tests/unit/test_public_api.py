"""The public surface is exactly what docs/architecture.md lists; everything else is private (`_` in its path).

A release makes every importable name an API; drawing the line in one documented list, checked here, keeps a
refactoring of the internals from breaking a user.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_flopbudget"


def documented() -> dict[str, list[str]]:
    """`module: names` from the <!-- public-api --> list in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- public-api -->", 1)[1].split("<!-- /public-api -->", 1)[0]
    items = re.split(r"^- ", block, flags=re.M)[1:]
    listed: dict[str, list[str]] = {}
    for item in items:
        module = re.match(r"`([\w.]+)`", item)
        assert module is not None, item
        names = item.split(":", 1)[1]
        listed[module.group(1)] = re.findall(r"`(\w+)`", names)
    return listed


def module_names() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


def is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__main__" for part in module.split(".")[1:])


def test_the_documented_list_is_read() -> None:
    listed = documented()
    assert "pytest_flopbudget" in listed and "count" in listed["pytest_flopbudget"]
    assert "register_formula" in listed["pytest_flopbudget.formulas"]


@pytest.mark.parametrize("module", sorted(documented()))
def test_a_public_modules_names_are_exactly_the_documented_ones(module: str) -> None:
    imported = importlib.import_module(module)
    assert sorted(imported.__all__) == sorted(documented()[module])
    for name in imported.__all__:
        assert hasattr(imported, name), f"{module}.{name}"


def test_every_other_module_is_private() -> None:
    public = set(documented()) | {"pytest_flopbudget.__main__"}
    assert [module for module in module_names() if not is_private(module) and module not in public] == []


def test_the_docs_examples_and_action_import_only_public_names() -> None:
    files = [ROOT / "README.md", ROOT / "action.yml", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((ROOT / "examples").rglob("*.py"))
    private = re.compile(r"pytest_flopbudget(?:\.\w+)*\._\w+")
    used = {}
    for path in files:
        if path.name == "architecture.md":  # it describes the internals by design; it imports nothing
            continue
        found = private.findall(path.read_text(encoding="utf-8"))
        if found:
            used[str(path.relative_to(ROOT))] = found
    assert used == {}
