"""The JAX engine's memory metrics, derived by hand: `bytes` per equation (unfused), `param-bytes` and
`buffer-bytes` from the abstract state, and `peak-memory` by liveness over the jaxpr; a scan's bytes are its
body's times its length; what cannot be sized is not measured."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")

import flax.linen as nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from pytest_flopbudget._counting.graph_memory import PEAK_CONVENTION  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_jax, count_linen, count_nnx  # noqa: E402
from pytest_flopbudget._counting.jax.memory import BYTES_CONVENTION, aval_bytes  # noqa: E402
from pytest_flopbudget._counting.jax.walk import Walker  # noqa: E402
from pytest_flopbudget._counting.tally import Tally  # noqa: E402
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, PARAM_BYTES, PEAK_MEMORY  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

F32 = jnp.float32


def spec(*shape: int, dtype: Any = F32) -> Any:
    return jax.ShapeDtypeStruct(shape, dtype)


class Dense(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.fc = nnx.Linear(16, 9, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc(x)


class MLP(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.fc1 = nnx.Linear(4, 8, rngs=rngs)
        self.fc2 = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc2(nnx.relu(self.fc1(x)))


def test_a_dense_layer_moves_its_matmul_and_its_bias_add() -> None:
    report = count_nnx(lambda: Dense(nnx.Rngs(0)), spec(25, 16))
    ops = report.layers["fc"].ops
    # dot_general: reads x 25*16*4 = 1600 and the kernel 16*9*4 = 576, writes 25*9*4 = 900: 3076
    assert ops["dot_general"].get(BYTES) == 3076
    # add: reads the product 900 and the bias reshaped to [1, 9] (a view, 9*4 = 36), writes 900: 1836
    assert ops["add"].get(BYTES) == 1836
    assert report.bytes == 3076 + 1836  # the reshape is a view: 0
    assert report.param_bytes == (16 * 9 + 9) * 4 == report.layers["fc"].get(PARAM_BYTES)
    assert report.buffer_bytes == 0
    assert report.optional_metrics == {BYTES, PARAM_BYTES, BUFFER_BYTES, PEAK_MEMORY}
    assert report.conventions[BYTES] == BYTES_CONVENTION
    assert report.conventions[PEAK_MEMORY] == PEAK_CONVENTION


def test_a_two_layer_mlp_peaks_with_the_first_layers_two_activations_alive() -> None:
    report = count_nnx(lambda: MLP(nnx.Rngs(0)), spec(2, 4))
    # alive throughout: parameters (4*8 + 8 + 8*2 + 2)*4 = 232 and the input 2*4*4 = 32: 264.
    # fc1 dot [2,8]: +64 = 328; the bias add: +64 = 392 (the product is still alive when the add returns), the
    # product freed: 328; relu's max: +64 = 392 again (not above); the add's result freed: 328; fc2 dot [2,2]: +16;
    # its add: +16 (376 at most). The peak, 392, is first reached in fc1.
    assert (report.peak_memory, report.peak_layer) == (392, "fc1")
    # bytes: fc1 dot 32 + 128 + 64 = 224, add 64 + 32 + 64 = 160; max 64 + 64 = 128; fc2 dot 64 + 64 + 16 = 144,
    # add 16 + 8 + 16 = 40
    assert report.bytes == 224 + 160 + 128 + 144 + 40 == 696


def test_training_peaks_in_the_backward_with_the_saved_activations_and_gradients() -> None:
    report = count_nnx(lambda: MLP(nnx.Rngs(0)), spec(2, 4), training=True)
    # value_and_grad of the outputs' sum, in the jaxpr's order (264 alive throughout, as above):
    #   forward: dot f 64 (328), add h 64 (392; f freed: 328), max i 64 (392), gt l = (h > 0) bool 16 (408; h
    #   freed: 344), fc2 dot m 16 (360), add o 16 (376; m freed: 360), the loss p 4 (364; o freed: 348);
    #   backward: the cotangent of the sum is a broadcast of 1.0 (a view of a literal: nothing), its bias gradient
    #   r 8 (356), fc2's kernel gradient u 64 (420; i freed: 356), the cotangent of i w 64 (420), select_n y 64
    #   (484; l and w freed: 404), fc1's bias gradient z 32 (436), fc1's kernel gradient bc [8,4] 128 (564).
    # Gradients (u, r, z, bc) and the loss stay to the end; the transposes and reshapes over them are views.
    assert (report.peak_memory, report.peak_layer) == (564, "fc1")


def test_the_peak_memory_of_training_is_reached_in_the_backward() -> None:
    walker = Walker()
    model = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
    graphdef, weights = nnx.split(model)

    def loss(weights: Any, x: Any) -> Any:
        return nnx.merge(graphdef, weights)(x).sum()

    walker.walk(jax.make_jaxpr(jax.value_and_grad(loss))(weights, spec(2, 4)), Tally())
    peak = walker.memory.recorder.peak()
    assert (peak.bytes, peak.backward) == (564, True)


def one_layer(w: Any, x: Any) -> Any:
    return jnp.tanh(x @ w)


def scanned(ws: Any, x: Any) -> Any:
    return lax.scan(lambda carry, w: (one_layer(w, carry), None), x, ws)[0]


def unrolled(ws: Any, x: Any) -> Any:
    for index in range(3):
        x = one_layer(ws[index], x)
    return x


def test_a_scan_of_three_layers_moves_three_times_its_body() -> None:
    body = count_jax(one_layer, (spec(8, 8), spec(2, 8)))
    # one layer: dot reads x 2*8*4 = 64 and w 8*8*4 = 256, writes 64: 384; tanh reads 64, writes 64: 128
    assert body.bytes == 384 + 128 == 512
    scan = count_jax(scanned, (spec(3, 8, 8), spec(2, 8)))
    assert scan.bytes == 3 * 512 == count_jax(unrolled, (spec(3, 8, 8), spec(2, 8))).bytes
    assert scan.flops == 3 * body.flops


def test_a_scan_body_peaks_on_top_of_the_scans_results() -> None:
    # one layer: w 256 + x 64 = 320 alive; dot +64 = 384, tanh +64 = 448
    assert count_jax(one_layer, (spec(8, 8), spec(2, 8))).peak_memory == 448
    # unrolled: ws 3*256 + x 64 = 832; each layer's dot and tanh alive at once (the previous tanh freed after the
    # dot that reads it): 832 + 64 + 64 = 960 (`ws[i]` is a slice: a view)
    assert count_jax(unrolled, (spec(3, 8, 8), spec(2, 8))).peak_memory == 960
    # scanned: 832 + the scan's result (the final carry, 64) allocated when it starts + the body's own peak (its dot
    # and tanh, 128; the carry and the slice of ws it reads live outside it): 1024. The carry counts twice while
    # the body runs, its buffer and the body's new value: the documented rule (docs/jax.md, "Memory").
    assert count_jax(scanned, (spec(3, 8, 8), spec(2, 8))).peak_memory == 1024


def test_a_while_loop_without_a_static_trip_count_still_has_a_peak() -> None:
    def fn(x: Any) -> Any:
        return lax.while_loop(lambda c: c.sum() < 10, lambda c: jnp.tanh(c) * 2, x)

    report = count_jax(fn, (spec(2, 8),))
    assert report.skipped == {"while": 1}
    # x 64 + the loop's result 64 + the body's peak (tanh 64 and its product 64 at once): 256
    assert report.peak_memory == 256
    assert report.measures(BYTES) and report.bytes == 0  # the loop is skipped: its bytes, like its FLOPs, are not


def test_a_body_the_walk_cannot_enter_leaves_the_peak_not_measured() -> None:
    report = count_jax(lambda x: jax.pmap(jnp.tanh)(x) * 2, (spec(1, 8),))
    assert report.skipped == {"shard_map": 1}
    assert not report.measures(PEAK_MEMORY)
    assert report.conventions[PEAK_MEMORY] == "not measured: the body of shard_map in the model could not be walked"
    assert "peak_memory" not in report.to_dict()
    assert report.measures(BYTES) and report.bytes == 2 * 8 * 4  # the mul: reads 32, writes 32 (2 is a literal)


def test_a_size_the_jaxpr_does_not_fix_leaves_bytes_and_peak_not_measured() -> None:
    from jax import export

    (batch,) = export.symbolic_shape("b")
    walker = Walker()
    walker.walk(jax.make_jaxpr(lambda x: jnp.concatenate([x, x]))(spec(batch, 8)), Tally())
    assert walker.memory.unsized == "a size of concatenate in the model is not fixed in the jaxpr"
    assert walker.memory.recorder.peak().unsized == "an input's size is not known"
    assert aval_bytes(spec(batch, 8)) is None


def test_batch_statistics_are_buffer_bytes_and_rng_state_is_neither() -> None:
    class Model(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.lin = nnx.Linear(8, 8, rngs=rngs)
            self.bn = nnx.BatchNorm(8, rngs=rngs)
            self.drop = nnx.Dropout(0.1, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.drop(self.bn(self.lin(x)))

    report = count_nnx(lambda: Model(nnx.Rngs(0)), spec(2, 8))
    # lin (8*8 + 8)*4 = 288, bn's scale and bias 2*8*4 = 64; bn's mean and var 2*8*4 = 64 are buffers; the dropout's
    # RNG key and counter are neither (they are alive in the peak, as arguments)
    assert report.layer_metric(PARAM_BYTES) == {"lin": 288, "bn": 64, "drop": 0}
    assert report.layer_metric(BUFFER_BYTES) == {"lin": 0, "bn": 64, "drop": 0}


def test_linen_collections_other_than_params_are_buffers_by_layer() -> None:
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.BatchNorm(use_running_average=True)(nn.Dense(8)(x))
            return nn.Dense(2)(x)

    report = count_linen(Net(), spec(2, 8))
    # Dense_0 (8*8 + 8)*4 = 288, BatchNorm_0's scale and bias 64, Dense_1 (8*2 + 2)*4 = 72; batch_stats 2*8*4 = 64
    assert {path: layer.get(PARAM_BYTES) for path, layer in report.layers.items() if layer.get(PARAM_BYTES)} == {
        "Dense_0": 288,
        "BatchNorm_0": 64,
        "Dense_1": 72,
    }
    assert report.layers["BatchNorm_0"].get(BUFFER_BYTES) == 64 == report.buffer_bytes


def test_parameters_are_measured_at_their_own_dtype() -> None:
    report = count_nnx(lambda: nnx.Linear(4, 8, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0)), spec(2, 4))
    assert report.param_bytes == (4 * 8 + 8) * 2  # bfloat16: 2 bytes each
    assert aval_bytes(spec(3, dtype=jnp.int4)) == 2  # sub-byte types packed: 3 * 4 bits, rounded up
    assert aval_bytes(jax.random.key(0)) == 8  # a PRNG key holds two uint32 words


def test_a_report_with_memory_reads_back_from_json() -> None:
    report = count_nnx(lambda: MLP(nnx.Rngs(0)), spec(2, 4), training=True)
    data = report.to_dict()
    assert data["peak_memory"] == {"bytes": 564, "layer": "fc1"}
    assert {"bytes", "param-bytes", "buffer-bytes"} <= set(data["totals"])
    again = Report.from_dict(data)
    assert again == report
    assert again.optional_metrics == report.optional_metrics


def test_xla_fuses_below_the_unfused_figures() -> None:
    # docs/jax.md, "Memory": the same comparison on a wider MLP. XLA's compiled program holds the same arguments,
    # but its fused kernels keep the gelu's intermediates out of memory, so its peak (arguments + output + its
    # temporaries) and the bytes its cost analysis says it accesses are below the unfused figures.
    class Mlp(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.fc1 = nnx.Linear(64, 256, rngs=rngs)
            self.fc2 = nnx.Linear(256, 64, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.fc2(nnx.gelu(self.fc1(x)))

    x = spec(8, 64)
    report = count_nnx(lambda: Mlp(nnx.Rngs(0)), x)
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Mlp(nnx.Rngs(0))))
    compiled = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x)).lower(state, x).compile()
    memory = compiled.memory_analysis()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    # parameters (64*256 + 256 + 256*64 + 64)*4 = 132,352 and x 8*64*4 = 2,048: the arguments XLA holds too
    assert report.param_bytes + 2048 == memory.argument_size_in_bytes == 134_400
    xla_peak = memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes
    assert report.peak_memory > xla_peak
    assert report.bytes > cost["bytes accessed"]


def test_a_composite_is_one_op_in_memory_too() -> None:
    class Model(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.emb = nnx.Embed(32, 8, rngs=rngs)
            self.ln = nnx.LayerNorm(8, rngs=rngs)
            self.fc = nnx.Linear(8, 8, rngs=rngs)

        def __call__(self, ids: Any) -> Any:
            return self.fc(nnx.gelu(self.ln(self.emb(ids))))

    report = count_nnx(lambda: Model(nnx.Rngs(0)), spec(2, 4, dtype=jnp.int32))
    moved = {op: cost.get(BYTES) for layer in report.layers.values() for op, cost in layer.ops.items()}
    # Embed: the ids 2*4*4 = 32 and the 8 rows it gathers 8*8*4 = 256 read (never the [32, 8] table), 256 written,
    # as PyTorch's embedding; LayerNorm: x 256, scale and bias 32 each read, 256 written (its statistics stay
    # inside, as in one kernel); gelu: 256 read, 256 written (none of its 8 primitives' values)
    assert (moved["flax.nnx.Embed"], moved["flax.nnx.LayerNorm"], moved["jax.nn.gelu"]) == (544, 576, 512)
    # alive throughout: the table 32*8*4 = 1024, the norm's 2*8*4 = 64, fc's (8*8 + 8)*4 = 288 and the ids 32:
    # 1408. Each composite's result (256) with its input still alive: 1408 + 256 + 256 = 1920, first in ln
    assert (report.peak_memory, report.peak_layer) == (1920, "ln")
