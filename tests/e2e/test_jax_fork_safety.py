"""The count cache forks a child per model; a child forked from a process whose jax backend runs deadlocks as soon
as it uses jax. `flopbudget check` run from such a process (a notebook, a test suite: here a script that made a
jax array first) counts its JAX models without forking, and says why they are not cached; a library whose import
starts jax's backend does not make the process forked for a module's models fork either. Each run has a deadline:
before the fix the first case hung until it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import clean_env, git, pytest_in

pytest.importorskip("jax")
pytest.importorskip("flax.nnx")

pytestmark = pytest.mark.slow

MODELS = """\
import jax
from flax import nnx
{library}

class MLP(nnx.Module):
    def __init__(self, rngs):
        self.fc1 = nnx.Linear(8, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 4, rngs=rngs)

    def __call__(self, x):
        return self.fc2(jax.nn.relu(self.fc1(x)))


def eager():
    return MLP(nnx.Rngs(0))  # real weights: the count makes jax arrays


def abstract():
    return nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
"""

PYPROJECT = """\
[tool.flopbudget.models.eager]
target = "models:eager"
inputs = [[2, 8]]
flops = "1M"

[tool.flopbudget.models.abstract]
target = "models:abstract"
inputs = [["batch", 8]]
dims = { batch = 4 }
curve = { batch = [1, 8] }
flops = "1M"
"""

# 2 rows: fc1 2*2*8*32 + 64 (bias) = 1088, relu 64, fc2 2*2*32*4 + 8 = 520: 1672 FLOPs
CHECK = """
import sys
{start}
from pytest_flopbudget._cli import main
sys.exit(main(["check", *sys.argv[1:]]))
"""

FORK_WARNING = "os.fork() was called"


def project(where: Path, library: str = "") -> Path:
    (where / "models.py").write_text(MODELS.format(library=library))
    (where / "pyproject.toml").write_text(PYPROJECT)
    git(where, "init", "-q")
    return where


def check(where: Path, start: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHECK.format(start=start), *args],
        cwd=where, capture_output=True, text=True, env=clean_env(**env), check=False, timeout=240,
    )  # fmt: skip


def test_a_process_whose_jax_backend_runs_counts_without_forking(tmp_path: Path) -> None:
    where = project(tmp_path)
    start = "import jax.numpy as jnp\njnp.ones(2).block_until_ready()"
    for args in (["--no-cache", "-j", "2"], ["--no-cache"], ["--cache"]):  # -j 2: nothing is counted ahead
        done = check(where, start, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert FORK_WARNING not in done.stderr
        rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
        assert rows["eager"][1:3] == ["ok", "1.67k"] and rows["abstract"][1] == "ok"
    # with the cache: counted in the checking process, so what each count read is not known: nothing is kept
    assert "flopbudget: eager: not cached: it was counted in the checking process, since jax's backend" in done.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_library_that_starts_jax_on_import_is_imported_in_each_models_child(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, jobs: str
) -> None:
    """With -j 2 each of the two parts (one model each) finds its process unfit to fork, and is counted again."""
    userbase = tmp_path_factory.mktemp("userbase")
    site_dir = subprocess.run(
        [sys.executable, "-c", "import site; print(site.getusersitepackages())"],
        env=clean_env(PYTHONUSERBASE=str(userbase)), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site_dir).mkdir(parents=True)
    (Path(site_dir) / "startsjax.py").write_text("import jax.numpy as jnp\n\nCONSTANT = jnp.ones(2)\n")
    where = project(tmp_path, library="import startsjax")
    env = {"PYTHONUSERBASE": str(userbase), "PYTHONPATH": f"{site_dir}:{Path(__file__).parents[2]}"}
    first = check(where, "", "--cache", "-j", jobs, **env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert FORK_WARNING not in first.stderr and "not cached" not in first.stderr
    again = check(where, "", "--cache", "-j", jobs, **env)  # every child recorded what it read: both are cache hits
    assert "flopbudget: 2 of 2 models unchanged since their cached count" in again.stderr, again.stderr


def test_a_pytest_run_whose_tests_start_jax_counts_its_models_in_process(tmp_path: Path) -> None:
    """The plugin counts in the test process and never forks, whatever the tests did with jax."""
    where = project(tmp_path)
    (where / "test_arrays.py").write_text("import jax.numpy as jnp\n\n\ndef test_an_array():\n    jnp.ones(2)\n")
    done = pytest_in(where, "-q", "-p", "no:randomly", "--flopbudget-update")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout and FORK_WARNING not in done.stdout + done.stderr
