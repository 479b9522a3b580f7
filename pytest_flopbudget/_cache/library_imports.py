"""The installed libraries a model's module imports, found by reading its source without running any of it.

Each model is counted in a child of its own (see `recorded_count`), so that what a model's import does cannot leak
into another model's count. Without help every child would import its libraries itself: two transformers models
would import transformers twice, once per child, where a single-process count imports it once. So the installed
libraries (site-packages only, never the project's modules) named by the top-level import statements of a model's
module are imported once, in a process forked for that module's models, and each model's child is forked from
it. The set depends only on the model's own module, never on which other models are counted or cached.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.machinery
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_flopbudget._cache.file_roots import library_roots

#: (module, names): `import a.b` is ("a.b", ()), `from a.b import c, d` is ("a.b", ("c", "d")).
Import = tuple[str, tuple[str, ...]]


def module_file(module: str, search: Sequence[str]) -> Path | None:
    """The source file of `module` ("pkg.sub.mod") on the `search` path, found without importing anything."""
    parts = module.split(".")
    for entry in search:
        base = Path(entry or ".").joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def top_level_imports(source: str) -> list[Import]:
    """The absolute imports in the module body (also inside a top-level `try`/`if`), in order."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[Import] = []
    statements: list[ast.stmt] = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, tuple(alias.name for alias in node.names if alias.name != "*")))
        elif isinstance(node, (ast.Try, ast.If)):
            handlers = [statement for handler in getattr(node, "handlers", []) for statement in handler.body]
            statements[:0] = [*node.body, *handlers, *node.orelse, *getattr(node, "finalbody", [])]
    return found


def is_installed_library(top: str, roots: tuple[str, ...] | None = None) -> bool:
    """Whether the top-level module `top` is found in site-packages (not the project, not the standard library)."""
    roots = library_roots() if roots is None else roots
    try:
        spec = importlib.machinery.PathFinder.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    places = [spec.origin] if spec.origin else []
    places += list(spec.submodule_search_locations or [])
    return bool(places) and all(os.path.realpath(p).startswith(roots) for p in places if isinstance(p, str))


def library_imports(modules: Iterable[str], project: Sequence[str]) -> list[Import]:
    """The imports of installed libraries made at the top of each of `modules` (found in the `project`
    directories, then on `sys.path`), without duplicates. A name the project itself provides is never one: the
    project's module would shadow the library in the child."""
    roots = library_roots()
    search = [*project, *(entry for entry in sys.path if isinstance(entry, str))]
    wanted: list[Import] = []
    for module in dict.fromkeys(modules):
        path = module_file(module, search)
        if path is None:
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for item in top_level_imports(source):
            top = item[0].partition(".")[0]
            if item in wanted or _in_project(top, project):
                continue
            if is_installed_library(top, roots):
                wanted.append(item)
    return wanted


def _in_project(top: str, project: Sequence[str]) -> bool:
    return any(Path(d, top).is_dir() or Path(d, top + ".py").is_file() for d in project)


def import_all(imports: Iterable[Import]) -> None:
    """Import what `library_imports` found; a failure is the model's to report, when its own child imports it."""
    for module, names in imports:
        with contextlib.suppress(Exception):
            loaded = importlib.import_module(module)
            for name in names:  # lazy packages (transformers) import a submodule on attribute access
                with contextlib.suppress(Exception):
                    getattr(loaded, name)
