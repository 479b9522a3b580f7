"""`flopbudget init`: the tables it writes (ceilings derived by hand), what it keeps, and what it refuses.

Every test works in its own project in tmp_path and calls `main()` as the console script does. A model module gets
a name unique to the test, so the in-process imports of one test never see another's module.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from main_in_process import one_error_line, run_main

from pytest_flopbudget._cli import main
from pytest_flopbudget._cli.init import parse_headroom, suggest_ceiling
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.pyproject import InputSpec, load_settings

torch = pytest.importorskip("torch")

#: `tiny`: Linear(8 -> 2) on [1, 8]: 16 MACs, 2*16 + 2 (bias) = 34 FLOPs, 8*2 + 2 = 18 params.
#: `square`: Linear(1000 -> 1000) on [1, 1000]: 10^6 MACs, 2*10^6 + 1000 = 2,001,000 FLOPs, 1,001,000 params.
MODELS = """\
from torch import nn


def tiny():
    return nn.Linear(8, 2)


def square():
    return nn.Linear(1000, 1000)


def build():
    return nn.Linear(8, 2)


def broken():
    raise RuntimeError("no weights here")
"""


class Project:
    def __init__(self, root: Path, module: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.root, self.module, self.capsys = root, module, capsys

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    def run(self, *argv: str) -> tuple[int, str, str]:
        return run_main(argv, self.root, self.capsys)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], request) -> Project:
    module = "init_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    root = tmp_path / "demo"
    root.mkdir()
    (root / f"{module}.py").write_text(MODELS)
    monkeypatch.chdir(root)
    return Project(root, module, capsys)


def write_onnx(path: Path, channels: int = 4) -> None:
    """Conv(3 -> channels, 3x3, pad 1) + ReLU on [batch, 3, 8, 8]."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [channels, 3, 3, 3], b"\0" * (4 * 27 * channels), raw=True)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="/relu/Relu"),
        ],
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[weight],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


# -- suggested ceilings --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "headroom", "ceiling"),
    [
        (34, 2, "35"),  # 34 * 1.02 = 34.68 -> 35
        (18, 2, "19"),  # 18.36 -> 19
        (2_001_000, 2, "2.05M"),  # 2,041,020 -> 2.05M (3 significant digits, up)
        (1_001_000, 2, "1.03M"),  # 1,021,020 -> 1.03M
        (8_178_368_512, 2, "8.35G"),  # 8,341,935,882.24 -> 8.35G
        (8_178_368_512, 0, "8.18G"),  # only the rounding
        (999_999, 0, "1M"),  # 999.999k rounds up to 1000k, written 1M
        (0, 2, "0"),
        (100, 0, "100"),
        (1000, 10, "1.1k"),
    ],
)
def test_suggested_ceiling_is_the_count_plus_headroom_rounded_up(count, headroom, ceiling):
    assert suggest_ceiling(count, Decimal(headroom)) == ceiling


@pytest.mark.parametrize(("text", "value"), [(None, Decimal(2)), ("5", Decimal(5)), ("2.5%", Decimal("2.5")), ("0", 0)])
def test_headroom_is_a_percentage(text, value):
    assert parse_headroom(text) == value


@pytest.mark.parametrize("text", ["-1", "abc", "nan", "inf", "1001", ""])
def test_a_bad_headroom_is_refused(text):
    with pytest.raises(UsageError, match="--headroom"):
        parse_headroom(text)


# -- writing tables ------------------------------------------------------------------------------------------------


def test_init_creates_pyproject_and_check_passes_after_update(project: Project):
    code, out, err = project.run("init", f"{project.module}:tiny", "--input", "1,8")
    assert code == 0, err
    assert project.pyproject.read_text() == (
        "[tool.flopbudget]\n"
        'baseline-dir = ".flopbudget"\n'
        "\n"
        "[tool.flopbudget.models.tiny]\n"
        "# flopbudget init: ceilings = count + 2%, rounded up to 3 significant digits\n"
        f'target = "{project.module}:tiny"\n'
        "inputs = [[1, 8]]\n"
        'flops = "35"\n'
        'params = "19"\n'
        "max-skipped-ops = 0\n"
    )
    assert out.splitlines() == [
        'pyproject.toml:4: added [tool.flopbudget.models.tiny]: flops = "35" (count 34 FLOPs), '
        'params = "19" (count 18 params), max-skipped-ops = 0',
        "next: run `flopbudget check --update` to record the baselines in .flopbudget/, then commit "
        "pyproject.toml and .flopbudget/",
    ]
    settings = load_settings(project.pyproject)
    entry = settings.models["tiny"]
    assert entry.inputs == [InputSpec((1, 8))]
    assert {m: limit.value for m, limit in entry.budget.limits.items()} == {"flops": 35, "params": 19, "skipped": 0}
    assert not (project.root / ".flopbudget").exists(), "init writes no baseline"
    assert project.run("check", "--update")[0] == 0
    code, out, err = project.run("check")
    assert code == 0, out + err
    assert (project.root / ".flopbudget" / "tiny.json").is_file()


def test_large_counts_get_readable_ceilings_and_options_are_written(project: Project):
    code, _, err = project.run(
        "init", f"{project.module}:square", "--input", "input=1,1000", "--name", "sq", "--execution", "real",
        "--training", "--headroom", "0",
    )  # fmt: skip
    assert code == 0, err
    text = project.pyproject.read_text()
    assert 'inputs = { input = [1, 1000] }\ntraining = true\nexecution = "real"\n' in text
    # training: forward 2,001,000 + a sum loss and the backward; only its ceiling's form is checked here
    entry = load_settings(project.pyproject).models["sq"]
    assert entry.training and entry.execution == "real"
    assert entry.budget.limits["params"].text == "1.01M"  # 1,001,000 rounded up, no headroom


def test_int_dtype_inputs_and_generic_factory_names(project: Project):
    code, _, err = project.run("init", f"{project.module}:build", "--input", "1,8", "--dry-run")
    assert code == 0, err
    assert not project.pyproject.exists()
    code, out, err = project.run("init", f"{project.module}:square", "--input", "1,1000:float64", "--dry-run")
    assert code == 0, err
    assert 'inputs = [{ shape = [1, 1000], dtype = "float64" }]' in out


def test_dry_run_prints_the_tables_and_writes_nothing(project: Project):
    project.pyproject.write_text('[project]\nname = "demo"\n')
    code, out, err = project.run("init", f"{project.module}:build", "--input", "1,8", "--dry-run")
    assert code == 0, err
    assert out.startswith("would change pyproject.toml with:\n\n[tool.flopbudget]\n")
    # `build` says nothing about the model: the table is named after its module
    assert f"[tool.flopbudget.models.{project.module}]\n" in out
    assert out.endswith("(dry run: nothing was written)\n")
    assert project.pyproject.read_text() == '[project]\nname = "demo"\n'


def test_existing_bytes_are_kept_crlf_and_missing_final_newline_included(project: Project):
    old = b'[project]\r\nname = "demo"\r\n\r\n[tool.ruff]\r\nline-length = 120  # keep'
    project.pyproject.write_bytes(old)
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8")
    assert code == 0, err
    new = project.pyproject.read_bytes()
    assert new.startswith(old + b"\r\n\r\n[tool.flopbudget]\r\n")
    assert b"\n" not in new.replace(b"\r\n", b"")  # the file's own line endings throughout
    assert "tiny" in load_settings(project.pyproject).models


def test_tables_are_appended_after_existing_models(project: Project):
    old = (
        "[tool.flopbudget]\n"
        'baseline-dir = "budgets"\n'
        "\n"
        "[tool.flopbudget.models.old]\n"
        f'target = "{project.module}:tiny"\n'
        "inputs = [[1, 8]]\n"
        'flops = "1k"\n'
    )
    project.pyproject.write_text(old)
    code, out, err = project.run("init", f"{project.module}:square", "--input", "1,1000")
    assert code == 0, err
    text = project.pyproject.read_text()
    assert text.startswith(old + "\n[tool.flopbudget.models.square]\n")
    assert "[tool.flopbudget]" not in text[len(old) :], "the project table exists: not declared twice"
    assert text.count('flops = "2.05M"') == 1 and 'params = "1.03M"' in text
    assert "pyproject.toml:9: added [tool.flopbudget.models.square]" in out
    assert "baselines in budgets/" in out
    assert set(load_settings(project.pyproject).models) == {"old", "square"}


def test_an_existing_name_is_refused_unless_force(project: Project):
    old = (
        '[project]\nname = "demo"\n\n'
        "[tool.flopbudget.models.tiny]\n"
        f'target = "{project.module}:tiny"\n'
        "inputs = [[1, 8]]\n"
        'flops = "1k"   # hand-written\n'
        "\n"
        "# the next table's own comment\n"
        "[tool.flopbudget.models.other]\n"
        f'target = "{project.module}:tiny"\n'
        "inputs = [[1, 8]]\n"
        'flops = "2k"\n'
    )
    project.pyproject.write_text(old)
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8")
    assert code == 2
    assert one_error_line(err) == (
        "flopbudget: error: pyproject.toml: [tool.flopbudget.models.tiny] exists already; choose another name "
        "with --name, or pass --force to replace it"
    )
    assert project.pyproject.read_text() == old
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8", "--force")
    assert code == 0, err
    text = project.pyproject.read_text()
    head, _, tail = old.partition("[tool.flopbudget.models.tiny]\n")
    assert text.startswith(head + "[tool.flopbudget.models.tiny]\n# flopbudget init")
    assert text.endswith("max-skipped-ops = 0\n\n" + tail[tail.index("# the next table") :])
    assert 'flops = "1k"' not in text
    models = load_settings(project.pyproject).models
    assert models["tiny"].budget.limits["flops"].value == 35
    assert models["other"].budget.limits["flops"].value == 2000


def test_force_refuses_a_model_declared_inline(project: Project):
    old = f'[tool.flopbudget.models]\ntiny = {{ target = "{project.module}:tiny", inputs = [[1, 8]], flops = "1k" }}\n'
    project.pyproject.write_text(old)
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8", "--force")
    assert code == 2
    assert "is not declared by its own [table] header" in one_error_line(err)
    assert project.pyproject.read_text() == old


def test_a_file_a_table_cannot_join_is_refused_unchanged(project: Project):
    inline = f'{{ a = {{ target = "{project.module}:tiny", inputs = [[1, 8]], flops = "1" }} }}'
    old = f"[tool.flopbudget]\nmodels = {inline}\n"
    project.pyproject.write_text(old)
    code, _, err = project.run("init", f"{project.module}:square", "--input", "1,1000")
    assert code == 2
    line = one_error_line(err)
    assert "pyproject.toml: adding the tables would leave a file that does not read back" in line
    assert "--dry-run" in line
    assert project.pyproject.read_text() == old


def test_an_invalid_existing_config_is_reported_first(project: Project):
    old = '[tool.flopbudget]\nbaseline-dri = "x"\n'
    project.pyproject.write_text(old)
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8")
    assert code == 2
    assert "pyproject.toml:2: tool.flopbudget.baseline-dri: unknown key" in err
    assert project.pyproject.read_text() == old


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{m}:tiny"], "{m}:tiny: give the model's example inputs with --input"),
        (["nothing"], "'nothing' is not a target"),
        (["missing.onnx"], "missing.onnx: no such ONNX file"),
        (["{m}:tiny", "{m}:build", "--input", "1,8", "--name", "x"], "--name names one model, but the targets give 2"),
        (["{m}:tiny", "--input", "1,8", "--name", "a b"], "--name 'a b': use letters, digits, '_' and '-' only"),
        (["{m}:tiny", "{m}:tiny", "--input", "1,8"], "two targets would both be named 'tiny'"),
        (["{m}:tiny", "--input", "1,8", "--headroom", "x"], "--headroom 'x'"),
        (["{m}:broken", "--input", "1,8"], "{m}:broken: {m}:broken() raised RuntimeError: no weights here"),
        (["{m}:tiny", "--input", "1,9"], ": {m}:tiny: the model raised"),
        (["{m}:tiny", "--input", "1,8", "--pyproject", "no/such/pyproject.toml"], "the directory"),
    ],
)
def test_errors_are_one_line_and_write_nothing(project: Project, argv, message):
    code, _, err = project.run("init", *(a.format(m=project.module) for a in argv))
    assert code == 2, err
    assert message.format(m=project.module) in one_error_line(err)
    assert not project.pyproject.exists()


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["init", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "flopbudget init models/ --dry-run" in out[out.index("examples:") :]


# -- ONNX ----------------------------------------------------------------------------------------------------------


def test_onnx_file_with_a_symbolic_input(project: Project):
    # Conv 3->4, 3x3, pad 1 on [2, 3, 8, 8]: 2*4*64 outputs * 27 = 13,824 MACs = 27,648 FLOPs, + ReLU 512
    # = 28,160 FLOPs -> +2% = 28,723.2 -> 28.8k; params 4*27 = 108 -> 110.16 -> 111
    write_onnx(project.root / "models" / "net.onnx")
    code, _, err = project.run("init", "models/net.onnx")
    assert code == 2
    assert "--input x=<batch>,3,8,8" in one_error_line(err)
    code, _, err = project.run("init", "models/net.onnx", "--input", "2,3,8,8")
    assert code == 0, err
    text = project.pyproject.read_text()
    assert (
        "[tool.flopbudget.models.net]\n# flopbudget init: ceilings = count + 2%, rounded up to 3 significant digits\n"
        'target = "models/net.onnx"\ninputs = { x = [2, 3, 8, 8] }\nflops = "28.8k"\nparams = "111"\n'
        "max-skipped-ops = 0\n"
    ) in text
    assert project.run("check", "--update")[0] == 0
    assert project.run("check")[0] == 0


def test_a_folder_takes_every_onnx_file_below_it(project: Project, monkeypatch: pytest.MonkeyPatch):
    write_onnx(project.root / "models" / "a" / "net.onnx")
    write_onnx(project.root / "models" / "b" / "net.ONNX", channels=8)
    write_onnx(project.root / "models" / "solo-v1.2.onnx")
    write_onnx(project.root / "models" / ".cache" / "hidden.onnx")
    (project.root / "sub").mkdir()
    monkeypatch.chdir(project.root / "sub")  # paths are written relative to the pyproject.toml's folder
    project.pyproject.write_text('[project]\nname = "demo"\n')
    code, _, err = project.run("init", "../models", "--input", "x=1,3,8,8")
    assert code == 0, err
    models = load_settings(project.pyproject).models
    assert {name: entry.target for name, entry in models.items()} == {
        "a_net": "models/a/net.onnx",
        "b_net": "models/b/net.ONNX",
        "solo-v1_2": "models/solo-v1.2.onnx",
    }
    # 8 channels: twice the 4-channel count (1 row: 6,912 MACs -> 14,080 FLOPs; x2 = 28,160 -> 28.8k)
    assert models["b_net"].budget.limits["flops"].text == "28.8k"
    assert models["a_net"].budget.limits["flops"].text == "14.4k"
    monkeypatch.chdir(project.root)
    assert project.run("check", "--update")[0] == 0
    assert project.run("check")[0] == 0


def test_an_empty_folder_is_refused(project: Project):
    (project.root / "empty").mkdir()
    code, _, err = project.run("init", "empty")
    assert code == 2
    assert "empty: no .onnx file or directory holding saved_model.pb in this folder or below" in one_error_line(err)


def test_force_replaces_a_table_with_a_multi_line_array_and_keeps_what_follows(project: Project):
    old = (
        "[tool.flopbudget.models.tiny]\n"
        f'target = "{project.module}:tiny"\n'
        "inputs = [\n"
        "    [1, 8],\n"  # a value, not a [table] header
        "]\n"
        'flops = "1k"\n'
        "\n"
        "[[tool.other.items]]\n"  # an array of tables ends the table too
        "x = 1\n"
    )
    project.pyproject.write_text(old)
    code, _, err = project.run("init", f"{project.module}:tiny", "--input", "1,8", "--force")
    assert code == 0, err
    text = project.pyproject.read_text()
    assert "    [1, 8],\n" not in text and 'flops = "1k"' not in text
    assert text.endswith("\n[[tool.other.items]]\nx = 1\n")
    assert list(load_settings(project.pyproject).models) == ["tiny"]
