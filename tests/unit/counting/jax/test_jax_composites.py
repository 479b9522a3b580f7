"""Named library composites priced by the shared rule of the op they name (`_counting/jax/composites.py`): each one
by hand, forward and backward; found however it is called; its own primitives never counted beside it; math written
by hand still counted primitive by primitive; and a training count of every composite with a backward rule equal,
layer by layer and phase by phase, to the same model in PyTorch."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
linen = pytest.importorskip("flax.linen")

import jax.numpy as jnp  # noqa: E402

from pytest_flopbudget import register_formula  # noqa: E402
from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.jax import composites  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_jax, count_linen, count_nnx  # noqa: E402
from pytest_flopbudget._counting.jax.ops import BACKWARD, JAX_OPS  # noqa: E402
from pytest_flopbudget._metrics import BYTES  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
F32 = jnp.float32
X = jax.ShapeDtypeStruct((4, 8), F32)  # 32 elements in 4 rows of 8


def ops(report: Report, backward: bool | None = None) -> dict[str, tuple[int, int]]:
    """op -> (FLOPs, calls) over every layer (free ops recorded for the bytes they move alone left out)."""
    found: dict[str, tuple[int, int]] = {}
    for layer in report.layers.values():
        for op, cost in layer.ops.items():
            if not set(cost.values) - {BYTES}:
                continue
            flops, calls = found.get(op, (0, 0))
            found[op] = (flops + cost.flops, calls + cost.calls)
    return found


def phases(report: Report) -> tuple[int, int]:
    return report.forward.values.get("flops", 0), report.backward.values.get("flops", 0)


# --- every composite is found, and has a formula ------------------------------------------------------------------


def test_every_composite_is_found_in_this_jax_and_flax() -> None:
    found = composites.recognised()
    assert set(found) == {composite.name for composite in composites.COMPOSITES}
    assert "primitives" not in found.values(), found
    # jitted functions are found by their jit equation, the rest by a hook on the function object
    assert found["jax.nn.silu"] == "jit" and found["jax.nn.log_softmax"] == "jit"
    assert found["jax.nn.gelu"] == found["jax.numpy.mean"] == found["flax.nnx.LayerNorm"] == "hook"


def test_every_composite_has_a_forward_and_a_backward_entry() -> None:
    for composite in composites.COMPOSITES:
        assert JAX_OPS.builtin(composite.name) is not None, composite.name
        assert JAX_OPS.builtin(composite.name + BACKWARD) is not None, composite.name


# --- activations: 1 per element, forward and backward --------------------------------------------------------------

ACTIVATIONS: list[tuple[str, Callable[..., Any]]] = [
    ("jax.nn.silu", jax.nn.silu),  # logistic, mul: 2 primitives
    ("jax.nn.silu", jax.nn.swish),  # the same function
    ("jax.nn.gelu", jax.nn.gelu),  # tanh form: integer_pow, 3 mul, 2 add, tanh, mul: 8 primitives
    ("jax.nn.gelu", lambda x: jax.nn.gelu(x, approximate=False)),  # erf form: mul, neg, mul, erfc, mul
    ("jax.nn.softplus", jax.nn.softplus),
    ("jax.nn.log_sigmoid", jax.nn.log_sigmoid),
    ("jax.nn.elu", jax.nn.elu),
    ("jax.nn.celu", jax.nn.celu),
    ("jax.nn.selu", jax.nn.selu),
    ("jax.nn.leaky_relu", jax.nn.leaky_relu),
    ("jax.nn.hard_tanh", jax.nn.hard_tanh),
    ("jax.nn.hard_sigmoid", jax.nn.hard_sigmoid),
    ("jax.nn.hard_silu", jax.nn.hard_swish),
    ("jax.nn.mish", jax.nn.mish),
    ("jax.nn.gelu", nnx.gelu),  # flax's re-exports are the same functions
    ("jax.nn.silu", linen.silu),
]


@pytest.mark.parametrize(("name", "fn"), ACTIVATIONS)
def test_an_activation_is_one_per_element(name: str, fn: Callable[..., Any]) -> None:
    # 1 FLOP per element (formulas.ELEMENTWISE), as aten.silu: 4*8 = 32, whatever primitives JAX writes it with
    assert ops(count_jax(fn, (X,))) == {name: (32, 1)}


@pytest.mark.parametrize(("name", "fn"), ACTIVATIONS[:4])
def test_an_activations_backward_is_one_per_element(name: str, fn: Callable[..., Any]) -> None:
    # the loss is the sum of the output: forward the activation 32 and the sum 32; backward the activation's
    # derivative 1 per element, 32, as aten.silu_backward
    report = count_jax(fn, (X,), training=True)
    assert ops(report) == {name: (32, 1), "reduce_sum": (32, 1), name + BACKWARD: (32, 1)}
    assert phases(report) == (64, 32)


# --- softmax, mean, arange ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fn"), [("jax.nn.softmax", jax.nn.softmax), ("jax.nn.log_softmax", jax.nn.log_softmax)]
)
def test_softmax_is_five_per_element_and_its_backward_four(name: str, fn: Callable[..., Any]) -> None:
    # 5 * 32 = 160 (max, subtract, exp, sum, divide); JAX's guard max(-inf, row max), 1 per row, is part of it
    assert ops(count_jax(fn, (X,))) == {name: (160, 1)}
    # backward 4 * 32 = 128 (formulas.SOFTMAX_BACKWARD), as aten._softmax_backward_data; forward 160 + the sum 32
    assert phases(count_jax(fn, (X,), training=True)) == (192, 128)


def test_a_mean_is_one_per_input_element() -> None:
    # jnp.mean over the last axis of (4, 8): 32 (a reduction, 1 per input element), not reduce_sum 32 + div 4
    assert ops(count_jax(lambda x: jnp.mean(x, axis=-1), (X,))) == {"jax.numpy.mean": (32, 1)}
    # however it is called: the array method, over every axis
    assert ops(count_jax(lambda x: x.mean(), (X,))) == {"jax.numpy.mean": (32, 1)}
    # backward: the gradient spread over the 32 inputs and divided, 1 per input element, as torch's mean backward;
    # forward 32 + the loss's sum over 4 means
    report = count_jax(lambda x: jnp.mean(x, axis=-1), (X,), training=True)
    assert ops(report) == {"jax.numpy.mean": (32, 1), "reduce_sum": (4, 1), "jax.numpy.mean_backward": (32, 1)}


def test_arange_is_free() -> None:
    # jnp.arange(0, 16, 2) is iota * 2 + 0 in the jaxpr: free as aten.arange; only the add of x counts, 8
    report = count_jax(lambda x: x + jnp.arange(0, 16, 2, dtype=F32), (jax.ShapeDtypeStruct((8,), F32),))
    assert ops(report) == {"add": (8, 1)}


# --- dot_product_attention ----------------------------------------------------------------------------------------

Q = jax.ShapeDtypeStruct((2, 8, 4, 16), F32)  # batch 2, 8 queries, 4 heads of 16
KV = jax.ShapeDtypeStruct((2, 8, 2, 16), F32)  # 2 k/v heads: each serves 2 query heads


def test_dot_product_attention_is_the_attention_rule() -> None:
    # batch x query heads 2*4 = 8; QK^T and AV 8*8*8*16 = 8192 MACs each: 16384 MACs, 32768 FLOPs; the scale and
    # softmax 6 per score (8*8*8 = 512): 3072. The causal mask jax builds (iota, ge, and) and the softmax's guard
    # are part of it: 35840, as scaled_dot_product_attention(is_causal=True)
    report = count_jax(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True), (Q, KV, KV))
    assert ops(report) == {"jax.nn.dot_product_attention": (35840, 1)}
    assert report.macs == 16384
    # a mask (or a bias) adds 1 per score: 35840 + 512
    mask = jax.ShapeDtypeStruct((2, 4, 8, 8), jnp.bool_)
    masked = count_jax(lambda q, k, v, m: jax.nn.dot_product_attention(q, k, v, mask=m), (Q, KV, KV, mask))
    assert masked.flops == 35840 + 512


def test_dot_product_attentions_backward_is_the_attention_backward_rule() -> None:
    # formulas.attention_backward on 8 batch-heads, 8 x 8, head 16: recompute S, dV, dP, dQ, dK: 5 * 8192 MACs,
    # 81920 FLOPs, plus 5 per score (softmax backward 4, the scale 1): 2560; in all 84480, as SDPA's backward
    report = count_jax(lambda q: jax.nn.dot_product_attention(q, q, q, is_causal=True), (Q,), training=True)
    assert ops(report)["jax.nn.dot_product_attention_backward"] == (84480, 1)
    # its softmax is part of the attention, not a composite of its own
    assert "jax.nn.softmax" not in ops(report)


# --- Flax layers --------------------------------------------------------------------------------------------------


class Norms(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.ln = nnx.LayerNorm(8, rngs=rngs)
        self.ln_no_bias = nnx.LayerNorm(8, use_bias=False, rngs=rngs)
        self.ln_plain = nnx.LayerNorm(8, use_bias=False, use_scale=False, rngs=rngs)
        self.rms = nnx.RMSNorm(8, rngs=rngs)
        self.gn = nnx.GroupNorm(8, num_groups=2, rngs=rngs)
        self.bn_eval = nnx.BatchNorm(8, use_running_average=True, rngs=rngs)
        self.bn_train = nnx.BatchNorm(8, use_running_average=False, rngs=rngs)
        self.bn_called = nnx.BatchNorm(8, use_running_average=True, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = self.ln_plain(self.ln_no_bias(self.ln(x)))
        x = self.gn(self.rms(x))
        return self.bn_called(self.bn_train(self.bn_eval(x)), use_running_average=False)


def test_flax_norm_layers_are_the_norm_rules() -> None:
    report = count_nnx(lambda: Norms(nnx.Rngs(0)), X)
    n = 32
    assert {path: layer.flops for path, layer in report.layers.items()} == {
        "ln": 8 * n,  # statistics 4, normalise 2, scale 1, bias 1: 256
        "ln_no_bias": 7 * n,
        "ln_plain": 6 * n,
        "rms": 4 * n,  # statistics 2 (square, add), apply 1, scale 1
        "gn": 8 * n,
        "bn_eval": 4 * n,  # running statistics: normalise 2, scale 1, bias 1
        "bn_train": 8 * n,  # batch statistics (their running averages' update is part of it)
        "bn_called": 8 * n,  # the call's use_running_average=False wins over the module's
    }
    assert ops(report)["flax.nnx.LayerNorm"] == ((8 + 7 + 6) * n, 3)


def test_a_norm_layers_backward_is_twice_the_full_forward() -> None:
    # LayerNorm on 32 elements: forward 8 per element (256); backward 2 * 8 per element (512), as
    # aten.native_layer_norm_backward; RMSNorm 4 per element, backward 2 * 4 (256)
    class Two(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.ln = nnx.LayerNorm(8, rngs=rngs)
            self.rms = nnx.RMSNorm(8, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.rms(self.ln(x))

    report = count_nnx(lambda: Two(nnx.Rngs(0)), X, training=True)
    found = ops(report)
    assert found["flax.nnx.LayerNorm"] == (256, 1) and found["flax.nnx.LayerNorm_backward"] == (512, 1)
    assert found["flax.nnx.RMSNorm"] == (128, 1) and found["flax.nnx.RMSNorm_backward"] == (256, 1)


def test_an_embedding_lookup_is_free_and_its_backward_one_per_gradient_element() -> None:
    class Lookup(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.embed = nnx.Embed(32, 8, rngs=rngs)

        def __call__(self, ids: Any) -> Any:
            return self.embed(ids)

    ids = jax.ShapeDtypeStruct((2, 5), jnp.int32)
    # a gather: free (jnp.take's wrap of negative ids, lt and add per id, is part of it); params 32*8
    report = count_nnx(lambda: Lookup(nnx.Rngs(0)), ids)
    assert (report.flops, report.params) == (0, 256)
    # backward: the 2*5 rows of 8 gradients added into the table's gradient: 80, as aten.embedding_dense_backward;
    # the loss's sum 80 in the forward
    trained = count_nnx(lambda: Lookup(nnx.Rngs(0)), ids, training=True)
    assert ops(trained) == {"reduce_sum": (80, 1), "flax.nnx.Embed_backward": (80, 1)}


class LinenNorms(linen.Module):
    @linen.compact
    def __call__(self, x: Any, ids: Any) -> Any:
        x = linen.LayerNorm()(x)
        x = linen.RMSNorm()(x)
        x = linen.GroupNorm(num_groups=2)(x)
        x = linen.BatchNorm(use_running_average=True)(x)
        return x + linen.Embed(32, 8)(ids)


def test_linen_layers_are_the_same_rules() -> None:
    ids = jax.ShapeDtypeStruct((4,), jnp.int32)
    report = count_linen(LinenNorms(), X, ids)
    n = 32
    assert {path: layer.flops for path, layer in report.layers.items()} == {
        "LayerNorm_0": 8 * n,
        "RMSNorm_0": 4 * n,
        "GroupNorm_0": 8 * n,
        "BatchNorm_0": 4 * n,  # running statistics
        "Embed_0": 0,  # the lookup is free; the layer holds its 32*8 parameters
        "": n,  # the add
    }


# --- found however it runs; only the composite counts -------------------------------------------------------------


def test_a_composite_counts_once_per_call_in_loops_scans_and_vmap() -> None:
    # two calls in a Python loop: 2 * 32
    assert ops(count_jax(lambda x: jax.nn.gelu(jax.nn.gelu(x)), (X,))) == {"jax.nn.gelu": (64, 2)}
    # a scan of length 3: 3 * 32
    scanned = count_jax(lambda x: jax.lax.scan(lambda c, _: (jax.nn.gelu(c), None), x, None, length=3)[0], (X,))
    assert ops(scanned) == {"jax.nn.gelu": (96, 3)}
    # under vmap over the 4 rows, the mean sees rows of 8 and its formula the batched (4, 8): 32
    assert ops(count_jax(jax.vmap(jnp.mean), (X,))) == {"jax.numpy.mean": (32, 1)}


def test_a_composite_in_a_jitted_function_counts_whatever_was_traced_before() -> None:
    @jax.jit
    def block(x: Any) -> Any:
        return jax.nn.gelu(x) + 1

    block(jnp.ones((4, 8)))  # traced (and run) outside a count first: the count traces it again, hooked
    assert ops(count_jax(block, (X,))) == {"jax.nn.gelu": (32, 1), "add": (32, 1)}
    # and the trace the count made is not the one jax hands later callers
    assert "flopbudget_composite" not in str(jax.make_jaxpr(block)(jnp.ones((4, 8))))
    assert float(block(jnp.zeros((4, 8)))[0, 0]) == 1.0


def test_the_gradient_of_an_argument_used_elsewhere_too_is_summed_outside_the_composite() -> None:
    # h = 2w feeds gelu and the add: its two gradients are summed by an add_any of 32, as PyTorch's aten.add; the
    # composite's own primitives (and the sums inside it) are part of its rules. Forward: mul 32, gelu 32, add 32,
    # the loss's sum 32; backward: gelu's 32, the add_any 32, the mul's 32
    def fn(w: Any) -> Any:
        h = w * 2.0
        return jax.nn.gelu(h) + h

    report = count_jax(fn, (X,), training=True)
    assert ops(report)["add_any"] == (32, 1)
    assert phases(report) == (4 * 32, 3 * 32)


def test_counting_plain_jax_imports_no_flax() -> None:
    code = (
        "import sys, jax, jax.numpy as jnp\n"
        "from pytest_flopbudget._counting.jax.engine import count_jax\n"
        "assert count_jax(jax.nn.gelu, (jax.ShapeDtypeStruct((2, 3), jnp.float32),)).flops == 6\n"
        "assert 'flax' not in sys.modules, 'flax imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_math_written_by_hand_counts_its_primitives() -> None:
    # x * sigmoid(x) is silu's math, not jax.nn.silu: logistic 32 and mul 32
    assert ops(count_jax(lambda x: x * jax.nn.sigmoid(x), (X,))) == {"logistic": (32, 1), "mul": (32, 1)}

    @jax.jit
    def silu(x: Any) -> Any:  # a user's function of the same name is not jax's
        return x * jax.nn.sigmoid(x)

    assert ops(count_jax(silu, (X,))) == {"logistic": (32, 1), "mul": (32, 1)}


def test_the_hooks_are_removed_after_a_count() -> None:
    code = jax.nn.gelu.__code__, jnp.mean.__code__, nnx.LayerNorm.__call__.__code__
    defaults = jax.nn.gelu.__defaults__, jnp.mean.__kwdefaults__
    count_jax(lambda x: jnp.mean(jax.nn.gelu(x)), (X,))
    assert (jax.nn.gelu.__code__, jnp.mean.__code__, nnx.LayerNorm.__call__.__code__) == code
    assert (jax.nn.gelu.__defaults__, jnp.mean.__kwdefaults__) == defaults
    # a count that fails to trace removes them too
    with pytest.raises(Exception, match="could not be traced"):
        count_jax(lambda x: jax.nn.gelu(x) @ jnp.ones((3, 3)), (X,))
    assert jax.nn.gelu.__code__ is code[0]


def test_another_thread_calls_the_original_while_a_count_traces() -> None:
    seen: list[bool] = []
    started, release = threading.Event(), threading.Event()

    def slow(x: Any) -> Any:
        started.set()
        release.wait(10)
        return jax.nn.gelu(x)

    worker = threading.Thread(target=lambda: count_jax(slow, (X,)))
    worker.start()
    started.wait(10)
    # the hook is installed now, but this thread is not counting: gelu runs as it is
    jaxpr = jax.make_jaxpr(jax.nn.gelu)(jnp.ones(3))
    seen.append("flopbudget_composite" in str(jaxpr))
    release.set()
    worker.join(10)
    assert seen == [False]


# --- register_formula by a composite's name ------------------------------------------------------------------------


def test_a_composite_formula_can_be_replaced_by_its_name() -> None:
    with pytest.raises(ValueError, match=r"JAX composite 'jax\.nn\.gelu' has a built-in formula"):
        register_formula("jax.nn.gelu", lambda e: (0, 0), backend="jax")
    with register_formula("jax.nn.gelu", lambda e: (8 * e.out_numel(0), 0), backend="jax", override=True):
        assert ops(count_jax(jax.nn.gelu, (X,))) == {"jax.nn.gelu": (8 * 32, 1)}
        # the backward is its own entry
        assert ops(count_jax(jax.nn.gelu, (X,), training=True))["jax.nn.gelu_backward"] == (32, 1)
    with register_formula("flax.nnx.Embed", lambda e: Cost(e.out_numel(0), 0), backend="jax", override=True):
        embed = nnx.eval_shape(lambda: nnx.Embed(32, 8, rngs=nnx.Rngs(0)))
        assert count_nnx(embed, jax.ShapeDtypeStruct((5,), jnp.int32)).flops == 40
    assert ops(count_jax(jax.nn.gelu, (X,))) == {"jax.nn.gelu": (32, 1)}
    with pytest.raises(ValueError, match="nor a named composite"):
        register_formula("jax.nn.not_a_composite", lambda e: (0, 0), backend="jax")


# --- the same model in PyTorch, trained ---------------------------------------------------------------------------


def test_every_composite_with_a_backward_rule_trains_as_in_pytorch() -> None:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    import pytest_flopbudget

    class Torch(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(32, 16)
            self.up = torch.nn.Linear(16, 32, bias=False)
            self.ln = torch.nn.LayerNorm(32)
            self.down = torch.nn.Linear(32, 16, bias=False)
            # no running-batch counter: flax's BatchNorm keeps none (torch adds 1 to num_batches_tracked)
            self.bn = torch.nn.BatchNorm1d(16, track_running_stats=False)

        def forward(self, ids: Any) -> Any:
            h = self.down(F.gelu(self.ln(self.up(self.embed(ids)))))
            h = self.bn(F.silu(h).reshape(-1, 16))
            return F.softmax(h, -1).mean(-1)

    class Flax(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.embed = nnx.Embed(32, 16, rngs=rngs)
            self.up = nnx.Linear(16, 32, use_bias=False, rngs=rngs)
            self.ln = nnx.LayerNorm(32, rngs=rngs)
            self.down = nnx.Linear(32, 16, use_bias=False, rngs=rngs)
            self.bn = nnx.BatchNorm(16, use_running_average=False, rngs=rngs)

        def __call__(self, ids: Any) -> Any:
            h = self.down(jax.nn.gelu(self.ln(self.up(self.embed(ids))), approximate=False))
            h = self.bn(jax.nn.silu(h).reshape(-1, 16))
            return jnp.mean(jax.nn.softmax(h, -1), -1)

    theirs = pytest_flopbudget.count(Torch(), torch.zeros(2, 4, dtype=torch.long), training=True)
    ours = count_nnx(lambda: Flax(nnx.Rngs(0)), jax.ShapeDtypeStruct((2, 4), jnp.int32), training=True)
    assert {p: (layer.flops, layer.macs, layer.params) for p, layer in ours.layers.items()} == {
        p: (layer.flops, layer.macs, layer.params) for p, layer in theirs.layers.items()
    }
    assert phases(ours) == phases(theirs)
    # 8 tokens: up 2*8*16*32 = 8192 and its two backward matmuls (the input's and the weight's gradient) 16384;
    # LayerNorm 8 * 256 = 2048, backward 16 * 256 = 4096; the embedding's backward 8*16 = 128
    assert ours.layers["up"].flops == 3 * 8192
    assert ours.layers["ln"].flops == 2048 + 4096
    assert ours.layers["embed"].flops == 128
