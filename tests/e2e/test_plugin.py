"""The pytest plugin end to end, through `pytester`: every scenario runs once serially and once under `-n 2`.

Expected figures are computed here with `count()` on the same model source, so these tests check the plugin's
wiring (budgets, baselines, items, options, xdist) and not the counting formulas, which have their own tests.
Scenarios are grouped so that each pytest run checks several behaviours: an xdist run starts two workers that
import torch, and that startup dominates the time of this file.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from e2e_helpers import RunPytest, inner_pytest

from tests.model_sources import MLP_CLASS

torch = pytest.importorskip("torch")

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._judge.baseline import dumps, read_baseline  # noqa: E402
from pytest_flopbudget._render.formatting import format_pair, format_percent, format_value  # noqa: E402

MODELS = (
    """\
import torch
from torch import nn


"""
    + MLP_CLASS.replace("hidden=HIDDEN", "hidden=4")
    + '''

class Odd(nn.Module):
    """Calls an op that has no FLOP formula, twice."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        return torch.fft.rfft(y, dim=1).real[:, 0] + torch.fft.rfft(y, dim=1).real[:, 1]


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids):
        assert ids.dtype == torch.int64
        return self.emb(ids)


def mlp():
    return MLP()


def odd():
    return Odd()


def inputs():
    return (torch.zeros(2, 8),)


def not_a_model():
    return 42


def broken():
    raise RuntimeError("no weights")


def bad_inputs():
    raise ValueError("no example inputs")
'''
)

#: The same MLP, wider, without its activation and with one more layer: every kind of per-layer change.
WIDER_MODELS = MODELS.replace(
    """        self.fc1 = nn.Linear(8, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))""",
    """        self.fc1 = nn.Linear(8, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, 2)
        self.extra = nn.Linear(2, 2)

    def forward(self, x):
        return self.extra(self.fc2(self.fc1(x)))""",
)
assert WIDER_MODELS != MODELS


def reference(source: str = MODELS, factory: str = "MLP", *inputs: Any, **kw: Any) -> Any:
    """Count a model from `source` in this process, without importing it as a module."""
    namespace: dict[str, Any] = {"__name__": "e2e_reference_models"}
    exec(compile(source, "models.py", "exec"), namespace)
    model = namespace[factory]().eval()
    with torch.no_grad() if not kw.get("training") else torch.enable_grad():
        return count(model, *(inputs or (torch.zeros(2, 8),)), **kw)


REF = reference()
F, M, P = REF.flops, REF.macs, REF.params
ODD = reference(MODELS, "Odd")
S = ODD.skipped_calls
TOKENS = reference(MODELS, "Tokens", torch.zeros(1, 5, dtype=torch.int64))
TRAIN = reference(MODELS, "MLP", training=True)
WIDE = reference(WIDER_MODELS)
assert S >= 1, "the Odd model must have uncounted ops; pick another op if FFTs gained a formula"
assert TRAIN.flops > F and WIDE.flops > F


def onnx_graph() -> bytes | None:
    """A one-MatMul ONNX graph (x[batch, 8] @ W[8, 4]: 64 MACs for a batch of 2), or None without onnx."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        return None
    weight = helper.make_tensor("W", TensorProto.FLOAT, [8, 4], [0.0] * 32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


ONNX = onnx_graph()


@pytest.fixture(params=["serial", pytest.param("xdist", marks=pytest.mark.slow)])
def run(request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunPytest:
    """Run pytest in the pytester directory, serially or with `-n 2`; wide terminal so messages are not cut."""
    return inner_pytest(pytester, monkeypatch, request.param)


def outcomes(result: pytest.RunResult) -> dict[str, tuple[str, str]]:
    """nodeid -> (PASSED | FAILED | ERROR, message) from the short test summary."""
    found: dict[str, tuple[str, str]] = {}
    summary = False
    for line in result.outlines:
        if "short test summary info" in line:
            summary = True
        elif summary:
            match = re.match(r"(PASSED|FAILED|ERROR|SKIPPED) (\S+)(?: - (.*))?$", line)
            if match:
                found[match.group(2)] = (match.group(1), match.group(3) or "")
    return found


def section(result: pytest.RunResult, title: str) -> list[str]:
    """The lines of every report section `title` (e.g. the per-layer diff), concatenated."""
    lines, inside = [], False
    for line in result.outlines:
        header = re.match(r"^[-=_]{3,} (.*?) [-=_]{3,}$", line)
        if header:
            inside = header.group(1) == title
        elif inside:
            lines.append(line)
    return lines


def summary(result: pytest.RunResult) -> list[str]:
    return section(result, "flopbudget")


def assert_clean(result: pytest.RunResult) -> None:
    """No traceback into plugin internals."""
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text
    assert "pytest_flopbudget/" not in text and "pytest_flopbudget\\" not in text
    assert "INTERNALERROR" not in text


def ceiling(name: str, now: int, limit: int, metric: str = "flops") -> str:
    shown_now, shown_limit = format_pair(now, limit, metric)
    return f"{name}: {shown_now} > budget {shown_limit} ({format_percent(now - limit, limit)})"


def model_table(name: str, target: str = "models:mlp", inputs: str = "[[2, 8]]", **keys: object) -> str:
    body = "\n".join(f"{key} = {json.dumps(value)}" for key, value in keys.items())
    return f'[tool.flopbudget.models.{name}]\ntarget = "{target}"\ninputs = {inputs}\n{body}\n'


# -- budgets: both sides of every limit, pyproject items and markers -------------------------------------------


def test_every_limit_both_sides(pytester: pytest.Pytester, run: Any) -> None:
    pytester.makepyfile(models=MODELS)
    pytester.makepyprojecttoml(
        "\n".join(
            [
                model_table("flops_eq", flops=F),
                model_table("flops_over", flops=F - 1),
                model_table("flops_string", flops=f"{F} FLOPs"),
                model_table("macs_eq", macs=M),
                model_table("macs_over", macs=M - 1),
                model_table("mac_unit_eq", flops=f"{M} MACs"),
                model_table("mac_unit_over", flops=f"{M - 1} MACs"),
                model_table("params_eq", params=P),
                model_table("params_over", params=str(P - 1)),
                model_table("skipped_eq", "models:odd", **{"max-skipped-ops": S}),
                model_table("skipped_over", "models:odd", **{"max-skipped-ops": S - 1}),
                model_table("tokens", "models:Tokens", '[{shape = [1, 5], dtype = "int64"}]', params=TOKENS.params),
                model_table("from_code", inputs='"models:inputs"', flops=F),
                model_table("keyword", inputs="{x = [2, 8]}", flops=F),
                model_table("training", training=True, flops=TRAIN.flops),
                model_table("training_over", training=True, flops=TRAIN.flops - 1),
                model_table("onnx_eq", "graph.onnx", "{x = [2, 8]}", macs=64) if ONNX else "",
                model_table("onnx_over", "graph.onnx", "{x = [2, 8]}", macs=63) if ONNX else "",
            ]
        )
    )
    if ONNX:
        (pytester.path / "graph.onnx").write_bytes(ONNX)
    pytester.makepyfile(
        test_a=f"""
        import pytest
        import torch
        from models import MLP, Odd

        X = torch.zeros(2, 8)

        @pytest.mark.flop_budget({F})
        def test_flops_eq(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget({F - 1})
        def test_flops_over(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget(macs={M}, params="{P}")
        def test_macs_params_eq(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget(macs={M - 1})
        def test_macs_over(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget(params={P - 1})
        def test_params_over(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget("{M} MACs")
        def test_mac_unit_eq(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget(max_skipped_ops={S})
        def test_skipped_eq(flopbudget):
            flopbudget.count(Odd(), X)

        @pytest.mark.flop_budget(max_skipped_ops={S - 1})
        def test_skipped_over(flopbudget):
            flopbudget.count(Odd(), X)

        @pytest.mark.flop_budget(name="flops_eq")
        def test_named(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget({F - 1}, name="flops_eq")
        def test_named_tighter(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget({F}, name="flops_over")
        def test_named_looser(flopbudget):
            flopbudget.count(MLP(), X)

        @pytest.mark.flop_budget(name="training")
        def test_named_training(flopbudget):
            flopbudget.count(MLP(), X, training=True)
        """
    )
    result = run()
    got = outcomes(result)
    failing = {
        "pyproject.toml::flops_over",
        "pyproject.toml::macs_over",
        "pyproject.toml::mac_unit_over",
        "pyproject.toml::params_over",
        "pyproject.toml::skipped_over",
        "pyproject.toml::training_over",
        "test_a.py::test_flops_over",
        "test_a.py::test_macs_over",
        "test_a.py::test_params_over",
        "test_a.py::test_skipped_over",
        "test_a.py::test_named_tighter",
    } | ({"pyproject.toml::onnx_over"} if ONNX else set())
    assert len(got) == (30 if ONNX else 28)
    assert {node for node, (status, _) in got.items() if status == "FAILED"} == failing
    assert {status for node, (status, _) in got.items() if node not in failing} == {"PASSED"}
    assert result.ret == pytest.ExitCode.TESTS_FAILED

    assert got["pyproject.toml::flops_over"][1] == ceiling("flops_over", F, F - 1)
    assert got["pyproject.toml::mac_unit_over"][1] == ceiling("mac_unit_over", M, M - 1, "macs")
    assert got["pyproject.toml::params_over"][1] == ceiling("params_over", P, P - 1, "params")
    assert got["pyproject.toml::skipped_over"][1].startswith(
        f"skipped_over: {format_value(S, 'skipped')} > budget {format_value(S - 1, 'skipped')}"
    )
    # a marker test's line starts with the test's own name, and the model's when name= shares a pyproject model
    assert got["test_a.py::test_flops_over"][1] == ceiling("test_flops_over", F, F - 1)
    assert got["test_a.py::test_named_tighter"][1] == ceiling("test_named_tighter (flops_eq)", F, F - 1)

    # No baseline yet: the failure shows the top layers and how to create one.
    diff = section(result, "flopbudget per-layer diff")
    assert "top layers by FLOPs:" in diff
    assert any(line.split()[:1] == ["fc1"] for line in diff)
    assert (
        "no baseline for flops_over yet (.flopbudget/flops_over.json); run `pytest --flopbudget-update` to create it"
        in diff
    )
    assert "skipped ops (counted as zero):" in diff

    # The summary (printed once, by the controller) lists every counted model with its figures and budget use.
    assert sum(1 for line in result.outlines if re.match(r"^-+ flopbudget -+$", line)) == 1
    rows = summary(result)
    assert rows[0].split()[:3] == ["model", "status", "FLOPs"]
    assert rows[-1] == f"{len(got)} models counted, {len(failing)} over budget"
    flops_eq = next(r for r in rows if r.startswith("flops_eq (pyproject.toml::flops_eq)"))
    assert "100.0% flops" in flops_eq and "no baseline" in flops_eq
    assert_clean(result)
    assert not (pytester.path / ".flopbudget").exists()  # never written without --flopbudget-update


# -- baselines: update, determinism, per-layer diff, max-increase ---------------------------------------------


def test_update_then_diff(pytester: pytest.Pytester, run: Any) -> None:
    """Update writes every counted model (even over budget) except over a file it cannot read; a later run
    diffs against the baselines, per layer, and never writes."""
    pytester.makepyfile(models=MODELS)
    pytester.makepyprojecttoml(
        '[tool.flopbudget]\nbaseline-dir = "budgets"\n\n'
        + model_table("mlp_model", flops=F)
        + model_table("broken", flops=F)
        + model_table("foreign", flops=F)
    )
    pytester.makepyfile(
        test_b=f"""
        import pytest
        import torch
        from models import MLP

        @pytest.mark.flop_budget({F - 1}, max_increase="10%")
        def test_marked(flopbudget):
            flopbudget.count(MLP(), torch.zeros(2, 8))

        @pytest.mark.flop_budget(max_increase="0%")
        def test_steady(flopbudget):
            flopbudget.count(torch.nn.Linear(8, 3), torch.zeros(2, 8))
        """
    )
    budgets = pytester.path / "budgets"
    budgets.mkdir()
    (budgets / "broken.json").write_text("{ not json\n")
    (budgets / "foreign.json").write_text('{"format": "someone-else/1"}\n')
    corrupt = {"broken.json": b"{ not json\n", "foreign.json": b'{"format": "someone-else/1"}\n'}

    def check_corrupt(result: pytest.RunResult) -> None:
        got = outcomes(result)
        assert got["pyproject.toml::broken"][0] == "FAILED"
        assert got["pyproject.toml::broken"][1].startswith(
            "broken: budgets/broken.json:1: the baseline is not valid JSON (Expecting property name enclosed in "
            "double quotes); restore it from version control, or delete it and write a new one with an explicit "
            "update"
        )
        assert got["pyproject.toml::foreign"][1].startswith(
            "foreign: budgets/foreign.json: not a pytest-flopbudget baseline (format is 'someone-else/1'"
        )
        assert {name: (budgets / name).read_bytes() for name in corrupt} == corrupt  # never replaced
        assert_clean(result)

    result = run("--flopbudget-update")
    check_corrupt(result)
    got = outcomes(result)
    assert {got[n][0] for n in got if "broken" not in n and "foreign" not in n} == {"PASSED"}  # over budget: passes
    names = ["broken.json", "foreign.json", "mlp_model.json", "test_b.test_marked.json", "test_b.test_steady.json"]
    assert sorted(p.name for p in budgets.iterdir()) == names
    assert (budgets / "mlp_model.json").read_text() == dumps(REF)
    assert (budgets / "test_b.test_marked.json").read_text() == dumps(REF)
    assert "baselines in budgets: 3 written, 0 unchanged" in result.outlines
    rows = summary(result)
    assert any(r.startswith("test_b.test_marked") and "updated, over budget" in r for r in rows)
    assert any("baseline for 'broken' not written: budgets/broken.json:1:" in r for r in rows)
    saved = {p.name: p.read_bytes() for p in budgets.iterdir()}

    result = run("--flopbudget-update")
    check_corrupt(result)
    assert "baselines in budgets: 0 written, 3 unchanged" in result.outlines
    assert {p.name: p.read_bytes() for p in budgets.iterdir()} == saved

    pytester.makepyfile(models=WIDER_MODELS)
    result = run()
    check_corrupt(result)
    got = outcomes(result)
    assert got["test_b.py::test_steady"][0] == "PASSED"  # unchanged model: 0% growth is within max-increase 0%
    assert got["pyproject.toml::mlp_model"] == (
        "FAILED",
        f"{ceiling('mlp_model', WIDE.flops, F)}; baseline {format_value(F, 'flops')}",
    )
    marked = got["test_b.py::test_marked"][1]
    assert marked.startswith(ceiling("test_marked", WIDE.flops, F - 1))
    # one short line: the worst violation, then the others named (their full text is in the report section)
    assert marked.endswith("(+3 more: MACs growth, params growth, FLOPs growth)")

    diff = section(result, "flopbudget per-layer diff")
    start = diff.index("FLOPs per layer, against budgets/mlp_model.json:") + 1
    end = next(i for i in range(start, len(diff)) if not diff[i].startswith("  "))
    table = {line.split()[0]: line.split() for line in diff[start:end]}
    assert table["fc1"][4].startswith("(+")  # changed, with percent
    assert table["extra"][-1] == "(added)" and table["extra"][1] == "-"
    assert table["act"][-1] == "(removed)" and table["act"][2] == "-"
    assert table["total"][4] == f"({format_percent(WIDE.flops - F, F)})"

    mlp_row = next(r for r in summary(result) if r.startswith("mlp_model"))
    assert "FAIL" in mlp_row and f"{100 * WIDE.flops / F:.1f}% flops" in mlp_row
    assert f"{format_percent(WIDE.flops - F, F)} flops" in mlp_row  # delta against the baseline
    assert {p.name: p.read_bytes() for p in budgets.iterdir()} == saved  # a normal run never writes


def test_fifty_updated_under_xdist_leave_fifty_valid_files(pytester: pytest.Pytester, run: Any) -> None:
    pytester.makepyfile(models=MODELS)
    pytester.makepyprojecttoml('[tool.flopbudget]\nbaseline-dir = "from-config"\n')  # the option wins
    pytester.makeconftest(
        """
        import os

        if "PYTEST_XDIST_WORKER" in os.environ:  # only the controller may write baselines
            from pytest_flopbudget._judge import baseline

            def refuse(*args, **kwargs):
                raise AssertionError("an xdist worker wrote a baseline")

            baseline.BaselineStore.save = refuse
            baseline.write_atomic = refuse
        """
    )
    pytester.makepyfile(
        test_fifty="""
        import pytest
        import torch
        from models import MLP

        @pytest.mark.parametrize("hidden", range(1, 51))
        @pytest.mark.flop_budget("1G")
        def test_width(flopbudget, hidden):
            flopbudget.count(MLP(hidden), torch.zeros(2, 8))
        """
    )
    result = run("--flopbudget-update", "--flopbudget-baseline-dir=fifty")
    result.assert_outcomes(passed=50)
    assert not (pytester.path / ".flopbudget").exists() and not (pytester.path / "from-config").exists()
    files = sorted((pytester.path / "fifty").iterdir())
    assert len(files) == 50
    assert {f.name for f in files} == {f"test_fifty.test_width[{h}].json" for h in range(1, 51)}
    assert len({read_baseline(f).flops for f in files}) == 50
    assert all(f.read_text() == dumps(read_baseline(f)) for f in files)
    assert "baselines in fifty: 50 written, 0 unchanged" in result.outlines


# -- configuration and usage errors: one line each, naming file, line and key or test and marker argument ------


def test_config_errors_stop_the_run_listing_every_problem(pytester: pytest.Pytester, run: Any) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.flopbudget.models.a]
        target = "models:mlp"
        inputs = [[2, 8]]
        flops = "4.1m"

        [tool.flopbudget.models.b]
        target = "models:mlp"
        flop = "1G"
        """
    )
    pytester.makepyfile(test_c="def test_nothing(): pass")
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert errors[0].startswith("ERROR: pyproject.toml:4: tool.flopbudget.models.a.flops: '4.1m' is not a budget: ")
    assert "4.1 GFLOPs" in errors[0]
    assert errors[1].startswith("ERROR: pyproject.toml:6: tool.flopbudget.models.b: missing key 'inputs'")
    assert errors[2].startswith("ERROR: pyproject.toml:6: tool.flopbudget.models.b: declares no budget")
    assert errors[3].startswith("ERROR: pyproject.toml:8: tool.flopbudget.models.b.flop: unknown key; did you mean")
    assert len(errors) == 4
    assert_clean(result)


def test_bad_targets_and_bad_markers(pytester: pytest.Pytester, run: Any) -> None:
    pytester.makepyfile(models=MODELS)
    pytester.makepyprojecttoml(
        model_table("no_module", "nowhere.models:mlp", flops=1)
        + model_table("not_model", "models:not_a_model", flops=1)
        + model_table("raises", "models:broken", flops=1)
        + model_table("bad_inputs", inputs='"models:bad_inputs"', flops=1)
        + model_table("bad_shape", inputs="[[2, 9]]", flops=1)
    )
    pytester.makepyfile(
        test_e="""
        import pytest
        import torch
        from models import MLP

        @pytest.mark.flop_budget("4.1m")
        def test_bad_value(flopbudget):
            flopbudget.count(MLP(), torch.zeros(2, 8))

        @pytest.mark.flop_budget(flop="1G")
        def test_bad_keyword(flopbudget):
            pass

        @pytest.mark.flop_budget("1G")
        def test_no_fixture():
            pass

        @pytest.mark.flop_budget("1G")
        def test_no_count(flopbudget):
            pass

        @pytest.mark.flop_budget(name="unknown")
        def test_no_limit(flopbudget):
            pass

        @pytest.mark.flop_budget("1G")
        def test_twice(flopbudget):
            flopbudget.count(MLP(), torch.zeros(2, 8))
            flopbudget.count(MLP(), torch.zeros(2, 8))

        @pytest.mark.flop_budget("1G")
        def test_wrong_shape(flopbudget):
            flopbudget.count(MLP(), torch.zeros(2, 9))

        def test_unbudgeted(flopbudget):
            flopbudget.count(MLP(), torch.zeros(2, 8))
        """
    )
    result = run()
    got = outcomes(result)
    assert got["pyproject.toml::no_module"] == (
        "FAILED",
        "pyproject.toml:2: tool.flopbudget.models.no_module.target: cannot import 'nowhere.models': "
        "ModuleNotFoundError: No module named 'nowhere'",
    )
    assert got["pyproject.toml::not_model"][1] == (
        "pyproject.toml:6: tool.flopbudget.models.not_model.target: models:not_a_model() returned an int, "
        "not a torch.nn.Module (or an object whose .model is one, as Ultralytics' YOLO)"
    )
    assert got["pyproject.toml::raises"][1] == (
        "pyproject.toml:10: tool.flopbudget.models.raises.target: models:broken() raised RuntimeError: no weights"
    )
    assert got["pyproject.toml::bad_inputs"][1] == (
        "pyproject.toml:15: tool.flopbudget.models.bad_inputs.inputs: models:bad_inputs() raised ValueError: "
        "no example inputs"
    )
    assert got["pyproject.toml::bad_shape"][1].startswith(
        "pyproject.toml:17: tool.flopbudget.models.bad_shape: the model raised in layer 'fc1'"
    )
    assert got["test_e.py::test_bad_value"][0] == "ERROR"
    assert got["test_e.py::test_bad_value"][1].startswith(
        "test_e.py:5: test_bad_value: flop_budget(flops=...): '4.1m' is not a budget: lowercase 'm'"
    )
    assert got["test_e.py::test_bad_keyword"] == (
        "ERROR",
        "test_e.py:9: test_bad_keyword: flop_budget: got an unexpected keyword argument 'flop'; the marker takes "
        "flop_budget(flops=None, *, macs=None, int_ops=None, params=None, max_skipped_ops=None, bytes=None, "
        "param_bytes=None, buffer_bytes=None, peak_memory=None, max_increase=None, warn_increase=None, "
        "max_degree=None, at=None, phases=None, name=None)",
    )
    assert got["test_e.py::test_no_fixture"][0] == "ERROR"
    assert "needs the flopbudget fixture" in got["test_e.py::test_no_fixture"][1]
    assert got["test_e.py::test_no_count"] == (
        "FAILED",
        "test_e.py:17: test_no_count: @pytest.mark.flop_budget is set but the test never called "
        "flopbudget.count(model, *inputs), so there is nothing to check",
    )
    assert got["test_e.py::test_no_limit"][0] == "ERROR"
    assert (
        "name='unknown' is not in [tool.flopbudget.models] (known: bad_inputs, bad_shape"
        in (got["test_e.py::test_no_limit"][1])
    )
    assert got["test_e.py::test_twice"][1] == (
        "pytest_flopbudget._errors.FlopBudgetError: flopbudget.count() was already called in test_twice; a test "
        "checks one model: split it into one test per model or parametrize it"
    )
    assert got["test_e.py::test_wrong_shape"][1].startswith(
        "pytest_flopbudget._errors.CountingError: the model raised in layer 'fc1' (Linear)"
    )
    assert got["test_e.py::test_unbudgeted"][0] == "PASSED"
    assert "FlopBudgetWarning: test_unbudgeted counted a model with the flopbudget fixture but has no" in (
        result.stdout.str()
    )
    # User errors inside a test show the test's own line, never the plugin's or the counting engine's frames.
    text = result.stdout.str()
    assert "flopbudget.count(MLP(), torch.zeros(2, 9))" in text
    assert "pytest_flopbudget/" not in text and "torch_backend" not in text
    assert "INTERNALERROR" not in text


# -- collection and options ------------------------------------------------------------------------------------


def collected(result: pytest.RunResult) -> set[str]:
    return {line.strip() for line in result.outlines if "::" in line and not line.startswith(("=", "-"))}


def test_pyproject_models_are_collected_unless_turned_off(pytester: pytest.Pytester, run: Any) -> None:
    pytester.makepyfile(models=MODELS)
    pytester.makepyprojecttoml(model_table("alpha", flops=F) + model_table("beta", flops=F))
    pytester.makepyfile(test_f="def test_plain(): pass")
    models = {"pyproject.toml::alpha", "pyproject.toml::beta"}
    assert collected(run("--co", "-q")) == models | {"test_f.py::test_plain"}
    assert collected(run("--co", "-q", "--flopbudget-no-models")) == {"test_f.py::test_plain"}
    # The command line names what runs (a real run: under xdist, --co collects in the controller only).
    assert outcomes(run("test_f.py")) == {"test_f.py::test_plain": ("PASSED", "")}
    assert collected(run("--co", "-q", "test_f.py", "pyproject.toml")) == models | {"test_f.py::test_plain"}
    assert collected(run("--co", "-q", "-k", "alpha")) == {"pyproject.toml::alpha"}
    result = run("pyproject.toml::beta")
    assert outcomes(result) == {"pyproject.toml::beta": ("PASSED", "")}

    pytester.makepyprojecttoml("[tool.flopbudget]\ncollect-models = false\n\n" + model_table("alpha", flops=F))
    assert collected(run("--co", "-q")) == {"test_f.py::test_plain"}
    assert collected(run("--co", "-q", "--flopbudget-models")) == {"pyproject.toml::alpha", "test_f.py::test_plain"}


def test_marker_and_options_are_documented(pytester: pytest.Pytester, run: Any) -> None:
    result = run("--markers")
    assert any(
        line.startswith(
            "@pytest.mark.flop_budget(flops=None, *, macs=None, int_ops=None, params=None, max_skipped_ops=None, "
            "bytes=None, param_bytes=None, buffer_bytes=None, peak_memory=None, max_increase=None, warn_increase=None, "
            "max_degree=None, at=None, phases=None, name=None): fail the test"
        )
        for line in result.outlines
    )
    result = run("--help")
    text = result.stdout.str()
    for option in ("--flopbudget-update", "--flopbudget-no-models", "--flopbudget-models", "--flopbudget-baseline-dir"):
        assert option in text
