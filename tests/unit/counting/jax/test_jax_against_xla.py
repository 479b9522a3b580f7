"""This engine's figures beside XLA's own cost analysis (`jax.jit(f).lower(...).cost_analysis()`, the figure flax's
`tabulate(compute_flops=True)` prints), with every difference itemised per op (docs/jax.md shows both tables):

- a Flax Linen model whose 12 layers are an `nn.scan` (`examples.flax_linen.ScannedStack`) counts 12 times one
  layer; XLA costs the loop body once, so its figure does not move with the depth;
- flax's tabulate comparison model (Dense 100->20, ReLU, BatchNorm, Dense 20->50, batch 16): 100,000 FLOPs here,
  99,580 in tabulate. This engine prices the BatchNorm by the shared rule (a named composite: 8 per element);
  XLA costs its primitives, a reduction of n inputs into m outputs as n - m adds and `rsqrt` as a transcendental,
  outside `flops`.
"""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
linen = pytest.importorskip("flax.linen")

import jax.numpy as jnp  # noqa: E402

from examples.flax_linen import MLPLayer, ScannedStack, TabulateExample, stack_inputs  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_linen  # noqa: E402


def xla(fn: Any, *args: Any) -> dict[str, float]:
    """XLA's cost analysis of `fn` lowered for `args` (nothing compiled, nothing run): flops and transcendentals."""
    cost = jax.jit(fn).lower(*args).cost_analysis()
    return {"flops": cost.get("flops", 0.0), "transcendentals": cost.get("transcendentals", 0.0)}


def xla_of_model(model: Any, x: Any, mutable: Any = False) -> float:
    variables = jax.eval_shape(model.init, jax.random.key(0), x)
    return xla(lambda v, x: model.apply(v, x, mutable=mutable), variables, x)["flops"]


def test_xlas_rules_for_reductions_transcendentals_and_loops() -> None:
    x = jax.ShapeDtypeStruct((16, 20), jnp.float32)
    assert xla(lambda x: x.sum(0), x)["flops"] == 16 * 20 - 20  # n inputs into m outputs: n - m adds
    assert xla(jax.lax.rsqrt, x) == {"flops": 0.0, "transcendentals": 320.0}
    assert xla(lambda x: x / 16.0, x)["flops"] == 320  # a divide is a flop
    # lax.scan is an HLO while: its body (320 multiplies) costed once, plus the counter's add and compare

    def scan(length: int) -> Any:
        return lambda x: jax.lax.scan(lambda c, _: (c * 2.0, None), x, None, length=length)[0]

    assert xla(scan(1), x)["flops"] == xla(scan(12), x)["flops"] == 320 + 2


def test_a_scanned_linen_stack_counts_twelve_times_one_layer() -> None:
    x = stack_inputs()  # [8, 64]
    report = count_linen(ScannedStack(), x)
    one = count_linen(MLPLayer(64, 256), x, None)
    # one layer on 8 rows of 64: LayerNorm by the shared rule 8*512 = 4096 (statistics 4, normalise 2, scale and
    # bias 1 each), up 2*8*64*256 + 8*256 = 264192, relu 2048 and the residual add 512, down 2*8*256*64 + 512 = 262656
    assert {path: layer.flops for path, layer in one.layers.items()} == {
        "norm": 4096,
        "up": 264192,
        "": 2560,
        "down": 262656,
    }
    assert one.flops == 533504
    for path, layer in one.layers.items():
        scanned = report.layers[f"layers.{path}" if path else "layers"]
        assert (scanned.flops, scanned.macs, scanned.params) == (12 * layer.flops, 12 * layer.macs, 12 * layer.params)
    head = 2 * 8 * 64 * 10 + 8 * 10
    assert report.flops == 12 * 533504 + head == 6412368
    assert report.params == 12 * one.params + 64 * 10 + 10

    # XLA costs the while body once, whatever the depth
    assert xla_of_model(ScannedStack(), x) == xla_of_model(ScannedStack(depth=1), x) == 543346
    # XLA costs flax's LayerNorm by its primitives: per element square, two sums (n - m: 2 * (512 - 8)), subtract
    # the mean, rstd*scale, multiply, add the bias (5 * 512 + 1008); per row two divides, square, subtract, the guard
    # max(0, var), add eps (6 * 8; rsqrt a transcendental): 3616 where the rule says 4096. So XLA's figure is one
    # layer with that LayerNorm, plus the loop counter's add and compare (2), then the head
    layer_norm_by_xla = 5 * 512 + 2 * (512 - 8) + 6 * 8
    assert layer_norm_by_xla == 3616
    assert 533504 - 4096 + layer_norm_by_xla + 2 + head == 543346


def test_the_flax_tabulate_example() -> None:
    x = jax.ShapeDtypeStruct((16, 100), jnp.float32)
    report = count_linen(TabulateExample(), x)
    n, c = 16 * 20, 20  # BatchNorm on 16 rows of 20 features
    # nn.BatchNorm with batch statistics, priced by the shared rule: statistics 4, normalise 2, scale 1, bias 1 per
    # element (8 * 320), as PyTorch's BatchNorm1d in training mode; the running averages are part of it
    assert {path: layer.flops for path, layer in report.layers.items()} == {
        "Dense_0": 2 * 16 * 100 * 20 + n,  # 64320
        "": n,  # relu
        "BatchNorm_0": 8 * n,  # 2560
        "Dense_1": 2 * 16 * 20 * 50 + 16 * 50,  # 32800
    }
    assert report.flops == 100000

    # tabulate's figure is XLA's cost analysis of apply with the batch statistics mutable, which costs flax's
    # BatchNorm by its primitives and XLA's rules:
    batch_norm_by_xla = (
        n  # square x
        + 2 * (n - c)  # the sums of x and x^2 over the batch: n - m adds each (XLA's reduction rule)
        + 2 * c  # two divides by 16: the means of x and of x^2
        + 3 * c  # mean^2, E[x^2] - mean^2, the guard max(0, var)
        + 6 * c  # running averages: 0.99*ra + 0.01*batch, for the mean and the variance (4 mul, 2 add)
        + n  # x - mean
        + 2 * c  # var + eps, * scale (per feature; the rsqrt between them is a transcendental, outside flops)
        + 2 * n  # * that factor, + bias
    )
    assert batch_norm_by_xla == 2140
    assert xla_of_model(TabulateExample(), x, mutable=["batch_stats"]) == 99580
    # the one difference: the BatchNorm, 2560 by the rule here, 2140 by its primitives in XLA
    assert report.flops - 8 * n + batch_norm_by_xla == 99580


def test_tabulate_prints_that_figure() -> None:
    pytest.importorskip("rich")
    table = TabulateExample().tabulate(
        jax.random.key(0), jnp.ones((16, 100)), compute_flops=True, console_kwargs={"width": 200}
    )
    root = next(line for line in table.splitlines() if "TabulateExample" in line and "float32" in line)
    assert "99580" in root.split()
