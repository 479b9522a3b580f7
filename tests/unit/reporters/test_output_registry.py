"""The outputs by kind: built-in ones imported only when a run names them, a third party's from its entry point."""

from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pytest_flopbudget._reporters import ci
from pytest_flopbudget._reporters.ci import ENTRY_POINT_GROUP, ReportSpec, ReportSpecError, emit, parse_spec
from pytest_flopbudget._run import RunResult, Unchecked


class Writes:
    """A third party's output: writes the unchecked models' names."""

    def write(self, findings: object, path: str | None, context: object) -> None:
        assert path is not None
        Path(path).write_text(",".join(e.name for e in findings.result.unchecked) + "\n")  # type: ignore[attr-defined]


class Raises:
    workspace_variables = ()

    def write(self, findings: object, path: str | None, context: object) -> None:
        raise ValueError("a bug\non two lines")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry points as if a package had installed them (a fresh cache of loaded outputs)."""
    here = __name__
    points = {
        "csv": EntryPoint("csv", f"{here}:Writes", ENTRY_POINT_GROUP),
        "raises": EntryPoint("raises", f"{here}:Raises", ENTRY_POINT_GROUP),
        "broken": EntryPoint("broken", "no_such_module_here:Output", ENTRY_POINT_GROUP),
        "odd": EntryPoint("odd", "os.path:sep", ENTRY_POINT_GROUP),
        "json": EntryPoint("json", f"{here}:Writes", ENTRY_POINT_GROUP),  # a built-in kind's name: ours wins
        "Terminal": EntryPoint("Terminal", f"{here}:Writes", ENTRY_POINT_GROUP),
        "auto": EntryPoint("auto", f"{here}:Writes", ENTRY_POINT_GROUP),
    }

    class Found:
        def select(self, group: str) -> list[EntryPoint]:
            assert group == ENTRY_POINT_GROUP
            return list(points.values())

    monkeypatch.setattr("importlib.metadata.entry_points", Found)
    monkeypatch.setattr(ci, "_entry_points", None)
    monkeypatch.setattr(ci, "_loaded", {})


def test_every_built_in_kind_is_an_output() -> None:
    assert set(ci.PATH_KINDS) | {"github"} <= set(ci.BUILT_IN)
    for kind in ci.BUILT_IN:
        assert callable(ci.output(kind).write), kind


def test_a_check_imports_only_the_outputs_it_names() -> None:
    """The terminal text is imported; the HTTP poster, the Markdown summary and the pictures are not."""
    code = (
        "import sys\n"
        "from pytest_flopbudget._cli import check\n"
        "from pytest_flopbudget._reporters import ci\n"
        "ci.output(ci.TERMINAL.kind); ci.resolve_specs(['json:x.json'], {})\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('pytest_flopbudget._reporters.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "pytest_flopbudget._reporters.terminal" in loaded
    for absent in ("github_api", "pr_comment", "markdown", "diff_pictures", "json_report", "gitlab"):
        assert f"pytest_flopbudget._reporters.{absent}" not in loaded, absent


@pytest.mark.usefixtures("installed")
def test_an_installed_output_is_a_path_kind_and_writes(tmp_path: Path) -> None:
    target = tmp_path / "deeper" / "out.csv"
    spec = parse_spec(f"CSV:{target}")
    assert spec == ReportSpec("csv", str(target))
    assert emit(RunResult(unchecked=[Unchecked("a", "m")]), [spec], env={}).ok
    assert target.read_text() == "a\n"
    with pytest.raises(ReportSpecError, match=r"^report 'csv': csv needs a file, as in csv:PATH; expected .*csv:PATH"):
        parse_spec("csv")


@pytest.mark.usefixtures("installed")
def test_unknown_and_broken_kinds_are_one_line() -> None:
    with pytest.raises(ReportSpecError) as info:
        parse_spec("cvs:x")
    assert str(info.value) == (
        "unknown report 'cvs:x'; expected github, gitlab:PATH, json:PATH, markdown:PATH, metrics:PATH, "
        "benchmark:PATH, bencher:PATH, comment:PATH, pictures:PATH, broken:PATH, csv:PATH, odd:PATH, raises:PATH, "
        "auto or none"
    )
    with pytest.raises(ReportSpecError) as info:
        parse_spec("broken:x")
    assert str(info.value) == (
        "the broken output (broken = no_such_module_here:Output in the pytest_flopbudget.outputs entry points) "
        "cannot be loaded: ModuleNotFoundError: No module named 'no_such_module_here'"
    )
    with pytest.raises(ReportSpecError) as info:
        parse_spec("odd:x")
    assert str(info.value) == (
        "the odd output (odd = os.path:sep in the pytest_flopbudget.outputs entry points) is not an output: it has "
        "no write(findings, path, context) method"
    )


@pytest.mark.usefixtures("installed")
def test_a_built_in_kind_wins_and_a_third_partys_bug_costs_its_own_file_only(tmp_path: Path) -> None:
    assert type(ci.output("json")).__name__ == "JsonOutput"
    assert "terminal" not in ci.third_party() and "auto" not in ci.third_party()
    with pytest.raises(ReportSpecError, match=r"^unknown report 'terminal:x'"):
        parse_spec("terminal:x")
    specs = [ReportSpec("raises", str(tmp_path / "r")), ReportSpec("gitlab", str(tmp_path / "g.json"))]
    emitted = emit(RunResult(), specs, env={}, stream=io.StringIO())
    assert emitted.errors == [
        "flopbudget: error: the raises report raises:"
        + str(tmp_path / "r")
        + " failed: ValueError: a bug\\x0aon two lines"
    ]
    assert (tmp_path / "g.json").exists()
