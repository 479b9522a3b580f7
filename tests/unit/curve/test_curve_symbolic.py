"""A JAX model's curve from one symbolic trace (`curve/symbolic.py`, `JaxModels.count_symbolic`): the same formulas
as the lattice fit, exactly, per metric and per layer, from one trace instead of one per point; and where the
cost is no polynomial or the symbolic trace takes another path than a point trace, the lattice fit with the
reason."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._backends.jax_models import JaxModels
from pytest_flopbudget._config.pyproject import ModelEntry, parse_settings
from pytest_flopbudget._counting.symbolic import NotPolynomial, PointsOnly, Symbolic
from pytest_flopbudget._curve.engine import count_curve
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._curve.text import formula_text
from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, PARAMS, PEAK_MEMORY

jax = pytest.importorskip("jax")
pytest.importorskip("flax.nnx")

MODELS = '''
import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax


class Block(nnx.Module):
    def __init__(self, d, heads, rngs):
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
        self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)

    def __call__(self, x):
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:2]))
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))


class GPT(nnx.Module):
    """Token and position embeddings (`jnp.arange(seq)`), one pre-norm block, a head: d 16, 2 heads of 8."""

    def __init__(self, rngs):
        self.emb = nnx.Embed(100, 16, rngs=rngs)
        self.pos = nnx.Embed(512, 16, rngs=rngs)
        self.block = Block(16, 2, rngs)
        self.head = nnx.Linear(16, 100, rngs=rngs)

    def __call__(self, ids):
        pos = jnp.arange(ids.shape[1])
        return self.head(self.block(self.emb(ids) + self.pos(pos)))


def gpt():
    return nnx.eval_shape(lambda: GPT(nnx.Rngs(0)))


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.fc1 = nnx.Linear(8, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 4, rngs=rngs)

    def __call__(self, x):
        return self.fc2(jax.nn.relu(self.fc1(x)))


def mlp():
    return nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))


class Conv(nnx.Module):
    def __init__(self, rngs):
        self.conv = nnx.Conv(3, 8, (3, 3), strides=(2, 2), padding="VALID", rngs=rngs)

    def __call__(self, x):
        return self.conv(x)


def conv():
    return nnx.eval_shape(lambda: Conv(nnx.Rngs(0)))


@jax.jit
def sorted_rows(x):
    return jnp.sort(x, axis=-1)


@jax.jit
def rnn(x):
    """A scan over the sequence: its length is the dim."""
    w = jnp.ones((8, 8))
    h, _ = lax.scan(lambda h, xt: (jnp.tanh(h @ w + xt), None), jnp.zeros(x.shape[1:]), x)
    return h


@jax.jit
def loop_to_length(x):
    """A fori_loop up to a size: with a symbolic length jax writes a while whose bound is a dim."""
    return lax.fori_loop(0, x.shape[0], lambda i, h: jnp.tanh(h), x)


@jax.jit
def static_while(x):
    """A while_loop with literal bounds over symbolic shapes: a static trip count, as at a point."""
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.tanh(c[1])), (0, x))[1]


@jax.jit
def either(x):
    """A cond whose branches cost different polynomials: which is costlier is no question for one polynomial."""
    return lax.cond(x.sum() > 0, lambda x: (x @ x.T).sum(axis=1), lambda x: x.sum(axis=1), x)


@jax.jit
def branchy(x):
    return x @ x.T if x.shape[0] > 32 else x * 2
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    where = tmp_path_factory.mktemp("symbolic_models")
    (where / "symbolic_models.py").write_text(MODELS)
    sys.path.insert(0, str(where))
    yield where
    sys.path.remove(str(where))
    sys.modules.pop("symbolic_models", None)


def entry(root: Path, target: str, inputs: str, dims: str, curve: str, training: bool = False) -> ModelEntry:
    text = (
        f'[tool.flopbudget.models.m]\ntarget = "{target}"\ninputs = {inputs}\ndims = {dims}\ncurve = {curve}\n'
        f'flops = "1T"\ntraining = {str(training).lower()}\n'
    )
    return parse_settings(text, root / "pyproject.toml").models["m"]


class Traces:
    """Every `jax.make_jaxpr` call of a count, split by whether its arguments hold symbolic dims."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.symbolic = self.point = 0
        make_jaxpr = jax.make_jaxpr

        def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
            traced = make_jaxpr(fn, *args, **kwargs)

            def call(*call_args: Any, **call_kwargs: Any) -> Any:
                shapes = [leaf.shape for leaf in jax.tree_util.tree_leaves(call_args) if hasattr(leaf, "shape")]
                if any(not isinstance(d, int) for shape in shapes for d in shape):
                    self.symbolic += 1
                else:
                    self.point += 1
                return traced(*call_args, **call_kwargs)

            return call

        monkeypatch.setattr(jax, "make_jaxpr", counted)


def lattice(model: ModelEntry, root: Path, monkeypatch: pytest.MonkeyPatch) -> Formula:
    """The formula as every other backend finds it: interpolated point counts."""
    with monkeypatch.context() as patch:

        def points_only(self: Any, loaded: Any, dims: Any) -> Any:
            raise PointsOnly("test: the lattice fit")

        patch.setattr(JaxModels, "count_symbolic", points_only)
        _, formula = count_curve(model, root)
    assert not formula.holds.symbolic and not formula.holds.fallback
    return formula


def assert_same(symbolic: Formula, fitted: Formula) -> None:
    """The same formulas, and the same metrics not exact: a peak of live bytes reached at different ops at
    different sizes is no one polynomial, which the lattice finds by its misses and the symbolic count by comparing
    its ops' live bytes over the range (`counting/graph_memory.py`); neither gives a formula for it to budget."""
    assert symbolic.holds.symbolic, symbolic.holds.fallback
    assert set(symbolic.holds.inexact) == set(fitted.holds.inexact) <= {PEAK_MEMORY}
    exact = [metric for metric in fitted.totals if metric not in fitted.holds.inexact]
    assert {m: symbolic.totals[m] for m in exact} == {m: fitted.totals[m] for m in exact}
    assert symbolic.layers == fitted.layers
    assert list(symbolic.layers) == list(fitted.layers)  # in the model's order, as the table's
    assert (symbolic.holds.step, symbolic.holds.ranges) == (fitted.holds.step, fitted.holds.ranges)
    assert not symbolic.holds.piecewise and not fitted.holds.piecewise


def test_a_gpt_block_over_seq_is_the_lattice_fit_from_one_trace(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:gpt", '[{ shape = [1, "seq"], dtype = "int32" }]', "{ seq = 64 }",
                  "{ seq = [8, 256] }")  # fmt: skip
    traces = Traces(monkeypatch)
    report, formula = count_curve(model, root)
    # one symbolic trace for every length, and the point trace of the Report the curve returns, checked against it
    assert (traces.symbolic, traces.point) == (1, 1)
    assert formula.holds.samples == 1 and formula.holds.verified == 1
    fitted = lattice(model, root, monkeypatch)
    # the lattice: a point trace per sample (8), and the entry's point where the lattice did not count it
    assert traces.symbolic == 1 and traces.point - 1 >= fitted.holds.samples >= 6
    assert_same(formula, fitted)
    # attention: QK^T and AV, each 2 heads x seq x seq x 8 MACs: 2 * 2*8 = 32*seq**2 MACs, in the attention layer
    assert formula.total(MACS).term((2,)) == 32 and formula.layer("block.attn", MACS).term((2,)) == 32
    assert formula.total(PARAMS).degree("seq") == 0 and formula.total(PARAMS).at({"seq": 1}) == report.params
    assert formula.total(FLOPS).at({"seq": 64}) == report.flops
    # the peak of live bytes: no one polynomial of seq (its op changes with seq), as the lattice finds too
    text = "exact on seq in [8, 256]; not exact for peak memory (one symbolic trace, checked against 1 point count)"
    assert text in formula_text(formula)


def test_an_mlp_over_batch_is_the_lattice_fit(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:mlp", '[["batch", 8]]', "{ batch = 4 }", "{ batch = [1, 8] }")
    _, formula = count_curve(model, root)
    assert formula.holds.verified == 2  # the range holds 1: checked at batch=1 too
    assert_same(formula, lattice(model, root, monkeypatch))
    # fc1 2*8*32 + 32 (bias) = 544, relu 32, fc2 2*32*4 + 4 = 260: 836 FLOPs per row
    assert str(formula.total(FLOPS)) == "836*batch"
    assert str(formula.total(MACS)) == "384*batch"  # 8*32 + 32*4


def test_a_training_step_is_the_lattice_fit(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:mlp", '[["batch", 8]]', "{ batch = 4 }", "{ batch = [2, 8] }", training=True)
    _, formula = count_curve(model, root)
    assert_same(formula, lattice(model, root, monkeypatch))
    # per row: forward 836 + 4 (the loss sums the 4 outputs) + 32 (relu's derivative mask, one compare each) = 872;
    # backward: fc2's weight and input gradients 2*32*4 each = 512, fc1's weight gradient 2*8*32 = 512 (the input
    # gets none), the bias gradients' sums 32 + 4 = 36, relu's a select (free): 1060. 872 + 1060 = 1932
    assert str(formula.total(FLOPS)) == "1932*batch"


def test_a_size_one_special_case_falls_back(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """jax answers `batch == 1` with False for a symbolic size, so the symbolic trace is the general one; at batch
    1 a bias gradient's sum over the batch is no op at all (fc1: 2*8*32 + 32 = 544 per row, 1088 at batch 2 but
    1056 at batch 1). The check at the range's low end sees it (in the sum's bytes first: it reads and writes 32
    floats, 256 bytes), and the lattice fit says FLOPs and bytes are no polynomial."""
    model = entry(root, "symbolic_models:mlp", '[["batch", 8]]', "{ batch = 4 }", "{ batch = [1, 8] }", training=True)
    _, formula = count_curve(model, root)
    assert formula.holds.fallback == "it gives bytes moved 3008 for layer fc1 at batch=1, the point count 2752"
    assert {FLOPS, BYTES} <= set(formula.holds.inexact) == set(lattice(model, root, monkeypatch).holds.inexact)


@pytest.mark.slow
def test_a_gpt_training_step_is_the_lattice_fit(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:gpt", '[{ shape = [1, "seq"], dtype = "int32" }]', "{ seq = 16 }",
                  "{ seq = [8, 64] }", training=True)  # fmt: skip
    _, formula = count_curve(model, root)
    assert_same(formula, lattice(model, root, monkeypatch))


def test_a_scan_over_the_sequence_counts_its_symbolic_length(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:rnn", '[["seq", 2, 8]]', "{ seq = 16 }", "{ seq = [8, 64] }")
    _, formula = count_curve(model, root)
    assert_same(formula, lattice(model, root, monkeypatch))
    # per step: h @ w 2*2*8*8 = 256, + xt 16, tanh 16: 288*seq
    assert str(formula.total(FLOPS)) == "288*seq"


def test_a_while_with_a_static_trip_count_traces_symbolically(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = entry(root, "symbolic_models:static_while", '[["seq", 4]]', "{ seq = 16 }", "{ seq = [8, 64] }")
    _, formula = count_curve(model, root)
    assert_same(formula, lattice(model, root, monkeypatch))
    # 3 trips: tanh 4*seq and the counter's add each; the condition's lt 3 + 1 times: 12*seq + 7
    assert str(formula.total(FLOPS)) == "12*seq + 7"


@pytest.mark.parametrize(
    ("target", "inputs", "dims", "curve", "reason"),
    [
        # a strided convolution's output is floor((n - 3) / 2) + 1: not one polynomial
        ("conv", '[[1, "n", "n", 3]]', "{ n = 32 }", "{ n = [16, 64] }", "floordiv"),
        # a sort's n*ceil(log2 n) comparisons
        ("sorted_rows", '[[2, "n"]]', "{ n = 32 }", "{ n = [16, 64] }", "sort in the model"),
        # the while's bound is a dim: no static trip count in the symbolic trace, a scan in the point trace
        ("loop_to_length", '[["n", 4]]', "{ n = 16 }", "{ n = [8, 64] }", "while: dynamic trip count"),
        # the costlier branch of a cond: 8*n**2 + ... against 4*n, compared for every n at once
        ("either", '[["n", 4]]', "{ n = 16 }", "{ n = [8, 64] }", "depends on the sizes"),
        # a branch on the size cannot be traced for every size at once
        ("branchy", '[["n", 4]]', "{ n = 16 }", "{ n = [8, 64] }", "does not trace at every size"),
    ],
)
def test_what_is_no_polynomial_falls_back_to_the_lattice_fit_and_says_why(
    root: Path, target: str, inputs: str, dims: str, curve: str, reason: str
) -> None:
    model = entry(root, f"symbolic_models:{target}", inputs, dims, curve)
    _, formula = count_curve(model, root)
    assert not formula.holds.symbolic and reason in formula.holds.fallback, formula.holds.fallback
    text = formula_text(formula)
    assert f"checked off the fit; no symbolic trace: {formula.holds.fallback}" in text.splitlines()[0]
    assert Formula.from_dict(formula.to_dict()).holds == formula.holds


def test_what_has_no_named_dims_is_not_traced_symbolically(root: Path) -> None:
    """Inputs from a function have sizes, not dims (validation refuses a curve over them; a backend still says
    why), and a curve dim no input names has nothing to make symbolic."""
    model = entry(root, "symbolic_models:mlp", '[["batch", 8]]', "{ batch = 4 }", "{ batch = [1, 8] }")
    loaded = JaxModels().load(model, root)
    from_function = dataclasses.replace(loaded, entry=dataclasses.replace(model, inputs="symbolic_inputs:rows"))
    with pytest.raises(NotPolynomial, match=r"^the inputs come from a function, whose shapes are numbers"):
        JaxModels().count_symbolic(from_function, ("batch",))
    with pytest.raises(NotPolynomial, match=r"^no input shape names seq$"):
        JaxModels().count_symbolic(loaded, ("batch", "seq"))
    assert JaxModels().count_symbolic(loaded, ("batch",)).flops == Symbolic.dim(("batch",), "batch") * 836
