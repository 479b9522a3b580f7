"""XLA's cost analysis as a peer (`_explain/peers/xla.py`): each op of the jaxpr our count walked, costed by XLA
alone, next to ours; XLA's total is `jax.jit(f).lower(...).cost_analysis()["flops"]`, as a user gets it."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
linen = pytest.importorskip("flax.linen")

import jax.numpy as jnp  # noqa: E402

from pytest_flopbudget._counting.jax.engine import captured_traces, count_jax, count_linen  # noqa: E402
from pytest_flopbudget._explain.items import Explanation  # noqa: E402
from pytest_flopbudget._explain.peers.xla import PEER  # noqa: E402


def explained(count: Any, *args: Any) -> Explanation:
    with captured_traces() as traces:
        report = count(*args)
    explanation = PEER.compare(report, *traces[0])
    assert explanation.residual == 0
    return explanation


def by_reason(explanation: Explanation) -> dict[str, int]:
    return explanation.by_reason()


def test_transcendentals_reductions_and_the_rest_of_xlas_rules() -> None:
    def f(x: Any) -> Any:
        return jax.lax.rsqrt(jnp.tanh(x) * 2.0).sum(0)

    x = jax.ShapeDtypeStruct((16, 20), jnp.float32)
    explanation = explained(lambda x: count_jax(f, (x,)), x)
    # ours: tanh 320, mul 320, rsqrt 320, sum 320 (1 per input element) = 1280
    assert explanation.ours == 1280
    # XLA: mul 320, sum 320 - 20 = 300 (n inputs into m outputs: n - m adds); tanh and rsqrt are transcendentals
    assert explanation.theirs == 620 == jax.jit(f).lower(x).cost_analysis()["flops"]
    assert [(i.op, i.ours, i.theirs, i.reason) for i in explanation.items] == [
        ("tanh", 320, 0, "transcendental, not in flops"),
        ("rsqrt", 320, 0, "transcendental, not in flops"),
        ("reduce_sum", 320, 300, "reduction as n - m adds"),
    ]
    assert explanation.notes == ("XLA also reports 640 transcendentals, apart from its flops",)


def test_a_scanned_linen_stack_is_its_body_once_to_xla() -> None:
    from examples.flax_linen import ScannedStack, stack_inputs

    x = stack_inputs()  # [8, 64]
    explanation = explained(count_linen, ScannedStack(), x)
    variables = jax.eval_shape(ScannedStack().init, jax.random.key(0), x)
    user = jax.jit(ScannedStack().apply).lower(variables, x).cost_analysis()["flops"]
    assert (explanation.ours, explanation.theirs) == (6_412_368, 543_346) and user == 543_346
    one = 533_504 - 4096  # one layer but its LayerNorm: up 264,192 + relu and residual 2,560 + down 262,656
    assert by_reason(explanation) == {
        # 11 of the 12 layers: XLA costs the while body once (the LayerNorm by its primitives, 3,616)
        "scan counted once": 11 * (one + 3616),
        # the LayerNorm, 12 times: the shared rule's 8 per element (8 * 512 = 4096) against XLA's 3,616 for
        # flax's primitives (5 per element, two sums as n - m = 2 * 504, six per-row ops 6 * 8; rsqrt apart)
        "priced by its primitives": 12 * (4096 - 3616),
        "loop counter": -2,  # the HLO while's add and compare
    }
    norm = [i for i in explanation.items if i.layer == "layers.norm"]
    assert [(i.ours, i.theirs, i.reason) for i in norm] == [
        (12 * 4096, 12 * 3616, "priced by its primitives"),
        (12 * 3616, 3616, "scan counted once"),
    ]


def test_the_flax_tabulate_example_itemises_the_batch_norm() -> None:
    from examples.flax_linen import TabulateExample

    x = jax.ShapeDtypeStruct((16, 100), jnp.float32)
    explanation = explained(count_linen, TabulateExample(), x)
    # our count returns the output alone, so XLA drops the running averages (6 * 20 = 120 flops): 99,580 - 120
    assert (explanation.ours, explanation.theirs) == (100_000, 99_460)
    assert [(i.layer, i.ours, i.theirs, i.reason) for i in explanation.items] == [
        # the shared rule's 8 per element on 320 elements, against XLA's 2,140 for flax's primitives
        # (docs/jax.md derives them)
        ("BatchNorm_0", 2560, 2140, "priced by its primitives"),
        ("BatchNorm_0", 2140, 2020, "unused result dropped"),
    ]


def test_a_fori_loop_is_counted_once_and_a_while_we_skip_is_xlas_alone() -> None:
    def g(x: Any) -> Any:
        doubled = jax.lax.while_loop(lambda c: c[1].sum() < 10.0, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]
        return jax.lax.fori_loop(0, 3, lambda i, v: v * 3.0, doubled)

    x = jax.ShapeDtypeStruct((4, 5), jnp.float32)
    explanation = explained(lambda x: count_jax(g, (x,)), x)
    # ours: the while has no static trip count (skipped, listed); the fori_loop is a scan of 3: (20 mul + 1 add) * 3
    assert explanation.ours == 63
    # XLA: the while's body (add 1, mul 20) and condition (sum 20 - 1, lt 1) once; the scan's body once (mul 20: the
    # fori_loop's counter, which nothing reads after the loop, is dropped by jax) and XLA's own counter, add and compare
    assert explanation.theirs == 21 + 20 + 20 + 2 == jax.jit(g).lower(x).cost_analysis()["flops"]
    assert [(i.op, i.ours, i.theirs, i.reason) for i in explanation.items] == [
        ("add", 3, 0, "unused result dropped"),
        ("add", 0, 1, "skipped by us"),
        ("mul", 60, 20, "scan counted once"),
        ("mul", 0, 20, "skipped by us"),
        ("reduce_sum", 0, 19, "skipped by us"),
        ("lt", 0, 1, "skipped by us"),
        ("while", 0, 2, "loop counter"),
    ]
