"""`[tool.flopbudget]`: validation with file/line/key errors, the TOML line locator, and resolving targets."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import (
    DEFAULT_BASELINE_DIR,
    InputSpec,
    ModelEntry,
    find_pyproject,
    load_settings,
    parse_settings,
)
from pytest_flopbudget._config.toml_locator import line_of, locate_keys
from pytest_flopbudget._errors import ConfigError, CountingError

DESIGN_EXAMPLE = """\
[project]
name = "demo"

[tool.flopbudget]
baseline-dir = ".flopbudget"            # committed; one JSON file per model

[tool.flopbudget.models.resnet50]
target = "examples.resnet:resnet50"     # "module:callable" returning an nn.Module
inputs = [[1, 3, 224, 224]]             # input shapes (float32)
flops = "8.3G"                          # ceilings
params = "25.6M"
max-skipped-ops = 0
training = false
"""


def parse(text: str, tmp_path: Path) -> object:
    path = tmp_path / "pyproject.toml"
    path.write_text(textwrap.dedent(text))
    return load_settings(path)


def problems(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LocatedError) as info:
        parse(text, tmp_path)
    assert isinstance(info.value, ConfigError)
    return str(info.value).splitlines()


# -- the line locator ------------------------------------------------------------------------------------------


def test_locator_finds_headers_keys_dotted_keys_and_inline_tables() -> None:
    text = textwrap.dedent(
        """\
        # comment [not.a.table]
        [tool.flopbudget]
        baseline-dir = "b"   # trailing = comment

        [tool.flopbudget.models]
        tiny = { target = "m:f", inputs = [[1, 2]],
                 flops = "1k" }
        other.target = "m:g"
        "quoted name".flops = 3
        multi = { target = '''x
        y''', inputs = [
            [1, 2],  # inner comment
            {shape = [3], dtype = "int64"},
        ], params = 4 }

        [tool.flopbudget.models.deep]
        target = "a:b"
        s = "string with [brackets] and = signs # not a comment"
        flops = 7
        [[tool.other]]
        x = 1
        """
    )
    lines = locate_keys(text)
    assert lines[("tool", "flopbudget")] == 2
    assert lines[("tool", "flopbudget", "baseline-dir")] == 3
    assert lines[("tool", "flopbudget", "models", "tiny")] == 6
    assert lines[("tool", "flopbudget", "models", "tiny", "inputs")] == 6
    assert lines[("tool", "flopbudget", "models", "tiny", "flops")] == 7
    assert lines[("tool", "flopbudget", "models", "other", "target")] == 8
    assert lines[("tool", "flopbudget", "models", "quoted name", "flops")] == 9
    assert lines[("tool", "flopbudget", "models", "multi", "inputs")] == 11
    assert lines[("tool", "flopbudget", "models", "multi", "params")] == 14
    assert lines[("tool", "flopbudget", "models", "deep")] == 16
    assert lines[("tool", "flopbudget", "models", "deep", "flops")] == 19
    assert lines[("tool", "other", "0", "x")] == 21  # an array's element is under its index, as in tomllib's list
    assert line_of(lines, ("tool", "flopbudget", "models", "multi", "inputs", "1", "dtype")) == 13
    assert line_of(lines, ("nowhere",)) is None


def test_locator_survives_text_it_does_not_understand() -> None:
    lines = locate_keys("[a]\nx = 1\n[broken")
    assert (lines[("a",)], lines[("a", "x")]) == (1, 2)
    assert locate_keys('x = "unterminated\ny = 2') == {("x",): 1}


# -- valid configuration ---------------------------------------------------------------------------------------


def test_design_example(tmp_path: Path) -> None:
    settings = parse(DESIGN_EXAMPLE, tmp_path)
    assert settings.root == tmp_path.resolve()
    assert settings.baseline_dir == tmp_path.resolve() / ".flopbudget"
    assert settings.collect_models is True
    entry = settings.models["resnet50"]
    assert entry.target == "examples.resnet:resnet50"
    assert entry.inputs == [InputSpec((1, 3, 224, 224))]
    assert entry.budget.limit("flops").value == 8_300_000_000
    assert entry.budget.limit("params").value == 25_600_000
    assert entry.budget.limit("skipped").value == 0
    assert entry.training is False and entry.execution == "fake"
    assert entry.source.line == 7 and entry.source.key == "tool.flopbudget.models.resnet50"
    assert entry.budget.limit("flops").source.line == 10
    assert entry.source_of("inputs").line == 9


def test_every_input_form(tmp_path: Path) -> None:
    settings = parse(
        """
        [tool.flopbudget.models.tokens]
        target = "pkg.models:decoder"
        inputs = [{shape = [1, 16], dtype = "int64"}, [2]]
        macs = "1G"
        [tool.flopbudget.models.kw]
        target = "pkg.models:Net.build"
        inputs = {x = [1, 3], mask = {shape = [1, 3], dtype = "bool"}}
        flops = 1
        [tool.flopbudget.models.from_code]
        target = "pkg.models:net"
        inputs = "pkg.models:example_inputs"
        flops = 1
        training = true
        execution = "real"
        [tool.flopbudget.models.graph]
        target = "models/net.onnx"
        inputs = {input = [1, 3, 224, 224]}
        max-increase = "2%"
        [tool.flopbudget.models.fixed_graph]
        target = "net.ONNX"
        flops = "1 GMACs"
        """,
        tmp_path,
    )
    models = settings.models
    assert models["tokens"].inputs == [InputSpec((1, 16), "int64"), InputSpec((2,))]
    assert models["kw"].inputs == {"x": InputSpec((1, 3)), "mask": InputSpec((1, 3), "bool")}
    assert models["from_code"].inputs == "pkg.models:example_inputs"
    assert models["from_code"].training is True and models["from_code"].execution == "real"
    assert models["graph"].target == "models/net.onnx"
    assert models["graph"].inputs == {"input": InputSpec((1, 3, 224, 224))}
    assert models["fixed_graph"].inputs is None and models["fixed_graph"].budget.limit("macs").value == 10**9


def test_no_table_gives_defaults(tmp_path: Path) -> None:
    settings = parse("[project]\nname = 'x'\n", tmp_path)
    assert settings.models == {} and settings.baseline_dir.name == DEFAULT_BASELINE_DIR
    assert load_settings(None, tmp_path).baseline_dir == tmp_path.resolve() / DEFAULT_BASELINE_DIR


def test_project_options(tmp_path: Path) -> None:
    settings = parse('[tool.flopbudget]\nbaseline-dir = "ci/budgets"\ncollect-models = false\n', tmp_path)
    assert settings.baseline_dir == tmp_path.resolve() / "ci" / "budgets"
    assert settings.collect_models is False


def test_find_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_pyproject(tmp_path / "a" / "b") == (tmp_path / "pyproject.toml").resolve()


# -- errors ----------------------------------------------------------------------------------------------------


def test_budget_error_names_file_line_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DESIGN_EXAMPLE.replace('flops = "8.3G"', 'flops = "4.1m"')
    (line,) = problems(text, tmp_path, monkeypatch)
    assert line.startswith("pyproject.toml:10: tool.flopbudget.models.resnet50.flops: '4.1m' is not a budget: ")
    assert "4.1 GFLOPs" in line  # the grammar


def test_all_errors_are_reported_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = problems(
        """\
        [tool.flopbudget]
        baseline_dir = ".fb"
        collect-models = "yes"

        [tool.flopbudget.models.a]
        target = "not a target"
        inputs = [[1, -3]]
        flop = "1G"
        flops = "4.1Gi"
        training = "no"

        [tool.flopbudget.models.b]
        inputs = [[1]]
        params = -1
        execution = "fast"

        [tool.flopbudget.models.c]
        target = "m:f"
        inputs = [{shape = [1], dtype = "int65", colour = "red"}]

        [tool.flopbudget.models.d]
        target = "m:f"
        flops = 1

        [tool.flopbudget.models.e]
        target = "m:f"
        inputs = [[1]]
        """,
        tmp_path,
        monkeypatch,
    )
    expected = [
        "pyproject.toml:2: tool.flopbudget.baseline_dir: unknown key; did you mean 'baseline-dir'? expected one of: "
        "baseline-dir, collect-models, require-baseline, models",
        "pyproject.toml:3: tool.flopbudget.collect-models: expected true or false, got 'yes'",
        "pyproject.toml:6: tool.flopbudget.models.a.target: 'not a target' is not a target; expected "
        '"package.module:factory" (returning a torch.nn.Module, or the module itself), a path to a SavedModel '
        "directory or a path to an .onnx file",
        "pyproject.toml:7: tool.flopbudget.models.a.inputs.0: [1, -3] is not a shape; expected a list of "
        "non-negative integers such as [1, 3, 224, 224] ([] for a 0-d scalar)",
        "pyproject.toml:8: tool.flopbudget.models.a.flop: unknown key; did you mean 'flops'? expected one of: target, "
        "inputs, method, training, execution, flops, macs, int-ops, params, max-skipped-ops, bytes, param-bytes, "
        "buffer-bytes, "
        "peak-memory, max-increase",
        "pyproject.toml:9: tool.flopbudget.models.a.flops: '4.1Gi' is not a budget: binary prefixes",
        "pyproject.toml:10: tool.flopbudget.models.a.training: expected true or false, got 'no'",
        "pyproject.toml:12: tool.flopbudget.models.b: missing key 'target'",
        "pyproject.toml:14: tool.flopbudget.models.b.params: -1 is not a budget: it is negative",
        'pyproject.toml:15: tool.flopbudget.models.b.execution: expected "fake" or "real", got \'fast\'',
        "pyproject.toml:17: tool.flopbudget.models.c: declares no budget",
        "pyproject.toml:19: tool.flopbudget.models.c.inputs.0.colour: unknown key; expected one of: shape, dtype",
        "pyproject.toml:19: tool.flopbudget.models.c.inputs.0.dtype: unknown dtype 'int65'; expected one of: float32",
        "pyproject.toml:21: tool.flopbudget.models.d: missing key 'inputs'",
        "pyproject.toml:25: tool.flopbudget.models.e: declares no budget; set at least one of: flops, macs, int-ops, "
        "params, max-skipped-ops, bytes, param-bytes, buffer-bytes, peak-memory, max-increase",
    ]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected):
        assert line.startswith(start)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('target = "m.onnx"\ninputs = [[1, 3]]\nflops = 1', "inputs: an ONNX target takes a table of input name"),
        (
            'target = "m.onnx"\ntraining = true\nflops = 1',
            "training: training = true applies to PyTorch, JAX or TensorFlow targets",
        ),
        ('target = "m.onnx"\nexecution = "real"\nflops = 1', "execution: execution applies to PyTorch targets"),
        ('target = "m.onnx"\ninputs = {x = {shape = [1], dtype = "int64"}}\nflops = 1', "x.dtype: an ONNX graph"),
        ('target = "m:f"\ninputs = "not callable"\nflops = 1', "inputs: 'not callable' is not a \"module:function\""),
        ('target = "m:f"\ninputs = 3\nflops = 1', "inputs: expected a list of shapes"),
        ('target = "m:f"\ninputs = [{dtype = "int64"}]\nflops = 1', "inputs.0: missing key 'shape'"),
        ("target = 5\ninputs = []\nflops = 1", "target: 5 is not a target"),
        ('target = "m:f"\ninputs = []\nmax-increase = 2', "max-increase: 2 is not a percentage"),
        ('target = "m:f"\ninputs = []\nflops = "2 GMACs"\nmacs = "1G"', "already does"),
    ],
)
def test_model_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, expected: str) -> None:
    (line,) = problems(f"[tool.flopbudget.models.m]\n{body}\n", tmp_path, monkeypatch)
    assert line.startswith("pyproject.toml:")
    assert expected in line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tool]\nflopbudget = 3\n", "pyproject.toml:2: tool.flopbudget: expected a table, got an integer"),
        ("[tool.flopbudget]\nmodels = [1]\n", "pyproject.toml:2: tool.flopbudget.models: expected a table of models"),
        ("[tool.flopbudget.models]\nm = 1\n", "pyproject.toml:2: tool.flopbudget.models.m: expected a table"),
        ('[tool.flopbudget]\nbaseline-dir = ""\n', "pyproject.toml:2: tool.flopbudget.baseline-dir: expected a"),
        ("[tool.flopbudget\n", "pyproject.toml:1: invalid TOML: "),
        (
            '[tool.flopbudget.models."vit tiny"]\ntarget = "m:f"\nflops = 1\n',
            'pyproject.toml:1: tool.flopbudget.models."vit tiny": missing key',
        ),
    ],
)
def test_project_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str) -> None:
    (line,) = problems(text, tmp_path, monkeypatch)
    assert line.startswith(expected)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(LocatedError, match="cannot read the file"):
        load_settings(tmp_path / "missing" / "pyproject.toml")


def test_parse_settings_is_usable_on_text(tmp_path: Path) -> None:
    settings = parse_settings(DESIGN_EXAMPLE, tmp_path / "pyproject.toml")
    assert list(settings.models) == ["resnet50"]


# -- resolving targets (imports torch and the user's code) -----------------------------------------------------

torch = pytest.importorskip("torch")

from pytest_flopbudget._backends import count_entry  # noqa: E402
from pytest_flopbudget._backends.torch_models import build_inputs, import_object, load_model  # noqa: E402

MODELS = """\
import torch

SEEN = []

class Probe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, scale=None):
        SEEN.append((self.training, torch.is_grad_enabled()))
        return self.drop(self.fc(x))

def probe():
    return Probe()

instance = Probe()

def broken():
    raise RuntimeError("no weights here\\nsecond line")

def not_a_model():
    return 42

def inputs_tuple():
    return (torch.zeros(2, 4),)

def inputs_dict():
    return {"x": torch.zeros(2, 4)}

def inputs_tensor():
    return torch.zeros(2, 4)

def bad_inputs():
    raise ValueError("shapes unknown")

class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids):
        assert ids.dtype == torch.int64
        return self.emb(ids)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / f"fbpkg_{tmp_path.name}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    return tmp_path


def entry_for(project: Path, **toml: str) -> ModelEntry:
    package = f"fbpkg_{project.name}"
    body = "\n".join(f"{k} = {v}" for k, v in toml.items()).replace("PKG", package)
    (project / "pyproject.toml").write_text(f"[tool.flopbudget.models.m]\n{body}\n")
    return load_settings(project / "pyproject.toml").models["m"]


def test_import_object_puts_the_root_on_sys_path(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs="[[2, 4]]", flops="1")
    assert callable(import_object(entry.target, project, entry.source))


def test_inference_models_count_in_eval_under_no_grad(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:instance"', inputs="[[2, 4]]", flops="1")
    model = load_model(entry, project)
    model.train()
    module = __import__(f"fbpkg_{project.name}.models", fromlist=["SEEN"])
    report = count_entry(entry, project)
    assert module.SEEN[-1] == (False, False)
    assert model.training is True  # restored
    assert report.flops == 2 * 2 * 4 * 3 + 2 * 3 and report.backward.flops == 0
    assert report.inputs == [{"shape": [2, 4], "dtype": "float32"}]


def test_training_models_count_forward_and_backward(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs="[[2, 4]]", flops="1", training="true")
    report = count_entry(entry, project)
    assert report.training is True and report.backward.flops > 0


@pytest.mark.parametrize("function", ["inputs_tuple", "inputs_dict", "inputs_tensor"])
def test_inputs_from_code(project: Path, function: str) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs=f'"PKG.models:{function}"', flops="1")
    assert count_entry(entry, project).flops == 54


def test_generated_inputs_have_the_declared_dtype(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:Tokens"', inputs='[{shape = [1, 5], dtype = "int64"}]', flops="1")
    args, kwargs = build_inputs(entry, project)
    assert args[0].dtype == torch.int64 and kwargs == {}
    # token ids are known values in fake mode (docs/inputs.md): real zeros, small, never meta
    assert not args[0].is_meta and not args[0].any()
    assert count_entry(entry, project).params == 40


def test_named_inputs_are_keyword_arguments(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs="{x = [2, 4]}", flops="1")
    assert build_inputs(entry, project)[1]["x"].shape == (2, 4)
    assert count_entry(entry, project).flops == 54


def test_real_execution_uses_real_zeros(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs="[[2, 4]]", flops="1", execution='"real"')
    (tensor,), _ = build_inputs(entry, project)
    assert not tensor.is_meta
    assert count_entry(entry, project).flops == 54


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ({"target": '"fbpkg_nowhere.models:probe"'}, "target: cannot import 'fbpkg_nowhere.models': ModuleNotFound"),
        ({"target": '"PKG.models:missing"'}, "target: 'PKG.models' has no attribute 'missing'"),
        ({"target": '"PKG.models:broken"'}, "target: PKG.models:broken() raised RuntimeError: no weights here"),
        ({"target": '"PKG.models:not_a_model"'}, "target: PKG.models:not_a_model() returned an int, not a torch"),
        ({"target": '"PKG.models:SEEN"'}, "target: PKG.models:SEEN is a list, not a torch.nn.Module (or an"),
        ({"inputs": '"PKG.models:bad_inputs"'}, "inputs: PKG.models:bad_inputs() raised ValueError: shapes unknown"),
        ({"target": '"missing.onnx"', "inputs": "{x = [1]}"}, "target: no such ONNX file"),
    ],
)
def test_target_errors_name_the_key(project: Path, toml: dict[str, str], expected: str) -> None:
    entry = entry_for(project, **{"target": '"PKG.models:probe"', "inputs": "[[2, 4]]", "flops": "1", **toml})
    with pytest.raises(LocatedError) as info:
        count_entry(entry, project)
    message = str(info.value)
    assert message.startswith("pyproject.toml:")
    assert expected.replace("PKG", f"fbpkg_{project.name}") in message
    assert "\n" not in message


def test_model_failure_names_the_model_table(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:probe"', inputs="[[2, 5]]", flops="1")
    with pytest.raises(CountingError) as info:
        count_entry(entry, project)
    assert str(info.value).startswith("pyproject.toml:1: tool.flopbudget.models.m: the model raised in layer 'fc'")


def write_onnx(path: Path) -> None:
    """A one-MatMul graph (x[batch, 8] @ W[8, 4]) with a symbolic batch dimension."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    weight = helper.make_tensor("W", TensorProto.FLOAT, [8, 4], [0.0] * 32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_onnx_target_is_counted_with_named_shapes(project: Path) -> None:
    (project / "graphs").mkdir()
    write_onnx(project / "graphs" / "net.onnx")
    entry = entry_for(project, target='"graphs/net.onnx"', inputs="{x = [2, 8]}", macs="64")
    report = count_entry(entry, project)
    assert (report.macs, report.params, report.backend) == (64, 32, "onnx")


def test_locator_finds_each_element_of_an_array_of_tables_on_its_own_line() -> None:
    text = (
        "[tool.flopbudget.models.gpt]\n"  # 1
        'at = [{ seq = 64, flops = "1" },\n'  # 2
        '      { seq = 32, macs = "1" }]\n'  # 3
        "[[tool.flopbudget.models.vit.at]]\n"  # 4
        "seq = 8\n"  # 5
        "[[tool.flopbudget.models.vit.at]]\n"  # 6
        'peak-memory = "1"\n'  # 7
        "[tool.flopbudget.models.vit.at.extra]\n"  # 8: a table below the second element
        "x = 1\n"  # 9
    )
    lines = locate_keys(text)
    models = ("tool", "flopbudget", "models")
    assert lines[(*models, "gpt", "at", "0", "flops")] == 2
    assert lines[(*models, "gpt", "at", "1", "macs")] == 3
    assert lines[(*models, "vit", "at")] == 4
    assert lines[(*models, "vit", "at", "0", "seq")] == 5
    assert lines[(*models, "vit", "at", "1")] == 6
    assert lines[(*models, "vit", "at", "1", "peak-memory")] == 7
    assert lines[(*models, "vit", "at", "1", "extra", "x")] == 9


def test_the_reserved_dim_names_are_every_name_sympy_reads_as_something_else() -> None:
    """A formula string must parse back with sympy as it is: a dim named E (Euler's number), I, pi, oo, N, S,
    lambda or None would not. The list is data (no sympy import to validate a pyproject): it must hold every name
    of the installed sympy's namespace, Python's builtins and keywords that does not read as its own symbol."""
    import builtins
    import keyword

    sympy = pytest.importorskip("sympy")
    from sympy.parsing.sympy_parser import parse_expr

    from pytest_flopbudget._config.sympy_names import SYMPY_NAMES

    universe = set(sympy.__all__) | set(dir(builtins)) | set(keyword.kwlist) | set(keyword.softkwlist)
    for name in sorted(n for n in universe if n.isidentifier()):
        try:
            reads_as_itself = parse_expr(name) == sympy.Symbol(name)
        except Exception:
            reads_as_itself = False
        assert reads_as_itself != (name in SYMPY_NAMES), name


@pytest.mark.parametrize("name", ["E", "I", "pi", "oo", "N", "S", "lambda", "None", "gamma"])
def test_a_dim_sympy_reads_as_something_else_is_refused_with_one_line(tmp_path, name: str) -> None:
    text = (
        f'[tool.flopbudget.models.m]\ntarget = "m:f"\ninputs = [[1, "{name}"]]\ndims = {{ {name} = 8 }}\nflops = "1"\n'
    )
    with pytest.raises(LocatedError) as raised:
        parse_settings(text, tmp_path / "pyproject.toml")
    assert f"{name!r} cannot name a dim: sympy reads it as a constant, function or keyword" in str(raised.value)
