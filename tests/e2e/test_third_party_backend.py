"""A backend from outside the package: a tiny "toy" framework pip-installed with its entry point, counted through
`count()`, `flopbudget check` and pytest, with figures derived by hand; and a broken entry point beside it, which
costs one line and nothing else.

The toy framework: a model is a stack of dense layers without bias, `ToyMLP([6, 5, 3])` in Python or a `.toy` JSON
file `{"sizes": [6, 5, 3]}`, and its one input `x` is `[M, K]`. Each layer is a matmul (M x K)·(K x N): 2·M·N·K
FLOPs, M·N·K MACs, K·N params. docs/architecture.md#backends shows the same backend.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.e2e.e2e_helpers import clean_env
from tests.third_party import third_party_venv

pytestmark = pytest.mark.slow

TOY_BACKEND = '''
    """A toy framework's backend for pytest-flopbudget."""

    from __future__ import annotations

    import json
    from pathlib import Path

    from pytest_flopbudget import LayerCost, OpCost, PhaseTotals, Report
    from pytest_flopbudget.backends import Backend, CountingError, CountOptions, Loaded, ModelEntry, problem


    class ToyMLP:
        def __init__(self, sizes):
            self.sizes = list(sizes)


    class ToyBackend(Backend):
        name = "toy"
        framework = "toy"
        grammar = "a path to a .toy file"
        files = True
        suffixes = (".toy",)
        # priority 50 (inherited): before PyTorch, which takes any object

        def accepts(self, target: str) -> bool:
            return target.endswith(self.suffixes)

        def accepts_model(self, model: object) -> bool:
            return isinstance(model, ToyMLP)

        def load(self, entry: ModelEntry, root: Path) -> Loaded:
            path = root / entry.target
            if not path.is_file():
                raise problem(entry.source_of("target"), f"no such toy file: {path}")
            model = ToyMLP(json.loads(path.read_text())["sizes"])
            shapes = {name: list(spec.shape) for name, spec in (entry.inputs or {}).items()}
            return Loaded(entry, model, kwargs={"inputs": shapes})

        def count(self, loaded: Loaded) -> Report:
            return self.count_model(loaded.model, (), {}, CountOptions(inputs=loaded.kwargs["inputs"]))

        def count_model(self, model, args, kwargs, options: CountOptions) -> Report:
            if args or kwargs or options.training or options.method != "forward" or options.execution != "fake":
                raise CountingError("a toy model takes inputs={'x': [M, K]} only")
            rows, width = (options.inputs or {}).get("x", [1, model.sizes[0]])
            layers, flops, macs = {}, 0, 0
            for i, (k, n) in enumerate(zip(model.sizes, model.sizes[1:])):
                layer_macs = rows * n * k
                op = OpCost(1, flops=2 * layer_macs, macs=layer_macs)
                layers[f"dense{i}"] = LayerCost(
                    flops=2 * layer_macs, macs=layer_macs, params=k * n, ops={"toy.matmul": op}
                )
                flops, macs = flops + 2 * layer_macs, macs + layer_macs
            return Report(
                layers=layers, forward=PhaseTotals(flops=flops, macs=macs), backend="toy", model="ToyMLP",
                inputs=[[rows, width]],
            )

        def input_names(self, path: str) -> list[str]:
            return ["x"]
'''

TOY_MODELS = """
    from toy_flopbudget import ToyMLP


    def mlp():
        return ToyMLP([6, 5, 3])
"""


@pytest.fixture(scope="module")
def toy_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the toy backend installed, and a second, broken entry point in the same group."""
    where = tmp_path_factory.mktemp("toy")
    return third_party_venv(
        where,
        "toy-flopbudget",
        {"toy_flopbudget.py": TOY_BACKEND},
        {"pytest_flopbudget.backends": {"toy": "toy_flopbudget:ToyBackend", "broken": "toy_missing:Backend"}},
    )


BROKEN_LINE = (
    "flopbudget: backend entry point 'broken = toy_missing:Backend' (pytest_flopbudget.backends) of toy-flopbudget "
    "0.1: not loaded: ModuleNotFoundError: No module named 'toy_missing'"
)


def run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args], cwd=cwd, capture_output=True, text=True, env=clean_env(), check=False, timeout=300
    )


def project(where: Path, flops: str) -> Path:
    """A project with one toy model file, `net.toy` (6 -> 5 -> 3) on x = [4, 6], and a flops budget."""
    where.mkdir()
    (where / "net.toy").write_text(json.dumps({"sizes": [6, 5, 3]}), encoding="utf-8")
    (where / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
            [tool.flopbudget.models.toy]
            target = "net.toy"
            inputs = {{x = [4, 6]}}
            flops = "{flops}"
        """),
        encoding="utf-8",
    )
    return where


def test_count_counts_a_toy_model_and_the_broken_entry_point_costs_one_line(toy_python: Path, tmp_path: Path) -> None:
    script = textwrap.dedent("""\
        import json
        from toy_flopbudget import ToyMLP
        from pytest_flopbudget import count, register_formula
        report = count(ToyMLP([6, 5, 3]), inputs={"x": [4, 6]})
        print(json.dumps([report.backend, report.flops, report.macs, report.params]))
        try:
            register_formula("toy.matmul", lambda node: (0, 0), backend="toy")
        except ValueError as exc:
            print(exc)
        try:
            count(ToyMLP([6, 5]), inputs={"x": [4, 6]}, training=True)
        except Exception as exc:
            print(type(exc).__name__, exc)
        import torch
        print(count(torch.nn.Linear(6, 5), torch.zeros(4, 6)).macs)
    """)
    result = run(toy_python, tmp_path, "-c", script)
    assert result.returncode == 0, result.stderr
    backend, flops, macs, params = json.loads(result.stdout.splitlines()[0])
    # dense0: 2*M*N*K = 2*4*5*6 = 240 FLOPs; dense1: 2*4*3*5 = 120 FLOPs
    assert (backend, flops) == ("toy", 240 + 120)
    assert macs == 4 * 5 * 6 + 4 * 3 * 5  # 120 + 60 = 180
    assert params == 6 * 5 + 5 * 3  # 30 + 15 = 45
    assert result.stdout.splitlines()[1] == (
        "register_formula: the toy backend has no formula table (it counts its ops itself); formulas can be "
        "registered for 'torch', 'jax', 'tensorflow', 'savedmodel' or 'onnx'"
    )
    assert result.stdout.splitlines()[2] == "CountingError a toy model takes inputs={'x': [M, K]} only"
    assert result.stdout.splitlines()[3] == str(4 * 5 * 6)  # the bundled PyTorch backend: 120 MACs
    assert result.stderr.strip() == BROKEN_LINE  # one line, no traceback


def test_flopbudget_check_fails_a_toy_model_over_its_budget(toy_python: Path, tmp_path: Path) -> None:
    where = project(tmp_path / "proj", "300")  # 360 FLOPs counted
    result = run(toy_python, where, "-m", "pytest_flopbudget", "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "toy: 360 FLOPs > budget 300 FLOPs" in result.stdout
    assert BROKEN_LINE in result.stderr and "Traceback" not in result.stderr


def test_a_toy_entry_is_validated_by_its_backend(toy_python: Path, tmp_path: Path) -> None:
    where = project(tmp_path / "proj", "400")
    with (where / "pyproject.toml").open("a", encoding="utf-8") as file:
        file.write("training = true\n")
    result = run(toy_python, where, "-m", "pytest_flopbudget", "check", "--no-cache")
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "tool.flopbudget.models.toy.training: training = true applies to PyTorch, JAX or TensorFlow targets only, "
        "not to toy files"
    ) in (result.stdout + result.stderr)


def test_pytest_collects_a_toy_model_and_judges_a_marker(toy_python: Path, tmp_path: Path) -> None:
    where = project(tmp_path / "proj", "400")  # 360 FLOPs: within
    (where / "test_toy.py").write_text(
        textwrap.dedent("""\
            import pytest
            from toy_flopbudget import ToyMLP

            @pytest.mark.flop_budget("200")  # 2*4*5*6 = 240 FLOPs for one layer: over
            def test_one_layer(flopbudget):
                flopbudget.count(ToyMLP([6, 5]), inputs={"x": [4, 6]})
        """),
        encoding="utf-8",
    )
    result = run(toy_python, where, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rA")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert "240 FLOPs > budget 200 FLOPs" in result.stdout


def test_flopbudget_count_binds_shapes_by_the_toy_files_input_names(toy_python: Path, tmp_path: Path) -> None:
    where = project(tmp_path / "proj", "400")
    result = run(toy_python, where, "-m", "pytest_flopbudget", "count", "net.toy", "--input", "4,6", "--format", "json")
    assert result.returncode == 0, result.stderr
    counted = json.loads(result.stdout)
    assert (counted["backend"], counted["totals"]["flops"]) == ("toy", 2 * 4 * 5 * 6 + 2 * 4 * 3 * 5)  # 360
    refused = run(toy_python, where, "-m", "pytest_flopbudget", "count", "net.toy", "--input", "4,6", "--training")
    assert refused.returncode == 2
    refusal = "--training applies to PyTorch, JAX or TensorFlow models only; a toy graph fixes its own mode and dtypes"
    assert refusal in refused.stderr
