"""JAX models end to end, through the same front ends as PyTorch's: a pyproject budget on a Flax NNX model whose
layers are an `nnx.scan` over a stacked `nnx.vmap` of blocks fails `flopbudget check` with the per-layer diff naming
the Flax module paths once the model grows a block; a Flax Linen model whose 12 layers are an `nn.scan` fails
`flopbudget check` and pytest, naming the scanned layer's path, once that layer grows wider (the change a PR makes);
the marker fails the test under pytest; `flopbudget count` prints the table; and a curve over `seq` on a small Flax
model fits the polynomial derived by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import flopbudget, inner_pytest

pytest.importorskip("jax")
pytest.importorskip("flax.nnx")

MODELS = """\
import jax.numpy as jnp
from flax import nnx

DEPTH = 2


class Block(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(8, 8, rngs=rngs)

    def __call__(self, x):
        return jnp.tanh(self.lin(x))


class Net(nnx.Module):
    def __init__(self, depth, rngs):
        self.proj = nnx.Linear(4, 8, rngs=rngs)

        @nnx.split_rngs(splits=depth)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make(rngs):
            return Block(rngs)

        self.blocks = make(rngs)
        self.head = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def body(x, block):
            return block(x)

        return self.head(body(self.proj(x), self.blocks))


def net():
    return nnx.eval_shape(lambda: Net(DEPTH, nnx.Rngs(0)))


class Scores(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(8, 8, rngs=rngs)

    def __call__(self, x):
        h = self.lin(x)
        return h @ h.T


def scores():
    return nnx.eval_shape(lambda: Scores(nnx.Rngs(0)))
"""

# On x = [2, 4]: proj 2*2*8*4 + 2*8 (bias) = 144; each block: lin 2*2*8*8 + 16 = 272, tanh 16; head 2*2*2*8 + 4 = 68.
# Two blocks: 144 + 2*(272 + 16) + 68 = 788 FLOPs; three: 144 + 3*288 + 68 = 1076.
PYPROJECT = """\
[tool.flopbudget.models.net]
target = "models:net"
inputs = [[2, 4]]
flops = "900"

[tool.flopbudget.models.scores]
target = "models:scores"
inputs = [["seq", 8]]
dims = { seq = 64 }
curve = { seq = [16, 256] }
max-degree = { seq = 2 }
"""

MARKER_TESTS = """\
import jax
import jax.numpy as jnp
import pytest

from models import net

X = jax.ShapeDtypeStruct((2, 4), jnp.float32)


@pytest.mark.flop_budget(flops="900")
def test_net(flopbudget):
    flopbudget.count(net(), X)


@pytest.mark.flop_budget(flops="5k")
def test_net_training(flopbudget):
    assert flopbudget.count(net(), X, training=True).backward.flops > 0
"""


def project(where: Path, depth: int = 2) -> Path:
    (where / "models.py").write_text(MODELS.replace("DEPTH = 2", f"DEPTH = {depth}"))
    (where / "pyproject.toml").write_text(PYPROJECT)
    return where


def test_a_grown_scan_stack_fails_the_check_naming_the_flax_paths(tmp_path: Path) -> None:
    project(tmp_path)
    update = flopbudget(tmp_path, "check", "--no-cache", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    net = json.loads((tmp_path / ".flopbudget" / "net.json").read_text())
    assert (net["backend"], net["totals"]["flops"]) == ("jax", 788)
    assert net["layers"]["blocks.lin"]["metrics"]["flops"] == 544  # 2 blocks * 272
    # the curve: lin 2*seq*8*8 + 8*seq (bias) = 136*seq; h·hᵀ 2*seq*seq*8 = 16*seq**2
    scores = json.loads((tmp_path / ".flopbudget" / "scores.json").read_text())
    assert scores["formula"]["flops"] == "16*seq**2 + 136*seq"
    assert scores["formula"]["macs"] == "8*seq**2 + 64*seq"

    project(tmp_path, depth=3)  # one more block in the scanned stack
    result = flopbudget(tmp_path, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "net: 1.08 kFLOPs > budget 900 FLOPs (+19.6%); baseline 788 FLOPs" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["blocks.lin", "544", "816", "+272", "(+50.0%)"] in rows  # 2*272 -> 3*272
    assert ["blocks", "32", "48", "+16", "(+50.0%)"] in rows  # tanh: 2*16 -> 3*16
    assert ["total", "788", "1.08k", "+288", "(+36.5%)"] in rows
    assert next(row for row in rows if row[:1] == ["scores"])[1] == "ok"


def test_the_marker_fails_the_test_under_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester.path, depth=3)
    (pytester.path / "pyproject.toml").write_text("[tool.flopbudget]\ncollect-models = false\n")
    (pytester.path / "test_budgets.py").write_text(MARKER_TESTS)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("test_budgets.py")
    result.assert_outcomes(passed=1, failed=1)
    assert "FAILED test_budgets.py::test_net - test_net: 1.08 kFLOPs > budget 900 FLOPs (+19.6%)" in result.stdout.str()


def test_the_pyproject_item_fails_under_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester.path, depth=3)
    result = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("pyproject.toml")
    result.assert_outcomes(passed=1, failed=1)
    assert "FAILED pyproject.toml::net - net: 1.08 kFLOPs > budget 900 FLOPs (+19.6%)" in result.stdout.str()


def test_count_prints_the_table(tmp_path: Path) -> None:
    project(tmp_path)
    result = flopbudget(tmp_path, "count", "models:net", "--input", "2,4")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "models:net: 2x4 float32; inference"
    rows = [line.split() for line in lines]
    # proj: 2*2*8*4 + 16 FLOPs; MACs 2*8*4; params 4*8 + 8; bytes: the dot 32 + 128 + 64, the bias add 64 + 32 + 64
    assert ["proj", "144", "64", "40", "18.3%", "384", "0.375"] in rows
    # blocks.lin: 2 * (2*2*8*8 + 16) FLOPs; params 2 * (8*8 + 8); bytes 2 * (64 + 256 + 64 + 64 + 32 + 64) = 1,088
    assert ["blocks.lin", "544", "256", "144", "69.0%", "1.06Ki", "0.5"] in rows
    assert "total: 788 FLOPs, 352 MACs, 202 params (788 FLOPs, 352 MACs)" in result.stdout
    # 202 params in fp32; the peak: 808 + the input 32 + proj's two activations 64 + 64 alive in the bias add, the
    # product freed, the scan's carry 64, its body's dot and bias add 128: 1,096 (docs/jax.md, "Memory")
    assert "memory: 1,912 bytes moved (1.87 KiB), 0.412 FLOPs/byte; 808 param bytes (808 B)" in result.stdout
    assert "peak memory 1.07 KiB at blocks.lin" in result.stdout


LINEN_MODELS = """\
import flax.linen as nn
import jax

HIDDEN = 32


class Layer(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        return x + nn.Dense(8, name="down")(jax.nn.relu(nn.Dense(HIDDEN, name="up")(x))), None


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x):
        layers = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=12)
        return nn.Dense(2, name="head")(layers(name="layers")(x, None)[0])


def stack():
    return Stack()
"""

LINEN_PYPROJECT = """\
[tool.flopbudget.models.stack]
target = "models:stack"
inputs = [[2, 8]]
flops = "30k"
"""


@pytest.mark.slow  # both front ends, three processes importing jax
def test_a_wider_scanned_linen_layer_fails_check_and_pytest_naming_its_path(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = pytester.path
    (where / "models.py").write_text(LINEN_MODELS)
    (where / "pyproject.toml").write_text(LINEN_PYPROJECT)
    update = flopbudget(where, "check", "--no-cache", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    # on x = [2, 8], per layer: up 2*2*8*32 + 64 (bias) = 1088, relu 64 + the residual add 16, down 2*2*32*8 + 16
    # = 1040; 12 layers, then head 2*2*8*2 + 4 = 68: 12*1088 + 12*80 + 12*1040 + 68 = 26564
    stack = json.loads((where / ".flopbudget" / "stack.json").read_text())
    assert (stack["backend"], stack["totals"]["flops"]) == ("jax", 26564)
    assert stack["layers"]["layers.up"]["metrics"]["flops"] == 12 * 1088

    # the PR: the scanned layer's hidden width 32 -> 48. up 2*2*8*48 + 96 = 1632, relu 96 + 16, down 2*2*48*8 + 16
    # = 1552: 12*1632 + 12*112 + 12*1552 + 68 = 39620
    (where / "models.py").write_text(LINEN_MODELS.replace("HIDDEN = 32", "HIDDEN = 48"))
    result = flopbudget(where, "check", "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stack: 39.6 kFLOPs > budget 30.0 kFLOPs (+32.1%); baseline 26.6 kFLOPs" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["layers.up", "13.1k", "19.6k", "+6.53k", "(+50.0%)"] in rows  # 13056 -> 19584
    assert ["layers.down", "12.5k", "18.6k", "+6.14k", "(+49.2%)"] in rows  # 12480 -> 18624
    assert ["layers", "960", "1.34k", "+384", "(+40.0%)"] in rows  # 960 -> 1344

    run = inner_pytest(pytester, monkeypatch, "serial", subprocess_run=True)("pyproject.toml")
    run.assert_outcomes(failed=1)
    out = run.stdout.str()
    assert "FAILED pyproject.toml::stack - stack: 39.6 kFLOPs > budget 30.0 kFLOPs (+32.1" in out
    assert ["layers.up", "13.1k", "19.6k", "+6.53k", "(+50.0%)"] in [line.split() for line in out.splitlines()]
