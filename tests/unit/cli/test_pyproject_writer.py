"""`flopbudget init --force` and the pyproject writer: no byte of the user's pyproject.toml is ever lost.

The model is a small ONNX file (no torch import), so each `init` runs in well under a second. `--force` replaces
the lines of one table; everything else (other tables, whatever strings, escapes and headers they hold) must come
back byte for byte, the file must keep its mode, owner and symlink, and an edit made while `init` counts must
never be overwritten.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from main_in_process import one_error_line, run_main

from pytest_flopbudget._cli import init as init_module
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._cli.pyproject_writer import NewModel, plan_edit, toml_string
from pytest_flopbudget._config.pyproject import parse_settings

onnx = pytest.importorskip("onnx")

#: The table `init net.onnx` writes for the model below, whatever was there before.
NEW_TABLE_HEADER = "[tool.flopbudget.models.net]\n"


def write_net(path: Path) -> None:
    """Relu on [1, 4]: 4 FLOPs, no parameters (the counts do not matter here, only the file around them)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "demo"
    root.mkdir()
    write_net(root / "net.onnx")
    monkeypatch.chdir(root)
    return root


def old_table(target: str = '"net.onnx"') -> str:
    return f'[tool.flopbudget.models.net]\ntarget = {target}\nflops = "1k"\n'


def init(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_main(["init", "net.onnx", "--force", *argv], root, capsys)


# -- table boundaries ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, after",
    [
        # an escaped quote followed by `[` inside the replaced table: the old scan thought a string stayed open
        # (and an array with it), so it took the next header for a value and deleted that table too
        (old_table(r'"dir \"[x\" b.onnx"'), '[tool.other]\nkey = "kept"\n'),
        (old_table(r"'dir [x.onnx'"), '[tool.other]\nkey = "kept"\n'),
        # the next header quoted and not ASCII, or quoting a `]`: the old header pattern did not know them
        (old_table(), '[tool."café"]\nkey = "kept"\n\n[tool.after]\nx = 1\n'),
        (old_table(), '[ tool . "a]b" ]\nkey = 1\n'),
        (old_table(), "[[tool.array]]\nkey = 1\n"),
        # a multi-line string in the table whose lines look like a header or hold escaped quotes
        (old_table('"""\n[not.a.header]\nnet.onnx"""'), "[tool.x]\nk = 1\n"),
        (old_table('"""a \\""" [ \\\\ net.onnx"""'), "[tool.x]\nk = 1\n"),
        (old_table("'''\n[[x]]\nnet.onnx'''"), "[tool.x]\nk = 1\n"),
        # multi-line arrays (of arrays) and inline tables
        (old_table() + "inputs = { x = [\n  1,\n  4,\n] }\n", "[tool.x]\nk = [\n  [1, 2],\n]\n"),
        # U+2028 and NEL inside a string: TOML lines end at \n only, `str.splitlines` also splits there
        (old_table('"a\u2028b\x85c.onnx"'), "[tool.x]\nk = 1\n"),
        (old_table(), '[tool.x]\ns = "a\u2028b\x85c"\n[tool.y]\nz = 2\n'),
    ],
)
def test_force_replaces_only_the_table_and_keeps_every_later_byte(
    project: Path, capsys: pytest.CaptureFixture[str], table: str, after: str
) -> None:
    before = '[project]\nname = "demo"\n\n[tool.flopbudget]\nbaseline-dir = ".flopbudget"\n\n'
    comment = "# the comment in front of the next table stays\n\n"
    (project / "pyproject.toml").write_bytes((before + table + comment + after).encode())
    code, _, err = init(project, capsys)
    assert code == 0, err
    text = (project / "pyproject.toml").read_bytes().decode()
    assert text.startswith(before) and text.endswith(comment + after)
    new = text[len(before) : len(text) - len(comment + after)]
    assert new.startswith(NEW_TABLE_HEADER) and 'target = "net.onnx"\n' in new and "\nflops = " in new
    assert new.count("[") == 1  # nothing of the old table is left


def test_a_text_the_scanner_cannot_follow_is_not_edited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`plan_edit` refuses rather than guess where the table ends (the scanner returns None)."""
    text = old_table()
    settings_now = parse_settings(text, tmp_path / "pyproject.toml")
    model = NewModel("net", "net.onnx", None, {"flops": "1k"})
    monkeypatch.setattr("pytest_flopbudget._cli.pyproject_writer.locate_statements", lambda text: None)
    with pytest.raises(UsageError, match=r"cannot tell where \[tool.flopbudget.models.net\] ends"):
        plan_edit(tmp_path / "pyproject.toml", text, [model], settings_now, force=True)


# -- the property: every byte outside the replaced table survives ------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
_TRICKY = st.sampled_from(['"', "'", "[", "]", "[[", '\\"', "\\\\", "#", "=", "{", "}", '"""', "'''", "\n"])
_NASTY = st.lists(st.one_of(_TEXT, _TRICKY), max_size=6).map("".join)
_KEY = st.one_of(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), _NASTY.map(toml_string))


def _basic(text: str) -> str:
    return toml_string(text)


def _literal(text: str) -> str | None:
    return f"'{text}'" if all(c not in text for c in "'\n\r") and text.isprintable() else None


def _multi_basic(text: str) -> str:
    return '"""' + toml_string(text)[1:-1].replace("\\n", "\n") + '"""'


def _multi_literal(text: str) -> str | None:
    if "'''" in text or text.endswith("'") or "\r" in text or not all(c.isprintable() or c == "\n" for c in text):
        return None
    return f"'''{text}'''"


@st.composite
def _value(draw: st.DrawFn) -> str:
    text = draw(_NASTY)
    kind = draw(st.sampled_from(["basic", "literal", "multi", "multi-literal", "array", "inline", "number"]))
    if kind == "literal":
        return _literal(text) or _basic(text)
    if kind == "multi":
        return _multi_basic(text)
    if kind == "multi-literal":
        return _multi_literal(text) or _basic(text)
    if kind == "array":
        items = draw(st.lists(_NASTY.map(_basic), max_size=3))
        return "[\n  " + ",\n  [" + ", ".join(items) + "],\n]" if items else "[]"
    if kind == "inline":
        return "{ k = " + _basic(text) + ", n = [1, [2]] }"
    return str(draw(st.integers(-(10**6), 10**6)))


@st.composite
def _table(draw: st.DrawFn, index: int) -> str:
    key = draw(_KEY)
    header = draw(st.sampled_from([f"[tool.t{index}.{key}]", f"[[tool.a{index}.{key}]]", f'[ tool . "t{index}" ]']))
    header = header if "[[" in header or key not in ("", '""') else f"[tool.t{index}]"
    lines = [header + draw(st.sampled_from(["", "  # header comment " + "]["]))]
    for n in range(draw(st.integers(0, 3))):
        lines.append(f"k{n} = {draw(_value())}" + draw(st.sampled_from(["", " # [x] \"'"])))
    return "\n".join(lines) + "\n" + draw(st.sampled_from(["", "\n", "# [tool.comment]\n\n"]))


@st.composite
def _document(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(before, the model table, the comments after it, after): a pyproject with hostile neighbours."""
    before = "".join(draw(_table(i)) for i in range(draw(st.integers(0, 2))))
    before += '[tool.flopbudget]\nbaseline-dir = ".flopbudget"\n\n'
    target = draw(st.sampled_from([_basic, _multi_basic]))(draw(_NASTY).replace("\n", "") + ".onnx")
    extra = draw(st.sampled_from(["", "inputs = { x = [\n  1, 4,\n] }\n", "max-skipped-ops = 0 # [x]\n"]))
    model = f'[tool.flopbudget.models.net]\ntarget = {target}\n{extra}flops = "1k" # "[y]"\n'
    trailer = draw(st.sampled_from(["", "\n", "# about the next table [tool.x]\n\n"]))
    after = "".join(draw(_table(i + 10)) for i in range(draw(st.integers(0, 3))))
    return before, model, trailer, after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_document())
def test_every_byte_outside_the_replaced_table_is_kept(document: tuple[str, str, str, str]) -> None:
    before, model, trailer, after = document
    old = before + model + trailer + after
    path = Path("/nonexistent/pyproject.toml")
    try:
        settings_now = parse_settings(old, path)
    except Exception:  # not valid TOML (a key given twice): nothing to replace; such drafts are rare
        assume(False)
    new_model = NewModel("net", "net.onnx", None, {"flops": "2k"})
    edit = plan_edit(path, old, [new_model], settings_now, force=True)
    assert edit.text == before + new_model.table() + trailer + after


# -- concurrent edits ----------------------------------------------------------------------------------------------


def test_an_edit_saved_while_init_counts_is_not_overwritten(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(old_table())
    edited = old_table() + '\n[tool.mine]\nsaved = "while init counted"\n'
    count = init_module._count

    def count_while_the_user_saves(*args, **kwargs):
        reports = count(*args, **kwargs)
        pyproject.write_text(edited)
        return reports

    monkeypatch.setattr(init_module, "_count", count_while_the_user_saves)
    code, out, err = init(project, capsys)
    assert code == 2
    line = one_error_line(err)
    assert "pyproject.toml: the file changed while flopbudget init was counting" in line
    assert "nothing was written" in line
    assert out == ""
    assert pyproject.read_text() == edited


def test_of_two_concurrent_inits_the_second_fails_and_no_table_is_lost(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both read the file before either writes: the first wins, the second finds its edit and exits 2."""
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.flopbudget]\nbaseline-dir = ".flopbudget"\n')
    count = init_module._count
    results: list[int] = []

    def count_while_another_init_runs(*args, **kwargs):
        reports = count(*args, **kwargs)
        monkeypatch.setattr(init_module, "_count", count)
        results.append(init_module.run_init(init_module.InitRequest(targets=["net.onnx"], name="first"),
                                            sys.stdout, sys.stderr))  # fmt: skip
        return reports

    monkeypatch.setattr(init_module, "_count", count_while_another_init_runs)
    code, _, err = run_main(["init", "net.onnx", "--name", "second"], project, capsys)
    assert results == [0]
    assert code == 2
    assert "the file changed while flopbudget init was counting" in err.splitlines()[-1]
    text = pyproject.read_text()
    assert "[tool.flopbudget.models.first]" in text
    assert "[tool.flopbudget.models.second]" not in text


def test_two_init_processes_at_once_never_both_succeed(project: Path) -> None:
    """Real processes, started together on one file: every table written is in the file, and any init whose
    table is missing exited 2."""
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.flopbudget]\nbaseline-dir = ".flopbudget"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(init_module.__file__).parents[2]), *sys.path])}
    names = [f"m{i}" for i in range(4)]
    processes = {
        name: subprocess.Popen(
            [sys.executable, "-m", "pytest_flopbudget", "init", "net.onnx", "--name", name],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name in names
    }  # fmt: skip
    text_codes = {name: (p.communicate(timeout=120), p.returncode) for name, p in processes.items()}
    text = pyproject.read_text()
    for name, ((_, err), code) in text_codes.items():
        written = f"[tool.flopbudget.models.{name}]" in text
        assert code in (0, 2), err
        assert written == (code == 0), (name, code, err, text)
        if code == 2:
            assert "the file changed while flopbudget init was counting" in err
    assert any(code == 0 for _, code in text_codes.values())


# -- what the file is ----------------------------------------------------------------------------------------------


def test_the_file_mode_is_kept(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(old_table())
    pyproject.chmod(0o600)
    code, _, err = init(project, capsys)
    assert code == 0, err
    assert stat.S_IMODE(pyproject.stat().st_mode) == 0o600


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_root_keeps_the_files_owner(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(old_table())
    os.chown(pyproject, 12345, 23456)
    code, _, err = init(project, capsys)
    assert code == 0, err
    info = pyproject.stat()
    assert (info.st_uid, info.st_gid) == (12345, 23456)


def test_a_relative_symlink_stays_a_link_and_targets_are_written_from_the_real_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`project/pyproject.toml -> ../shared/config/pyproject.toml`: the link is kept, its target edited, and the
    ONNX path is written relative to the real file's directory, where `check` resolves it."""
    shared = tmp_path / "shared" / "config"
    shared.mkdir(parents=True)
    (shared / "pyproject.toml").write_text('[tool.flopbudget]\nbaseline-dir = ".flopbudget"\n')
    project = tmp_path / "project"
    project.mkdir()
    write_net(project / "net.onnx")
    link = project / "pyproject.toml"
    link.symlink_to(Path("..") / "shared" / "config" / "pyproject.toml")
    monkeypatch.chdir(project)
    code, _, err = run_main(["init", "net.onnx"], project, capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "shared", "config", "pyproject.toml")
    assert 'target = "../../project/net.onnx"' in (shared / "pyproject.toml").read_text()
    code, out, err = run_main(["check", "--no-cache", "--no-require-baseline"], project, capsys)
    assert code == 0, out + err


def test_a_fifo_pyproject_is_refused_at_once(tmp_path: Path) -> None:
    """In a child process with a timeout: before the fix, reading the FIFO blocked forever."""
    fifo = tmp_path / "pyproject.toml"
    os.mkfifo(fifo)
    write_net(tmp_path / "net.onnx")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(init_module.__file__).parents[2]), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "init", "net.onnx", "--pyproject", str(fifo)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert one_error_line(done.stderr).endswith(
        "pyproject.toml: not a regular file (a FIFO, a device or a socket); give a pyproject.toml file"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_device_pyproject_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["init", "net.onnx", "--pyproject", "/dev/null"], project, capsys)
    assert code == 2
    assert "/dev/null: not a regular file" in one_error_line(err)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
