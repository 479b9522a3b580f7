"""Control flow and calls as they run: scan bodies times their length, while loops by their static trip count,
cond by its costlier branch, calls and custom-derivative rules once; training phases from value_and_grad."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from pytest_flopbudget._counting.jax.engine import count_jax  # noqa: E402
from pytest_flopbudget._counting.jax.walk import DYNAMIC_TRIP  # noqa: E402

F32 = jnp.float32


def spec(*shape: int, dtype: Any = F32) -> Any:
    return jax.ShapeDtypeStruct(shape, dtype)


def layer(x: Any, w: Any) -> Any:
    # (2,8) @ (8,8): 2*2*8*8 = 256 FLOPs, 128 MACs; tanh on 16 elements: 16 FLOPs. 272 FLOPs in all.
    return jnp.tanh(x @ w)


def test_one_layer() -> None:
    report = count_jax(layer, (spec(2, 8), spec(8, 8)))
    assert (report.flops, report.macs) == (272, 128)


def test_a_scan_of_twelve_layers_is_exactly_twelve_layers() -> None:
    def stack(x: Any, ws: Any) -> Any:
        with jax.named_scope("blocks"):
            return lax.scan(lambda h, w: (layer(h, w), None), x, ws)[0]

    one = count_jax(layer, (spec(2, 8), spec(8, 8)))
    twelve = count_jax(stack, (spec(2, 8), spec(12, 8, 8)))
    # 12 * 272 = 3264 FLOPs, 12 * 128 = 1536 MACs
    assert (twelve.flops, twelve.macs) == (3264, 1536) == (12 * one.flops, 12 * one.macs)
    assert twelve.layers["blocks"].ops["dot_general"].calls == 12
    assert twelve.layers["blocks"].ops["tanh"].calls == 12
    assert set(twelve.layers) == {"blocks"}  # inside the scan, the layer is the scanned scope


def test_a_scan_over_a_sequence_counts_each_step() -> None:
    # cumulative product over 5 steps of a (3,) carry: one mul of 3 elements per step: 15
    def fn(xs: Any) -> Any:
        return lax.scan(lambda c, x: (c * x, c), jnp.ones(3), xs)

    assert count_jax(fn, (spec(5, 3),)).flops == 15


def test_a_fori_loop_with_constant_bounds_counts_each_iteration() -> None:
    # 5 iterations of x*2 + 1 on (2,3): 2 ops * 6 elements = 12 per iteration, 60 in all (jax writes it as a scan;
    # the counter's own add is 1 per iteration: 5 more)
    def fn(x: Any) -> Any:
        return lax.fori_loop(0, 5, lambda i, c: c * 2 + 1, x)

    report = count_jax(fn, (spec(2, 3),))
    assert report.flops == 60 + 5
    assert report.skipped_ops == {}


def test_a_while_loop_with_a_static_trip_count() -> None:
    # counter 0 -> 10 by 1: the body (counter add 1 + mul of 3 elements = 4) runs 10 times, the condition (one lt)
    # 11 times: 40 + 11 = 51
    def fn(x: Any) -> Any:
        return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1]

    report = count_jax(fn, (spec(3),))
    assert report.flops == 51
    assert report.skipped_ops == {}


def test_a_while_loop_with_a_traced_bound_is_skipped_with_the_reason() -> None:
    def fn(x: Any, n: Any) -> Any:
        return lax.fori_loop(0, n, lambda i, c: c * 2, x)

    report = count_jax(fn, (spec(3), spec(dtype=jnp.int32)))
    assert report.skipped_ops["while"].reason == DYNAMIC_TRIP
    assert report.skipped_ops["while"].calls == 1


def test_a_loop_in_a_scan_multiplies() -> None:
    # a scan of 4 steps around a 3-iteration fori_loop of one mul on (2,): (3 * (2 + 1)) * 4 = 36
    def fn(x: Any) -> Any:
        body = lambda c, _: (lax.fori_loop(0, 3, lambda i, v: v * 2, c), None)  # noqa: E731
        return lax.scan(body, x, None, length=4)[0]

    assert count_jax(fn, (spec(2),)).flops == 36


def test_cond_counts_its_costlier_branch() -> None:
    # branch 0: a + 1 on (2,3) = 6; branch 1: exp(a) * 2 = 12: the cond costs 12
    def fn(p: Any, a: Any) -> Any:
        return lax.cond(p, lambda v: v + 1, lambda v: jnp.exp(v) * 2, a)

    report = count_jax(fn, (spec(dtype=jnp.bool_), spec(2, 3)))
    assert report.flops == 12
    ops = report.layers[""].ops
    assert {op for op, cost in ops.items() if cost.flops} == {"exp", "mul"}  # the bool -> int index moves bytes only


def test_cond_reports_skipped_ops_of_the_cheaper_branch() -> None:
    def fn(p: Any, a: Any) -> Any:
        return lax.cond(p, lambda v: jnp.fft.fft(v), lambda v: jnp.exp(v) * 2, a)

    report = count_jax(fn, (spec(dtype=jnp.bool_), spec(4, dtype=jnp.complex64)))
    assert report.flops == 8
    assert "fft" in report.skipped_ops


def test_calls_count_once() -> None:
    # jit, closed_call-style nesting, remat and custom_jvp/custom_vjp wrappers all cost the body once: 272
    @jax.custom_vjp
    def custom(x: Any, w: Any) -> Any:
        return layer(x, w)

    custom.defvjp(lambda x, w: (layer(x, w), (x, w)), lambda res, g: (g @ res[1].T, res[0].T @ g))
    for wrapped in (jax.jit(layer), jax.jit(jax.jit(layer)), jax.checkpoint(layer), custom):
        report = count_jax(wrapped, (spec(2, 8), spec(8, 8)))
        assert (report.flops, report.macs) == (272, 128), wrapped


def test_training_splits_forward_and_backward() -> None:
    # loss = sum(x @ w), x (2,4), w (4,3), gradient for w only (argnums=0 is w):
    # forward: dot 2*2*3*4 = 48, the loss's reduce_sum over 6 elements = 6: 54
    # backward: dL/dw = x^T @ g: 2*4*3*2 = 48 (the cotangent's broadcast is free); no gradient for x
    def fn(w: Any, x: Any) -> Any:
        return x @ w

    report = count_jax(fn, (spec(4, 3), spec(2, 4)), training=True)
    assert report.training
    assert (report.forward.flops, report.forward.macs) == (54, 24)
    assert (report.backward.flops, report.backward.macs) == (48, 24)
    assert report.flops == 102


def test_training_under_remat_recomputes_in_the_backward() -> None:
    # tanh(x @ w), x (2,8), w (8,8), gradient for w. Without remat the forward is the matmul (256), tanh (16), the
    # tanh derivative's residual 1 - y^2 that jax computes alongside it (sub: 16) and the loss's sum (16): 304; the
    # backward is dL/dw = x^T g (2*8*8*2 = 256) and the cotangent's 2 muls and one add_any (48): 304.
    # Under jax.checkpoint the forward keeps no residual (288), and the backward first recomputes the forward
    # (matmul 256, tanh 16, sub 16: 288, what remat runs) before the same 304: 592. Remat's scope is transparent.
    plain = count_jax(lambda w, x: layer(x, w), (spec(8, 8), spec(2, 8)), training=True)
    remat = count_jax(jax.checkpoint(lambda w, x: layer(x, w)), (spec(8, 8), spec(2, 8)), training=True)
    assert (plain.forward.flops, plain.backward.flops) == (304, 304)
    assert (remat.forward.flops, remat.backward.flops) == (288, 592)
    assert (remat.forward.macs, remat.backward.macs) == (128, 256)
    assert set(remat.layers) == {""}


def test_switch_counts_its_costliest_branch() -> None:
    # branches on (4,): 4, 8 (exp, mul) and 12 (sin, cos, add) FLOPs: the switch costs 12, plus the clamp jax puts
    # on the index (1 element): 13
    branches = [lambda v: v + 1, lambda v: jnp.exp(v) * 2, lambda v: jnp.sin(v) + jnp.cos(v)]

    def fn(i: Any, a: Any) -> Any:
        return lax.switch(i, branches, a)

    assert count_jax(fn, (spec(dtype=jnp.int32), spec(4))).flops == 13


def test_a_custom_vjp_rule_counts_its_backward_in_the_backward() -> None:
    # forward: sin on (4,8) (32) and the loss's sum (32); backward: the rule's cos and mul (32 + 32)
    @jax.custom_vjp
    def f(x: Any) -> Any:
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
    report = count_jax(f, (spec(4, 8),), training=True)
    assert (report.forward.flops, report.backward.flops) == (64, 64)
