"""`flopbudget count | check | diff` in process: exit codes, output, one-line errors, and no writes without --update.

Each test gets its own small project in tmp_path. `run` calls `main()` the way the console script does and then
forgets the project's modules, so a test can edit its model file and run again, as a user would between commits.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model_sources import MLP_CLASS

torch = pytest.importorskip("torch")

from main_in_process import one_error_line, run_main  # noqa: E402

from pytest_flopbudget import __version__, count  # noqa: E402
from pytest_flopbudget._cli import check as cli_check  # noqa: E402
from pytest_flopbudget._cli import main  # noqa: E402

MODELS = (
    """\
import torch
from torch import nn

HIDDEN = 4


"""
    + MLP_CLASS
    + """

class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 2)

    def forward(self, ids, scale=None):
        assert ids.dtype == torch.int64, ids.dtype
        y = self.fc(self.emb(ids))
        return y if scale is None else y * scale


def mlp():
    return MLP()


class Halves(MLP):
    def first_layer(self, x):
        return self.act(self.fc1(x))


def halves():
    return Halves()


def tokens():
    return Tokens()


def token_inputs():
    return {"ids": torch.zeros(1, 5, dtype=torch.int64), "scale": torch.ones(1, 5, 2)}


INSTANCE = MLP()
NUMBER = 3


def broken():
    raise RuntimeError("no weights here")
"""
)

PYPROJECT = """\
[project]
name = "demo"

[tool.flopbudget.models.mlp]
target = "{module}:mlp"
inputs = [[2, 8]]
flops = "200"
params = "50"

[tool.flopbudget.models.tokens]
target = "{module}:tokens"
inputs = [{{ shape = [1, 5], dtype = "int64" }}]
flops = "1k"
"""

#: MLP(8 -> 4 -> 2) on a [2, 8] input; with HIDDEN = 8 every layer doubles (the "widened layer" case).
MLP_FLOPS, WIDE_FLOPS = 180, 356


class Project:
    """A temporary project directory, with `run(*argv)` -> (exit code, stdout, stderr)."""

    def __init__(self, root: Path, module: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.module = module
        self.capsys = capsys

    @property
    def models(self) -> Path:
        return self.root / f"{self.module}.py"

    def widen(self) -> None:
        self.models.write_text(self.models.read_text().replace("HIDDEN = 4", "HIDDEN = 8"))

    def run(self, *argv: str) -> tuple[int, str, str]:
        return run_main(argv, self.root, self.capsys)

    def files(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path, monkeypatch, capsys, request):
    module = "cli_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    root = tmp_path / "demo"
    root.mkdir()
    (root / f"{module}.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(PYPROJECT.format(module=module))
    monkeypatch.chdir(root)
    return Project(root, module, capsys)


# -- help ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", "count", "check", "diff"])
def test_help_shows_an_example_for_every_command(command, capsys):
    argv = [command, "--help"] if command else ["--help"]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out
    examples = out[out.index("examples:") :]
    assert f"flopbudget {command or 'count'}" in examples


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"flopbudget {__version__} (pytest-flopbudget)\n"


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--nope"], "unrecognized arguments: --nope"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["count"], "the following arguments are required: TARGET"),
        (["count", "m:f", "--depth", "-1"], "'-1' is not a depth"),
        (["count", "m:f", "--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_argument_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "--help" in err, err


# -- project and configuration errors -------------------------------------------------------------------------------


def test_missing_pyproject(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if any((d / "pyproject.toml").exists() for d in (tmp_path, *tmp_path.parents)):
        pytest.skip("a pyproject.toml above the temporary directory")
    assert main(["check"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "no pyproject.toml in" in line and "--pyproject PATH" in line


def test_missing_flopbudget_table(project):
    (project.root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    code, out, err = project.run("check")
    assert code == 2 and out == ""
    assert "pyproject.toml has no [tool.flopbudget] table: add [tool.flopbudget.models.NAME]" in one_error_line(err)


def test_table_without_models(project):
    (project.root / "pyproject.toml").write_text('[tool.flopbudget]\nbaseline-dir = "b"\n')
    code, _, err = project.run("check")
    assert code == 2
    assert "[tool.flopbudget] declares no models" in one_error_line(err)


def test_pyproject_option(project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert project.run("check", "--update", "--pyproject", str(project.root / "pyproject.toml"))[0] == 0
    code, _, err = project.run("check", "--pyproject", "nowhere/pyproject.toml")
    assert code == 2 and "--pyproject nowhere/pyproject.toml: no such file" in one_error_line(err)


def test_invalid_configuration_lists_every_problem_with_its_line(project):
    text = (project.root / "pyproject.toml").read_text()
    text = text.replace('flops = "200"', 'flops = "4.1m"').replace('flops = "1k"', 'flop = "1k"')
    (project.root / "pyproject.toml").write_text(text)
    code, out, err = project.run("check")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 3 and "Traceback" not in err, err
    prefix = "flopbudget: error: pyproject.toml:"
    assert lines[0].startswith(f"{prefix}7: tool.flopbudget.models.mlp.flops: '4.1m' is not a budget")
    assert lines[1].startswith(f"{prefix}10: tool.flopbudget.models.tokens: declares no budget")
    assert lines[2].startswith(f"{prefix}13: tool.flopbudget.models.tokens.flop: unknown key; did you mean 'flops'?")


def test_unknown_model_name_suggests_close_ones(project):
    code, out, err = project.run("check", "mlp", "mpl")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert "no model 'mpl' in [tool.flopbudget.models]; did you mean 'mlp'? (models: mlp, tokens)" in line


# -- check ---------------------------------------------------------------------------------------------------------


def test_check_update_then_pass_then_fail_on_a_widened_layer(project):
    code, out, _ = project.run("check", "--update")
    assert code == 0
    assert "baselines in .flopbudget: 2 written, 0 unchanged" in out
    assert sorted(p.name for p in (project.root / ".flopbudget").iterdir()) == ["mlp.json", "tokens.json"]

    code, out, err = project.run("check")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == ["model", "status", "FLOPs", "MACs", "params", "skipped", "budget", "use",
                                           "vs", "baseline"]  # fmt: skip
    assert "mlp     ok" in out and "2 models counted" in out

    project.widen()
    files = project.files()
    code, out, err = project.run("check")
    assert code == 1 and err == ""
    lines = out.splitlines()
    # params are 80% over, FLOPs 78%: the worst first, the other named
    assert lines[0] == "mlp: 90 params > budget 50 params (+80.0%); baseline 46 params (+1 more: FLOPs)"
    assert lines[1] == "FLOPs per layer, against .flopbudget/mlp.json:"
    assert lines[2].split() == ["layer", "baseline", "now", "delta"]
    assert lines[3].split() == ["fc1", "136", "272", "+136", "(+100.0%)"]
    assert "params per layer, against .flopbudget/mlp.json:" in out
    assert "mlp     FAIL" in out and "2 models counted, 1 over budget" in out
    assert project.files() == files, "check writes nothing"


def test_check_prints_what_the_plugin_prints(project):
    """The same functions make the text: compare with check.judge + reason + terminal.details directly."""
    from pytest_flopbudget._config.pyproject import load_settings
    from pytest_flopbudget._front_ends import CLI
    from pytest_flopbudget._judge.baseline import BaselineStore
    from pytest_flopbudget._judge.reason import reason
    from pytest_flopbudget._judge.verdict import Measurement, judge
    from pytest_flopbudget._reporters import terminal

    project.run("check", "--update", "mlp")
    project.widen()
    code, out, _ = project.run("check", "mlp")
    assert code == 1
    sys.path.insert(0, str(project.root))
    try:
        model = __import__(project.module).MLP()
    finally:
        sys.path.remove(str(project.root))
        del sys.modules[project.module]
    settings = load_settings(project.root / "pyproject.toml")
    entry = settings.models["mlp"]
    with torch.no_grad():
        report = count(model.eval(), torch.zeros(2, 8, device="meta"))
    verdict = judge(Measurement("mlp", report, entry.budget, entry.source), BaselineStore(settings.baseline_dir))
    expected = reason(verdict) + "\n" + terminal.details(verdict, front_end=CLI)
    assert out.startswith(expected + "\n\n")


def test_check_without_baseline_says_how_to_create_it(project):
    text = (project.root / "pyproject.toml").read_text().replace('flops = "200"', 'flops = "100"')
    (project.root / "pyproject.toml").write_text(text)
    code, out, _ = project.run("check", "mlp")
    assert code == 1
    assert "top layers by FLOPs:" in out
    assert "no baseline for mlp yet (.flopbudget/mlp.json); run `flopbudget check --update` to create it" in out


def test_check_named_models_only(project):
    code, out, _ = project.run("check", "--update", "tokens")
    assert code == 0 and "1 written" in out
    assert [p.name for p in (project.root / ".flopbudget").iterdir()] == ["tokens.json"]


def test_update_rewrites_only_what_changed_and_exits_0_over_budget(project):
    project.run("check", "--update")
    code, out, _ = project.run("check", "--update")
    assert code == 0 and "0 written, 2 unchanged" in out
    project.widen()
    code, out, _ = project.run("check", "--update")
    assert code == 0, "--update records the new state, even over budget"
    assert "updated, over budget" in out and "1 written, 1 unchanged" in out
    assert json.loads((project.root / ".flopbudget/mlp.json").read_text())["totals"]["flops"] == WIDE_FLOPS


def test_growth_within_budget_is_a_warning(project):
    text = (project.root / "pyproject.toml").read_text().replace('flops = "200"', 'flops = "400"')
    (project.root / "pyproject.toml").write_text(text.replace('params = "50"', 'params = "100"'))
    project.run("check", "--update", "mlp")
    project.widen()
    code, out, _ = project.run("check", "mlp")
    assert code == 0
    assert f"mlp: warning: {WIDE_FLOPS} FLOPs is +97.8% over baseline {MLP_FLOPS} FLOPs" in out


def test_corrupt_baseline_fails_and_is_never_replaced(project):
    project.run("check", "--update", "mlp")
    (project.root / ".flopbudget/mlp.json").write_text("{not json")
    code, out, _ = project.run("check", "mlp")
    assert code == 2 and ".flopbudget/mlp.json:1: the baseline is not valid JSON" in out  # unreadable: 2, not 1
    code, out, err = project.run("check", "--update", "mlp")
    assert code == 2 and "flopbudget: error: baseline for 'mlp' not written" in err
    assert (project.root / ".flopbudget/mlp.json").read_text() == "{not json"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nowhere.models:mlp", "cannot import 'nowhere.models': ModuleNotFoundError: No module named 'nowhere'"),
        ("{module}:missing", "'{module}' has no attribute 'missing'"),
        (
            "{module}:NUMBER",
            "{module}:NUMBER is an int, not a torch.nn.Module (or an object whose .model is one, "
            "as Ultralytics' YOLO) or a factory",
        ),
        ("{module}:broken", "{module}:broken() raised RuntimeError: no weights here"),
    ],
)
def test_a_broken_model_exits_2_and_the_others_are_still_checked(project, target, message):
    target, message = target.format(module=project.module), message.format(module=project.module)
    with (project.root / "pyproject.toml").open("a") as handle:
        handle.write(f'\n[tool.flopbudget.models.broken]\ntarget = "{target}"\ninputs = [[1]]\nflops = "1"\n')
    code, out, err = project.run("check")
    assert code == 2  # errors go to stderr, one line each, as docs/cli.md says
    assert err == f"flopbudget: error: pyproject.toml:16: tool.flopbudget.models.broken.target: {message}\n"
    assert "mlp     ok" in out and "tokens  ok" in out
    assert out.rstrip().endswith("1 model not checked: broken")


def test_a_model_that_raises_names_its_table(project):
    text = (project.root / "pyproject.toml").read_text().replace("inputs = [[2, 8]]", "inputs = [[2, 9]]")
    (project.root / "pyproject.toml").write_text(text)
    code, _, err = project.run("check", "mlp")
    assert code == 2
    assert err.startswith(
        "flopbudget: error: pyproject.toml:4: tool.flopbudget.models.mlp: the model raised in layer 'fc1'"
    )


# -- diff ----------------------------------------------------------------------------------------------------------


def test_diff_without_a_baseline(project):
    code, out, _ = project.run("diff", "mlp")
    assert code == 2
    assert out == (
        "error: mlp: no baseline yet (.flopbudget/mlp.json); run `flopbudget check --update mlp` to create it\n"
    )


def test_diff_shows_every_metric_that_changed_without_judging(project):
    project.run("check", "--update")
    code, out, _ = project.run("diff")
    assert code == 0
    assert f"mlp: no change since .flopbudget/mlp.json ({MLP_FLOPS} FLOPs, 80 MACs, 46 params)" in out
    project.widen()
    files = project.files()
    code, out, _ = project.run("diff", "mlp")
    assert code == 0, "diff does not judge budgets"
    lines = out.splitlines()
    assert lines[0] == (
        f"mlp: {MLP_FLOPS} FLOPs -> {WIDE_FLOPS} FLOPs (+97.8%), 80 MACs -> 160 MACs (+100.0%), "
        "46 params -> 90 params (+95.7%)"
    )
    titles = [line for line in lines if line.endswith("against .flopbudget/mlp.json:")]
    assert titles == [f"{m} per layer, against .flopbudget/mlp.json:" for m in ("FLOPs", "MACs", "params")]
    assert project.files() == files


def test_diff_notes_a_baseline_counted_with_other_inputs(project):
    project.run("check", "--update", "mlp")
    text = (project.root / "pyproject.toml").read_text().replace("inputs = [[2, 8]]", "inputs = [[4, 8]]")
    (project.root / "pyproject.toml").write_text(text)
    code, out, _ = project.run("diff", "mlp")
    assert code == 0
    assert "note: the baseline was counted with inputs [2x8 float32], now [4x8 float32]" in out


# -- count ---------------------------------------------------------------------------------------------------------


def test_count_table(project):
    code, out, err = project.run("count", f"{project.module}:mlp", "--input", "2,8")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"{project.module}:mlp: 2x8 float32; inference"
    assert [line.split()[0] for line in lines[3:7]] == ["(model)", "fc1", "act", "fc2"], "forward order"
    # bytes moved, fp32: fc1 reads x 2*8, W 4*8, b 4 and writes 2*4 (60 elements), act reads and writes 2*4 (16),
    # fc2 reads 2*4, W 2*4, b 2 and writes 2*2 (22): 98 elements * 4 = 392 B; 180 / 392 = 0.459 FLOPs/byte
    assert lines[3].split() == ["(model)", str(MLP_FLOPS), "80", "46", "100.0%", "392", "0.459"]
    assert f"total: {MLP_FLOPS} FLOPs, 80 MACs, 46 params" in out
    assert "memory: 392 bytes moved (392 B), 0.459 FLOPs/byte; 184 param bytes (184 B)" in out
    assert any(line.startswith("peak memory ") for line in lines)
    assert "skipped ops: none" in out


def test_count_json_is_the_report(project):
    code, out, _ = project.run("count", f"{project.module}:INSTANCE", "-i", "2x8", "--format", "json")
    assert code == 0
    data = json.loads(out)
    with torch.no_grad():
        expected = count(torch.nn.Sequential(), torch.zeros(1))  # any report, for the layout
    # and the arithmetic intensity `count` adds to the Report's layout: FLOPs per byte moved, 180 / 392
    assert set(data) == set(expected.to_dict()) | {"intensity"}
    assert data["intensity"] == MLP_FLOPS / 392
    # the memory metrics too, as every PyTorch report carries them: fp32 parameters are 4 bytes each
    assert data["totals"] == {"flops": MLP_FLOPS, "macs": 80, "params": 46, "param-bytes": 4 * 46,
                              "buffer-bytes": 0, "bytes": data["totals"]["bytes"]}  # fmt: skip
    assert data["totals"]["bytes"] > 4 * 46


def test_count_a_pyproject_model_and_override_its_inputs(project):
    code, out, _ = project.run("count", "mlp", "--depth", "0")
    assert code == 0
    assert out.splitlines()[0] == "mlp: 2x8 float32; inference"
    assert len([line for line in out.splitlines() if line.startswith("  ")]) == 0, "depth 0: the model row only"
    code, out, _ = project.run("count", "mlp", "--input", "4,8")
    assert code == 0 and f"total: {2 * MLP_FLOPS} FLOPs" in out


def test_count_training_step(project):
    code, out, _ = project.run("count", "mlp", "--training", "--depth", "all")
    assert code == 0
    assert out.splitlines()[0] == "mlp: 2x8 float32; training step (forward + backward)"
    assert "; forward 184 FLOPs, backward 212 FLOPs" in out  # the forward includes the scalar loss (a sum)


def test_count_dtypes_keywords_and_input_functions(project):
    target = f"{project.module}:tokens"
    code, out, _ = project.run("count", target, "--input", "1,5", "--dtype", "int64")
    assert code == 0 and "1x5 int64" in out
    code, out, _ = project.run("count", target, "--input", "ids=1,5:int64", "scale=1,5,2")
    assert code == 0 and "ids=" not in out.splitlines()[0]  # torch inputs are described by shape
    with_scale = out
    code, out, _ = project.run("count", target, "-i", "ids=1,5:int64", "-i", "scale=1,5,2")
    assert code == 0 and out == with_scale, "one --input with two shapes or the option twice"
    code, out, _ = project.run("count", target, "--input", f"{project.module}:token_inputs")
    assert code == 0
    assert out.splitlines()[-3] == with_scale.splitlines()[-3], "same totals from a function and from shapes"
    code, out, _ = project.run("count", target, "--input", "1,5")
    assert code == 0 and out.splitlines()[0].endswith(": 1x5 int64; inference"), "ids feed an embedding: int64"
    code, out, _ = project.run("count", target, "--input", "1,5:float32")
    assert code == 2, "a given dtype wins: float32 token ids meet the model's own assertion"


def test_count_a_method_other_than_forward(project):
    target = f"{project.module}:halves"
    code, out, _ = project.run("count", target, "--input", "2,8", "--method", "first_layer", "--depth", "all")
    assert code == 0, out
    # fc1 (8 -> 4 on 2 rows): 2*2*8*4 = 128 + 8 bias + 8 relu; fc2 does not run
    assert "total: 144 FLOPs, 64 MACs" in out
    code, _, err = project.run("count", target, "--input", "2,8", "--method", "nope")
    assert code == 2
    assert "--method: Halves has no method 'nope'; its own methods: first_layer" in one_error_line(err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["count", "{module}:mlp", "--input", "2;8"], "--input '2;8' is not a shape"),
        (["count", "{module}:nothing", "--input", "2,8"], "{module}:nothing: '{module}' has no attribute 'nothing'"),
        (["count", "nowhere:mlp", "--input", "2,8"], "nowhere:mlp: cannot import 'nowhere'"),
        (["count", "{module}:mlp", "--input", "2,9"], "{module}:mlp: the model raised in layer 'fc1' (Linear)"),
        (["count", "mlpp"], "no model 'mlpp' in [tool.flopbudget.models]; did you mean 'mlp'?"),
        (["count", "missing.onnx"], "missing.onnx: no such ONNX file"),
        (["count", "mlp", "--dtype", "f32"], "--dtype: unknown dtype 'f32'"),
    ],
)
def test_count_errors_are_one_line(project, argv, message):
    code, out, err = project.run(*[a.format(module=project.module) for a in argv])
    assert code == 2 and out == ""
    assert message.format(module=project.module) in one_error_line(err)


def test_count_without_a_project_for_a_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if any((d / "pyproject.toml").exists() for d in (tmp_path, *tmp_path.parents)):
        pytest.skip("a pyproject.toml above the temporary directory")
    assert main(["count", "resnet"]) == 2
    assert "'resnet' is not a package.module:factory reference or an .onnx path" in one_error_line(
        capsys.readouterr().err
    )


# -- ONNX targets ----------------------------------------------------------------------------------------------------


@pytest.fixture
def onnx_model(project):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/features/conv/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="/features/relu/Relu")]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], b"\0" * 432, raw=True)],
    )
    path = project.root / "net.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


#: Conv 3->4, 3x3, pad 1 on 8x8: 4*8*8*27 = 6912 MACs per image, + 256 ReLU.
NET_FLOPS = 2 * 6912 + 256


def test_count_onnx_by_name_or_position(project, onnx_model):
    code, out, _ = project.run("count", "net.onnx", "--input", "x=2,3,8,8")
    assert code == 0 and f"total: {2 * NET_FLOPS:,} FLOPs" in out
    assert out.splitlines()[0] == "net.onnx: x=2x3x8x8 float32; inference"
    code, out, _ = project.run("count", "net.onnx", "--input", "1,3,8,8", "--depth", "1")
    assert code == 0 and f"total: {NET_FLOPS:,} FLOPs" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the sizes of some input dimensions are not known; graph inputs: 'x' [batch, 3, 8, 8]; give them as "
             "--input x=<batch>,3,8,8 with each <...> replaced by a size"),
        (["--input", "1,3,8,8", "--training"], "--training applies to PyTorch, JAX or TensorFlow models only"),
        (["--input", "1,3,8,8", "--dtype", "int64"], "--dtype applies to PyTorch, JAX or TensorFlow models only"),
        (["--input", "1,3,8,8", "--method", "decode"], "--method applies to PyTorch models only"),
        (["--input", "1,3,8,8:int64"], "an ONNX graph declares its own input dtypes"),
        (["--input", "1,3,8,8", "--input", "1,3,8,8"], "2 --input shapes for 1 graph input(s) (x)"),
        (["--input", "y=1,3,8,8"], "inputs= names 'y', which is not a graph input"),
    ],
)  # fmt: skip
def test_count_onnx_errors(project, onnx_model, argv, message):
    code, _, err = project.run("count", "net.onnx", *argv)
    assert code == 2
    assert message in one_error_line(err)


# -- robustness ------------------------------------------------------------------------------------------------------


def test_an_internal_error_is_one_line_unless_traceback_is_asked_for(project, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyError("bug")

    monkeypatch.setattr(cli_check, "count_into", explode)
    code, _, err = project.run("check")
    assert code == 2
    assert "internal error: KeyError: 'bug'; rerun with --traceback" in one_error_line(err)
    with pytest.raises(KeyError):
        project.run("check", "--traceback")


def test_keyboard_interrupt(project, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_check, "count_into", interrupt)
    code, _, err = project.run("check")
    assert code == 130 and one_error_line(err) == "flopbudget: error: interrupted"


def test_no_bytecode_is_written_for_the_users_modules(project, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert project.run("count", "mlp")[0] == 0
    assert not (project.root / "__pycache__").exists()
    assert sys.dont_write_bytecode is False, "restored afterwards"


def test_main_module_is_the_cli(tmp_path: Path) -> None:
    run = functools.partial(subprocess.run, cwd=tmp_path, capture_output=True, text=True, check=False)
    usage = run([sys.executable, "-m", "pytest_flopbudget", "--help"])
    assert usage.returncode == 0 and "flopbudget" in usage.stdout
    # exit codes and output pass through console_main, also after torch is imported (os._exit path)
    missing = run([sys.executable, "-m", "pytest_flopbudget", "count", "no_such_module:f", "--input", "1,2"])
    assert missing.returncode == 2 and "no_such_module" in missing.stderr
    counted = run([sys.executable, "-m", "pytest_flopbudget", "count", "torch.nn:Identity", "--input", "1,2"])
    assert counted.returncode == 0 and "skipped ops: none" in counted.stdout


def test_a_hand_edited_baseline_is_unreadable_not_over_budget(project):
    # lowering a baseline's total by hand (to make growth look smaller) leaves it unequal to the sum of its layers
    assert project.run("check", "--update", "mlp")[0] == 0
    path = project.root / ".flopbudget/mlp.json"
    data = json.loads(path.read_text())
    data["totals"]["params"] -= 10
    path.write_text(json.dumps(data))
    code, out, _ = project.run("check", "mlp")
    assert code == 2  # the check could not run for this model: its baseline cannot be trusted
    row = next(line for line in out.splitlines() if line.startswith("mlp "))
    assert row.split()[1:3] == ["baseline", "unreadable"]
    assert "total params 36 is not the sum of its layers (46)" in out
    assert "1 model counted, 1 with an unreadable baseline" in out
