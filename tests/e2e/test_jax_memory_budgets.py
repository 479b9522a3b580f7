"""Memory budgets on a JAX model end to end: a pyproject `peak-memory` ceiling below a Flax NNX model's peak fails
`flopbudget check` with one line naming the layer, and `bytes` and `param-bytes` ceilings at the counted figures
pass (the JAX engine measures them: docs/jax.md, "Memory")."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import flopbudget

pytest.importorskip("jax")
pytest.importorskip("flax.nnx")

MODELS = """\
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.fc1 = nnx.Linear(4, 8, rngs=rngs)
        self.fc2 = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
        return self.fc2(nnx.relu(self.fc1(x)))


def mlp():
    return nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
"""

# On x = [2, 4] (tests/unit/counting/jax/test_jax_memory.py derives each figure): peak 232 parameter bytes + 32 input
# + fc1's product and bias add (64 each) = 392 B, reached in fc1; 696 bytes moved; 232 parameter bytes.
PYPROJECT = """\
[tool.flopbudget.models.mlp]
target = "models:mlp"
inputs = [[2, 4]]
peak-memory = "300B"

[tool.flopbudget.models.roomy]
target = "models:mlp"
inputs = [[2, 4]]
peak-memory = "1KiB"
param-bytes = "232B"
bytes = "696"
"""


@pytest.mark.slow  # a process that imports jax and counts twice: about 7 s of CPU
def test_a_peak_memory_budget_on_a_jax_model_is_judged(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "mlp: peak memory 392 B > budget 300 B (+30.7%) at fc1\n" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    header = next(row for row in rows if row[:1] == ["model"])
    assert header[2:12] == ["FLOPs", "MACs", "params", "skipped", "bytes", "moved", "param", "bytes", "peak", "memory"]
    mlp = ["FAIL", "228", "96", "58", "0", "696", "232", "392", "130.7%"]  # bytes 696, param bytes 232, peak 392
    assert next(row for row in rows if row[:1] == ["mlp"])[1:10] == mlp
    assert next(row for row in rows if row[:1] == ["roomy"])[1] == "ok"
