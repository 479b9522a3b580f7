"""The engine's entry points: layers from name stacks (NNX, Linen, named scopes), parameters as the torch backend
counts them, abstract arguments only, and the report's own fields."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
linen = pytest.importorskip("flax.linen")

import jax.numpy as jnp  # noqa: E402

from pytest_flopbudget._counting.jax.engine import count_jax, count_linen, count_nnx  # noqa: E402
from pytest_flopbudget._counting.jax.names import linen_layer, plain_layer  # noqa: E402

X = jax.ShapeDtypeStruct((2, 8), jnp.float32)


class Attention(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.q_proj = nnx.Linear(8, 8, rngs=rngs)
        self.o_proj = nnx.Linear(8, 8, use_bias=False, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.o_proj(jax.nn.softmax(self.q_proj(x)))


class Block(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.attn = Attention(rngs)

    def __call__(self, x: Any) -> Any:
        return x + self.attn(x)


class Model(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.layers = nnx.List([Block(rngs) for _ in range(2)])
        self.head = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        for block in self.layers:
            x = block(x)
        return self.head(x)


def test_nnx_layers_read_like_torch_module_paths() -> None:
    report = count_nnx(lambda: Model(nnx.Rngs(0)), X)
    assert set(report.layers) == {
        "layers.0",
        "layers.0.attn",
        "layers.0.attn.q_proj",
        "layers.0.attn.o_proj",
        "layers.1",
        "layers.1.attn",
        "layers.1.attn.q_proj",
        "layers.1.attn.o_proj",
        "head",
    }
    # q_proj: 2*2*8*8 + 2*8 (bias) = 272 FLOPs; o_proj without bias: 256; the residual add in the block: 16
    assert report.layers["layers.1.attn.q_proj"].flops == 272
    assert report.layers["layers.1.attn.o_proj"].flops == 256
    assert report.layers["layers.0"].ops["add"].flops == 16
    # params: q_proj 8*8 + 8 = 72, o_proj 64, head 8*3 + 3 = 27; 2 * (72 + 64) + 27 = 299
    assert report.layers["layers.0.attn.q_proj"].params == 72
    assert report.params == 299


def test_nnx_module_given_abstract_or_as_a_builder() -> None:
    abstract = nnx.eval_shape(lambda: Model(nnx.Rngs(0)))
    assert count_nnx(abstract, X) == count_nnx(lambda: Model(nnx.Rngs(0)), X)


def test_nnx_classes_are_restored_after_a_count() -> None:
    before = Attention.__dict__["__call__"], nnx.Linear.__dict__["__call__"]
    count_nnx(lambda: Model(nnx.Rngs(0)), X)
    assert (Attention.__dict__["__call__"], nnx.Linear.__dict__["__call__"]) == before


def test_nnx_shared_weights_count_once_and_batch_stats_are_not_params() -> None:
    class Shared(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.a = nnx.Linear(4, 4, rngs=rngs)
            self.b = self.a
            self.bn = nnx.BatchNorm(4, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.bn(self.b(self.a(x)))

    report = count_nnx(lambda: Shared(nnx.Rngs(0)), jax.ShapeDtypeStruct((2, 4), jnp.float32))
    # a (= b): 4*4 + 4 = 20 once; bn: scale and bias 4 + 4 = 8 (running mean and variance are batch stats)
    assert report.params == 28
    assert report.layers["a"].params == 20
    assert report.layers["bn"].params == 8


def test_nnx_scan_over_stacked_layers_names_the_stack() -> None:
    class Layer(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.lin = nnx.Linear(8, 8, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return jnp.tanh(self.lin(x))

    class Stack(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            @nnx.split_rngs(splits=12)
            @nnx.vmap(in_axes=(0,), out_axes=0)
            def make(rngs: Any) -> Layer:
                return Layer(rngs)

            self.blocks = make(rngs)

        def __call__(self, x: Any) -> Any:
            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            def body(x: Any, block: Any) -> Any:
                return block(x)

            return body(x, self.blocks)

    report = count_nnx(lambda: Stack(nnx.Rngs(0)), X)
    # per layer: 2*2*8*8 + 16 (bias) = 272 in blocks.lin, tanh 16 in blocks; 12 layers
    assert report.layers["blocks.lin"].flops == 12 * 272
    assert report.layers["blocks"].flops == 12 * 16
    assert report.layers["blocks.lin"].params == 12 * 72


def test_nnx_scan_places_same_shaped_siblings_by_their_names() -> None:
    # inside nnx.scan each block is a new instance; `a` and `b` have the same class and shapes, so only the
    # block's own attribute names tell them apart
    class Layer(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.a = nnx.Linear(8, 8, rngs=rngs)
            self.b = nnx.Linear(8, 8, use_bias=False, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.b(self.a(x))

    class Stack(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            @nnx.split_rngs(splits=3)
            @nnx.vmap(in_axes=(0,), out_axes=0)
            def make(rngs: Any) -> Layer:
                return Layer(rngs)

            self.blocks = make(rngs)

        def __call__(self, x: Any) -> Any:
            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            def body(x: Any, block: Any) -> Any:
                return block(x)

            return body(x, self.blocks)

    report = count_nnx(lambda: Stack(nnx.Rngs(0)), X)
    # a: 2*2*8*8 + 16 (bias) = 272, b: 256 (no bias); 3 layers; params 3*72 and 3*64
    assert {path: (c.flops, c.params) for path, c in report.layers.items()} == {
        "blocks.a": (3 * 272, 3 * 72),
        "blocks.b": (3 * 256, 3 * 64),
    }


def test_a_submodule_named_value_keeps_its_parameters() -> None:
    # nnx.MultiHeadAttention's value projection is the submodule `value`; an NNX Variable's own field is also
    # named `value` (an attribute, not a key): the projection's parameters stay with it
    report = count_nnx(
        lambda: nnx.MultiHeadAttention(2, 8, decode=False, rngs=nnx.Rngs(0)),
        jax.ShapeDtypeStruct((3, 8), jnp.float32),
    )
    # query, key, value: kernel 8*2*4 + bias 2*4 = 72 each; out: kernel 2*4*8 + bias 8 = 72
    assert {path: layer.params for path, layer in report.layers.items() if layer.params} == {
        "query": 72,
        "key": 72,
        "value": 72,
        "out": 72,
    }
    linen_report = count_linen(linen.MultiHeadDotProductAttention(num_heads=2), jnp.zeros((3, 8)))
    assert {path: layer.params for path, layer in linen_report.layers.items() if layer.params} == {
        "query": 72,
        "key": 72,
        "value": 72,
        "out": 72,
    }


class LinenMLP(linen.Module):
    @linen.compact
    def __call__(self, x: Any) -> Any:
        x = linen.relu(linen.Dense(8, name="fc1")(x))
        return linen.Dense(3)(x)


def test_linen_layers_and_params() -> None:
    report = count_linen(LinenMLP(), jnp.zeros((2, 4)))
    # fc1: 2*2*8*4 + 16 = 144, params 4*8 + 8 = 40; Dense_0: 2*2*3*8 + 6 = 102, params 8*3 + 3 = 27; relu 16
    assert {path: (c.flops, c.params) for path, c in report.layers.items()} == {
        "fc1": (144, 40),
        "Dense_0": (102, 27),
        "": (16, 0),
    }


def test_linen_scan_is_the_scanned_module() -> None:
    class Layer(linen.Module):
        @linen.compact
        def __call__(self, x: Any, _: Any) -> Any:
            return jnp.tanh(linen.Dense(8)(x)), None

    class Stack(linen.Module):
        @linen.compact
        def __call__(self, x: Any) -> Any:
            scan = linen.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=12)
            return scan(name="blocks")(x, None)[0]

    report = count_linen(Stack(), jnp.zeros((2, 8)))
    assert report.layers["blocks.Dense_0"].flops == 12 * 272
    assert report.layers["blocks"].flops == 12 * 16
    assert report.params == 12 * 72


def test_plain_functions_take_named_scopes_as_layers() -> None:
    def fn(x: Any) -> Any:
        with jax.named_scope("encoder"), jax.named_scope("mlp"):
            x = jnp.exp(x)
        return x + 1

    report = count_jax(fn, (X,))
    assert {path: c.flops for path, c in report.layers.items()} == {"encoder.mlp": 16, "": 16}


def test_layer_namers() -> None:
    assert plain_layer(()) == ""
    assert plain_layer(("a", "nnx:layers.3.attn", "b")) == "layers.3.attn"
    assert linen_layer("Model")(("Model", "layers_3", "attn")) == "layers_3.attn"
    assert linen_layer("Model")(("Model",)) == ""


def test_the_report_fields() -> None:
    report = count_jax(lambda x: x * 2, (jnp.zeros((2, 8)),), model_name="double")
    assert (report.backend, report.model, report.training) == ("jax", "double", False)
    assert report.inputs == [{"shape": [2, 8], "dtype": "float32"}]
    assert set(report.versions) >= {"jax", "jaxlib"}
    assert "jax_control_flow" in report.conventions
    assert report.to_dict()  # a JSON round-trip holds it
    assert type(report).from_dict(report.to_dict()) == report


def test_importing_the_package_does_not_import_jax() -> None:
    code = "import sys, pytest_flopbudget; assert 'jax' not in sys.modules and 'flax' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_function_that_does_not_trace_is_one_line() -> None:
    from pytest_flopbudget._errors import CountingError

    def bad(x: Any) -> Any:
        return x @ jnp.ones((3, 3))

    with pytest.raises(CountingError, match=r"^bad: the function could not be traced \(TypeError: "):
        count_jax(bad, (X,))


def test_training_needs_a_floating_output() -> None:
    from pytest_flopbudget._errors import CountingError

    with pytest.raises(CountingError, match="floating-point output"):
        count_jax(lambda w: jnp.argmax(w), (X,), training=True)


def test_training_differentiates_the_parameters_only() -> None:
    class Net(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.fc = nnx.Linear(8, 8, rngs=rngs)
            self.bn = nnx.BatchNorm(8, rngs=rngs)
            self.drop = nnx.Dropout(0.1, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.drop(self.bn(self.fc(x)))

    report = count_nnx(lambda: Net(nnx.Rngs(0)), X, training=True)
    # RNG keys and batch statistics are state, not differentiated; the fc weight gradient x^T g is 2*8*8*2 = 256
    # FLOPs (128 MACs) and the input gets none, so fc's backward MACs are exactly that
    assert report.layers["fc"].ops["dot_general"].calls == 2
    assert report.backward.macs == 128
    assert report.params == 72 + 16


class LinenBatchNormMLP(linen.Module):
    @linen.compact
    def __call__(self, x: Any) -> Any:
        x = linen.relu(linen.Dense(20)(x))
        x = linen.BatchNorm(use_running_average=False)(x)
        return linen.Dense(50)(x)


def test_linen_state_collections_update_and_are_not_params() -> None:
    # flax's tabulate example (google/flax#4948): Dense 100->20, ReLU, BatchNorm, Dense 20->50 on batch 16.
    # Dense_0: 2*16*100*20 + 16*20 = 64,320; Dense_1: 2*16*20*50 + 16*50 = 32,800; params 2,020 + 40 + 1,050
    report = count_linen(LinenBatchNormMLP(), jnp.zeros((16, 100)))
    assert report.layers["Dense_0"].flops == 64320
    assert report.layers["Dense_1"].flops == 32800
    assert report.layers["BatchNorm_0"].params == 40
    assert report.params == 3110
    training = count_linen(LinenBatchNormMLP(), jnp.zeros((16, 100)), training=True)
    # backward MACs: both weight gradients (16*100*20 + 16*20*50) and Dense_1's input gradient (16*50*20)
    assert training.backward.macs == 32000 + 16000 + 16000
