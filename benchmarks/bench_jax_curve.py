"""A JAX model's formula from one symbolic trace against the lattice fit (point counts interpolated), same run.

    python benchmarks/bench_jax_curve.py [--rounds N]

Each formula is counted in a fresh child process, warmed first by one point count of the model at a size neither
method counts (imports and first-call caches, as benchmarks/bench_curve.py warms up), the two methods alternating,
N rounds (default 3); the medians and their ratio (lattice time / symbolic time) are printed per model, and the
two formulas are checked to be equal. Models: a
GPT-like Flax NNX decoder (4 pre-norm blocks, d 128, causal attention) over seq in [64, 2048], and an MLP over
batch in [2, 256]. docs/curves.md and docs/jax.md quote the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[tool.flopbudget.models.gpt]
target = "benchmarks.bench_jax_curve:gpt"
inputs = [{ shape = [1, "seq"], dtype = "int32" }]
dims = { seq = 512 }
curve = { seq = [64, 2048] }
flops = "1P"

[tool.flopbudget.models.mlp]
target = "benchmarks.bench_jax_curve:mlp"
inputs = [["batch", 256]]
dims = { batch = 32 }
curve = { batch = [2, 256] }
flops = "1P"
"""


def gpt() -> Any:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, d: int, heads: int, rngs: Any) -> None:
            self.ln1 = nnx.LayerNorm(d, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False, rngs=rngs)
            self.ln2 = nnx.LayerNorm(d, rngs=rngs)
            self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
            self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            mask = nnx.make_causal_mask(jnp.ones(x.shape[:2]))
            x = x + self.attn(self.ln1(x), mask=mask)
            return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))

    class GPT(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.emb = nnx.Embed(1000, 128, rngs=rngs)
            self.pos = nnx.Embed(2048, 128, rngs=rngs)
            self.blocks = nnx.List([Block(128, 4, rngs) for _ in range(4)])
            self.head = nnx.Linear(128, 1000, rngs=rngs)

        def __call__(self, ids: Any) -> Any:
            x = self.emb(ids) + self.pos(jnp.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return nnx.eval_shape(lambda: GPT(nnx.Rngs(0)))


def mlp() -> Any:
    import jax
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.layers = nnx.List([nnx.Linear(256, 256, rngs=rngs) for _ in range(6)])

        def __call__(self, x: Any) -> Any:
            for layer in self.layers:
                x = jax.nn.relu(layer(x))
            return x

    return nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))


def child(name: str, method: str) -> None:
    """One formula in this (fresh) process; prints its time and formula as JSON."""
    sys.path.insert(0, str(ROOT))
    from pytest_flopbudget._backends import count_entry
    from pytest_flopbudget._backends.jax_models import JaxModels
    from pytest_flopbudget._config.pyproject import parse_settings
    from pytest_flopbudget._counting.symbolic import PointsOnly
    from pytest_flopbudget._curve.engine import count_curve

    entry = parse_settings(PYPROJECT, ROOT / "pyproject.toml").models[name]
    # warm, as benchmarks/bench_curve.py: imports and first-call caches, one point count at a size neither method
    # counts (every size of the formula is new to the process)
    count_entry(entry.at({dim: size + 3 for dim, size in entry.dims.items()}), ROOT)
    if method == "lattice":

        def points_only(self: Any, loaded: Any, dims: Any) -> Any:
            raise PointsOnly("benchmark: the lattice fit")

        JaxModels.count_symbolic = points_only  # type: ignore[method-assign]
    start = time.perf_counter()
    _, formula = count_curve(entry, ROOT)
    seconds = time.perf_counter() - start
    assert formula.holds.symbolic == (method == "symbolic"), formula.holds
    print(json.dumps({"seconds": seconds, "formula": formula.to_dict()["formula"], "counts": formula.holds.samples}))


def measure(name: str, rounds: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {"symbolic": [], "lattice": []}
    formulas: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for method in ("symbolic", "lattice"):
            done = subprocess.run(
                [sys.executable, __file__, "--child", name, method],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            result = json.loads(done.stdout.strip().splitlines()[-1])
            times[method].append(result["seconds"])
            formulas[method], counts[method] = result["formula"], result["counts"]
    assert formulas["symbolic"] == formulas["lattice"], formulas
    symbolic, lattice = statistics.median(times["symbolic"]), statistics.median(times["lattice"])
    return {
        "model": name,
        "symbolic_s": round(symbolic, 3),
        "lattice_s": round(lattice, 3),
        "ratio": round(lattice / symbolic, 1),
        "point_counts": {"symbolic": counts["symbolic"], "lattice": counts["lattice"]},
        "flops": formulas["symbolic"]["flops"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "METHOD"))
    options = parser.parse_args()
    if options.child:
        child(*options.child)
        return
    for name in ("gpt", "mlp"):
        print(json.dumps(measure(name, options.rounds)))


if __name__ == "__main__":
    main()
