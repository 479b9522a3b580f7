"""The layers point one way: `lint-imports` keeps every contract in pyproject.toml's `[tool.importlinter]`, and no
import cycle remains among the package's modules, lazy (function-level) and TYPE_CHECKING imports included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "pytest_flopbudget"


def _environment() -> dict[str, str]:
    """This checkout first on the path, so the contracts are checked against the code under test."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _package_graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None)


def _importlinter_settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]


def test_lint_imports_keeps_every_contract() -> None:
    binary = Path(sys.executable).with_name("lint-imports")
    if not binary.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    done = subprocess.run(
        [str(binary), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_contracts_count_type_checking_imports() -> None:
    """import-linter would drop `if TYPE_CHECKING:` imports with this option; they are dependencies too."""
    assert str(_importlinter_settings().get("exclude_type_checking_imports", False)).lower() != "true"


def test_the_graph_holds_lazy_and_type_checking_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the contracts and the cycle test below rely on: grimp records a function-level import and an import
    under `if TYPE_CHECKING:` as edges, like any other."""
    package = tmp_path / "layered_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "leaf.py").write_text("VALUE = 1\n")
    (package / "lazy.py").write_text("def f():\n    from layered_probe import leaf\n    return leaf.VALUE\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from layered_probe.leaf import VALUE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("layered_probe", cache_dir=None)
    assert graph.direct_import_exists(importer="layered_probe.lazy", imported="layered_probe.leaf")
    assert graph.direct_import_exists(importer="layered_probe.typed", imported="layered_probe.leaf")


def test_no_import_cycle_among_the_package_modules() -> None:
    graph = _package_graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*cycle, cycle[0]]) for cycle in cycles)


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "cyclic_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic_probe import b\n")
    (package / "b.py").write_text("def f():\n    from cyclic_probe import c\n")
    (package / "c.py").write_text("import cyclic_probe.a\n")
    (package / "d.py").write_text("import cyclic_probe.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cycles = _cycles(grimp.build_graph("cyclic_probe", cache_dir=None))
    assert cycles == [["cyclic_probe.a", "cyclic_probe.b", "cyclic_probe.c"]]


def test_no_module_imports_the_package_root() -> None:
    """The root re-exports the public API and so imports most of the package: importing it from inside closes a
    cycle (`from pytest_flopbudget import __version__` did; the version lives in the leaf `version.py`)."""
    assert _package_graph().find_modules_that_directly_import(PACKAGE) == set()


def test_the_leaves_import_nothing_from_the_package() -> None:
    """The last layer of the contract: modules anything may import, which import nothing of ours themselves."""
    layers = next(c["layers"] for c in _importlinter_settings()["contracts"] if c["type"] == "layers")
    graph = _package_graph()
    leaves = [f"{PACKAGE}.{name.strip().strip('()')}" for name in layers[-1].split("|")]
    present = [leaf for leaf in leaves if leaf in graph.modules]
    assert f"{PACKAGE}._atomic_file" in present
    for leaf in present:
        ours = {m for m in graph.find_modules_directly_imported_by(leaf) if m.split(".")[0] == PACKAGE}
        assert not ours, f"{leaf} imports {sorted(ours)}"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One cycle (as a list of modules) per strongly connected component of more than one module, or of one
    module that imports itself; Tarjan's algorithm, iterative so that a deep chain cannot exhaust the stack."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    components.append(sorted(component))
    return [_one_cycle(component, edges) for component in components]


def _one_cycle(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    members, start = set(component), component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in edges[node]:
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1]
                if successor in members and successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    return component  # pragma: no cover - a strongly connected component always holds a cycle
