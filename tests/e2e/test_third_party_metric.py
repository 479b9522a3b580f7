"""A metric from outside the package, really installed: `flopbudget-matmul` (a distribution built from one module,
pip-installed into a fresh venv by `tests/third_party.py`) registers `matmul-flops` in the entry-point group
`pytest_flopbudget.metrics`, and `count()`, `flopbudget check` and pytest budget, show and judge it as they do a
built-in metric, against the baseline too. The module mirrors the example in docs/architecture.md ("Metrics").

The model, on a 4x6 input: Linear(6, HIDDEN) -> ReLU -> Linear(HIDDEN, 3), each Linear one aten.addmm.
  matmul-flops = 2 * MACs of the matmul-like ops only (2*M*N*K per addmm, its bias add left out)
  HIDDEN=5: 2*4*6*5 = 240 (layer 0) + 2*4*5*3 = 120 (layer 2)  = 360
  HIDDEN=7: 2*4*6*7 = 336 (layer 0) + 2*4*7*3 = 168 (layer 2)  = 504
  for comparison, flops at HIDDEN=5: 240 + 4*5 bias adds + 4*5 relu + 120 + 4*3 bias adds = 412
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.e2e.e2e_helpers import clean_env
from tests.third_party import third_party_venv

pytestmark = pytest.mark.slow  # builds and installs two distributions into fresh venvs

METRIC_MODULE = """\
from pytest_flopbudget.metrics import OpFigures, define_metric

MATMULS = {"aten.mm", "aten.bmm", "aten.addmm", "aten.baddbmm", "MatMul", "Gemm"}


def matmul_flops(op: str, figures: OpFigures) -> int:
    return 2 * figures.macs if op in MATMULS else 0


MATMUL_FLOPS = define_metric(
    "matmul-flops",
    label="matmul FLOPs",
    unit="FLOPs",
    convention="2 per multiply-accumulate of mm, bmm, addmm, baddbmm, MatMul and Gemm; their bias adds left out",
    of_op=matmul_flops,
)
"""

MODEL = """\
import os

from torch import nn

HIDDEN = int(os.environ.get("HIDDEN", "5"))


def tiny():
    return nn.Sequential(nn.Linear(6, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 3))
"""

PYPROJECT = """\
[tool.flopbudget]
baseline-dir = ".flopbudget"

[tool.flopbudget.models.tiny]
target = "tinymodel:tiny"
inputs = [[4, 6]]
matmul-flops = "{budget}"
"""

TEST_FILE = """\
import pytest
import torch
from tinymodel import tiny


@pytest.mark.flop_budget(matmul_flops=360)
def test_at_the_ceiling(flopbudget):
    flopbudget.count(tiny(), torch.zeros(4, 6))


@pytest.mark.flop_budget(matmul_flops="300 FLOPs", name="tiny_marked")
def test_over_the_ceiling(flopbudget):
    flopbudget.count(tiny(), torch.zeros(4, 6))
"""


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("matmul-plugin")
    return third_party_venv(
        where,
        "flopbudget-matmul",
        {"flopbudget_matmul.py": METRIC_MODULE},
        {"pytest_flopbudget.metrics": {"matmul-flops": "flopbudget_matmul:MATMUL_FLOPS"}},
    )


def run(python: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=clean_env(COLUMNS="400", PYTHONPATH=str(cwd), **env),
        check=False,
        timeout=300,
    )


def project(where: Path, budget: str) -> Path:
    (where / "tinymodel.py").write_text(MODEL, encoding="utf-8")
    (where / "pyproject.toml").write_text(PYPROJECT.format(budget=budget), encoding="utf-8")
    return where


def test_count_reads_the_metric_off_the_report(python: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(
        """\
        import json, torch
        from pytest_flopbudget import count
        from tinymodel import tiny
        report = count(tiny(), torch.zeros(4, 6))
        print(json.dumps([report.metric("matmul-flops"), report.layer_metric("matmul-flops"), report.flops]))
        print(report)
        """
    )
    done = run(python, project(tmp_path, "400"), "-c", script)
    assert done.returncode == 0, done.stderr
    figures, table = done.stdout.split("\n", 1)
    total, layers, flops = json.loads(figures)
    assert total == 360  # 2*4*6*5 + 2*4*5*3 = 240 + 120
    assert {path: value for path, value in layers.items() if value} == {"0": 240, "2": 120}
    assert flops == 412  # the built-in figure is unchanged: 360 + 20 + 20 + 12
    assert "matmul-flops: 360 matmul FLOPs (360 FLOPs)" in table.splitlines()


def test_count_json_has_its_figures(python: Path, tmp_path: Path) -> None:
    root = project(tmp_path, "400")
    done = run(python, root, "-m", "pytest_flopbudget", "count", "tinymodel:tiny", "--input", "4,6", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["plugin_metrics"]["matmul-flops"] == {
        "total": 360,  # 240 + 120
        "layers": {"0": 240, "2": 120},  # 2*4*6*5, 2*4*5*3
        "label": "matmul FLOPs",
        "unit": "FLOPs",
        "convention": "2 per multiply-accumulate of mm, bmm, addmm, baddbmm, MatMul and Gemm; their bias adds left out",
        "entry_point": "entry point 'matmul-flops' (flopbudget_matmul:MATMUL_FLOPS) of flopbudget-matmul 0.1",
    }
    assert "matmul-flops" not in data["totals"] and "matmul-flops" not in data["conventions"]


def test_check_budgets_it_in_pyproject_and_compares_the_baseline(python: Path, tmp_path: Path) -> None:
    root = project(tmp_path, "400")
    update = run(python, root, "-m", "pytest_flopbudget", "check", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    baseline = json.loads((root / ".flopbudget" / "tiny.json").read_text(encoding="utf-8"))
    assert "matmul-flops" not in json.dumps(baseline)  # read off the ops: a baseline holds nothing new

    within = run(python, root, "-m", "pytest_flopbudget", "check", "--format", "json")
    assert within.returncode == 0, within.stdout + within.stderr
    figures = json.loads(within.stdout)["models"][0]["metrics"]["matmul-flops"]
    assert figures == {"now": 360, "limit": 400, "baseline": 360, "delta": 0, "usage": 0.9, "over": False}

    grown = run(python, root, "-m", "pytest_flopbudget", "check", HIDDEN="7")
    assert grown.returncode == 1, grown.stdout + grown.stderr
    # 504 = 2*4*6*7 + 2*4*7*3 > 400 (+26.0%); the baseline's 360 read off its own ops
    assert "tiny: 504 FLOPs > budget 400 FLOPs (+26.0%); baseline 360 FLOPs" in grown.stdout + grown.stderr
    assert "Traceback" not in grown.stdout + grown.stderr

    judged = run(python, root, "-m", "pytest_flopbudget", "check", "--format", "json", HIDDEN="7")
    figures = json.loads(judged.stdout)["models"][0]["metrics"]["matmul-flops"]
    assert figures == {"now": 504, "limit": 400, "baseline": 360, "delta": 144, "usage": 1.26, "over": True}


def test_pytest_budgets_it_in_the_marker(python: Path, tmp_path: Path) -> None:
    root = project(tmp_path, "400")
    (root / "test_tiny.py").write_text(TEST_FILE, encoding="utf-8")
    done = run(python, root, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "test_tiny.py")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 1 passed" in out
    # 360 = 2*4*6*5 + 2*4*5*3 > 300: the usual one-line failure, no baseline yet
    failure = "test_over_the_ceiling (tiny_marked): 360 FLOPs > budget 300 FLOPs (+20.0%)"
    assert f"FAILED test_tiny.py::test_over_the_ceiling - {failure}" in out
    assert "Traceback" not in out


def test_a_broken_or_clashing_metric_is_one_line_per_entry_point(tmp_path_factory: pytest.TempPathFactory) -> None:
    where = tmp_path_factory.mktemp("bad-plugin")
    bad = third_party_venv(
        where,
        "flopbudget-bad",
        {"flopbudget_bad.py": METRIC_MODULE.replace('"matmul-flops"', '"flops"')},
        {"pytest_flopbudget.metrics": {"flops": "flopbudget_bad:MATMUL_FLOPS", "gone": "flopbudget_gone:METRIC"}},
    )
    (where / "project").mkdir()
    root = project(where / "project", "400")
    expected = [
        "metric plugin entry point 'flops' (flopbudget_bad:MATMUL_FLOPS) of flopbudget-bad 0.1 cannot be added: "
        "its name 'flops' is taken by a built-in metric",
        "metric plugin entry point 'gone' (flopbudget_gone:METRIC) of flopbudget-bad 0.1 cannot be loaded: "
        "ModuleNotFoundError: No module named 'flopbudget_gone'",
    ]
    check = run(bad, root, "-m", "pytest_flopbudget", "check")
    assert check.returncode == 2
    assert check.stderr.splitlines() == [f"flopbudget: error: {line}" for line in expected]
    (root / "test_nothing.py").write_text("def test_nothing():\n    pass\n", encoding="utf-8")
    tests = run(bad, root, "-m", "pytest", "-p", "no:cacheprovider", "test_nothing.py")
    assert tests.returncode == 4  # pytest's usage error
    assert [line for line in tests.stderr.splitlines() if line] == [f"ERROR: {line}" for line in expected]
