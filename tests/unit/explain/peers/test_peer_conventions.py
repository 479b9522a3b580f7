"""The peer-convention profiles (`_explain/peers/conventions.py`): the figure each peer would report, from our
Report alone, equal to the peer's own run where the rule needs nothing a Report lacks, and said to be a guess where
it does."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_flopbudget._explain.items import Explanation
from pytest_flopbudget._explain.peers.conventions import PEER_PROFILES, profile_named


def applied(name: str, report: Any) -> Explanation:
    profile = profile_named(name)
    assert profile is not None
    explanation = profile.apply(report)
    assert explanation.residual == 0 and explanation.peer == name and explanation.ours == report.flops
    return explanation


def test_every_profile_has_the_protocols_fields() -> None:
    from pytest_flopbudget._conventions.profile import Profile

    assert [profile.name for profile in PEER_PROFILES] == ["fvcore", "ptflops", "thop", "tf-profiler", "xla"]
    for profile in PEER_PROFILES:
        typed: Profile = profile  # the convention registry's protocol, structurally
        assert typed is profile
        assert profile.title and "\n" not in profile.title
        assert profile.source.startswith("https://github.com/") and profile.source.endswith((".py", ".cc"))
        assert callable(profile.apply)


# --- PyTorch: fvcore, ptflops, thop ------------------------------------------------------------------------------


def small_convnet() -> Any:
    """A stem conv with bias, batch norm and ReLU modules, a residual block (`x + y` in its own forward), a 2x2 max
    pool, an adaptive average pool and a linear head."""
    torch = pytest.importorskip("torch")
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            return self.relu(self.bn(self.conv(x)) + x)

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), Block(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5),
    ).eval()  # fmt: skip


def torch_report(model: Any, *args: Any, no_grad: bool = False) -> Any:
    import torch

    from pytest_flopbudget import count

    with torch.no_grad() if no_grad else torch.enable_grad():
        return count(model, *args)


def test_the_1x1_conv_with_a_bias_under_each_pytorch_profile() -> None:
    torch = pytest.importorskip("torch")
    report = torch_report(torch.nn.Conv2d(1, 1, 1).eval(), torch.ones(1, 1, 1, 1))
    assert report.flops == 3  # 1 MAC = 2 FLOPs, and the bias add
    # fvcore and thop: the MAC as 1, no bias; ptflops: the MAC as 1, and the bias
    assert applied("fvcore", report).by_reason() == {"MACs vs FLOPs": 1, "bias add": 1}
    assert applied("thop", report).theirs == 1
    assert (applied("ptflops", report).theirs, applied("ptflops", report).by_reason()) == (2, {"MACs vs FLOPs": 1})


def test_norms_and_activations_by_hand() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    x = torch.zeros(2, 4, 3, 3)  # 72 elements
    report = torch_report(nn.Sequential(nn.BatchNorm2d(4), nn.ReLU()).eval(), x)
    assert report.flops == 4 * 72 + 72  # batch norm in eval: 4 per element (normalise 2, scale, shift); relu 1
    assert applied("fvcore", report).theirs == 2 * 72  # batch norm 2 per element with an affine; relu ignored
    assert applied("thop", report).theirs == 2 * 2 * 72  # calculate_norm 2 per element, twice with an affine
    # ptflops: batch norm 2 per element; the ReLU module's hook and the patched F.relu, 1 each
    assert applied("ptflops", report).theirs == 2 * 72 + 2 * 72
    layer_norm = torch_report(nn.LayerNorm(8).eval(), torch.zeros(3, 8))  # 24 elements, 8 FLOPs each here
    assert applied("fvcore", layer_norm).theirs == 5 * 24  # norm_flop_counter: 5 per element with an affine
    assert applied("thop", layer_norm).theirs == 4 * 24


@pytest.mark.parametrize("peer", ["fvcore", "ptflops", "thop"])
def test_each_pytorch_profile_gives_the_peers_own_figure(peer: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip(peer)
    from pytest_flopbudget._explain.run import explain_model

    x = torch.zeros(2, 3, 8, 8)
    report = torch_report(small_convnet(), x, no_grad=peer == "thop")  # thop runs its forward under no_grad
    ran = explain_model(small_convnet(), (x,), {}, peer)
    profiled = applied(peer, report)
    # 71,386 FLOPs ours; fvcore 34,472, ptflops 38,194, thop 36,528 "flops" (MACs), each as the peer ran
    assert (profiled.ours, profiled.theirs) == (ran.ours, ran.theirs) == (71_386, {"fvcore": 34_472, "ptflops": 38_194,
                                                                                   "thop": 36_528}[peer])  # fmt: skip
    assert profiled.by_reason() == ran.by_reason()


@pytest.mark.slow
@pytest.mark.parametrize("peer", ["fvcore", "thop"])
def test_resnet18_under_the_fvcore_and_thop_profiles_is_their_figure(peer: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip(peer)
    from examples.resnet import resnet18
    from pytest_flopbudget._explain.run import explain_model

    x = torch.zeros(1, 3, 64, 64)
    ran = explain_model(resnet18(), (x,), {}, peer)
    assert applied(peer, torch_report(resnet18().eval(), x, no_grad=peer == "thop")).theirs == ran.theirs


def test_ptflops_says_where_it_guessed() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    # a 3x3 max pool with stride 2 reads each input more than once: ptflops prices its input, 1 per element
    report = torch_report(nn.MaxPool2d(3, 2, 1).eval(), torch.zeros(1, 1, 8, 8))
    assert any("overlapping" in note for note in applied("ptflops", report).notes)


# --- TensorFlow's profiler ---------------------------------------------------------------------------------------


def keras_on_tf() -> Any:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend in this process")
    return keras


def test_tf_profiler_a_dense_layer_with_relu_by_hand() -> None:
    keras = keras_on_tf()
    import tensorflow as tf

    from pytest_flopbudget._counting.tensorflow.engine import count_tf

    x = keras.Input((16,))
    model = keras.Model(x, keras.layers.Dense(9, activation="relu")(x))
    report = count_tf(model, [tf.TensorSpec((25, 16), tf.float32)])
    # MatMul 2*25*16*9 = 7200, BiasAdd 225, relu 225 (1 per element)
    assert report.flops == 7200 + 225 + 225
    explanation = applied("tf-profiler", report)
    assert explanation.theirs == 7425  # the profiler registers no rule for Relu
    assert explanation.by_reason() == {"op not supported": 225}


def test_tf_profiler_profile_is_the_profilers_figure_on_the_convnet() -> None:
    keras_on_tf()
    import tensorflow as tf

    from examples.keras_models import convnet
    from pytest_flopbudget._counting.tensorflow.engine import count_tf
    from pytest_flopbudget._explain.peers.tf_profiler import profile

    model = convnet(32)
    spec = tf.TensorSpec((1, 32, 32, 3), tf.float32)
    _, ran, _ = profile(tf.function(lambda x: model(x, training=False)).get_concrete_function(spec))
    ops = applied("tf-profiler", count_tf(model, [spec], keras_rules=False))  # the ops TensorFlow runs
    # Relu 34,816 without a rule; two Rsqrt over 16 channels at 2 per element (-32)
    assert (ops.ours, ops.theirs, ran) == (5_901_098, 5_866_314, 5_866_314)
    assert ops.by_reason() == {"op not supported": 34_816, "per-element cost": -32}
    ruled = applied("tf-profiler", count_tf(model, [spec]))  # batch norms priced by the shared rule: a guess, said
    assert any("taken at our figure" in note for note in ruled.notes)


# --- XLA ---------------------------------------------------------------------------------------------------------


def test_xla_profile_by_hand_and_against_xla() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from pytest_flopbudget._counting.jax.engine import count_jax

    def f(x: Any) -> Any:
        return jax.lax.rsqrt(jnp.tanh(x) * 2.0).sum(0)

    x = jax.ShapeDtypeStruct((16, 20), jnp.float32)
    explanation = applied("xla", count_jax(f, (x,)))
    # ours 4 * 320; XLA: mul 320 + sum 320 - 20 (n - m, the 20 outputs read back from the sum's bytes)
    assert (explanation.ours, explanation.theirs) == (1280, 620) == (1280, jax.jit(f).lower(x).cost_analysis()["flops"])
    assert explanation.by_reason() == {"transcendental, not in flops": 640, "reduction as n - m adds": 20}


def test_xla_profile_of_a_linen_mlp_is_xlas_figure() -> None:
    jax = pytest.importorskip("jax")
    linen = pytest.importorskip("flax.linen")
    import jax.numpy as jnp

    from pytest_flopbudget._counting.jax.engine import count_linen

    class Mlp(linen.Module):
        @linen.compact
        def __call__(self, x: Any) -> Any:
            return linen.Dense(3)(jax.nn.relu(linen.Dense(8)(x)))

    x = jax.ShapeDtypeStruct((2, 4), jnp.float32)
    variables = jax.eval_shape(Mlp().init, jax.random.key(0), x)
    xla = jax.jit(Mlp().apply).lower(variables, x).cost_analysis()["flops"]
    # 2*2*4*8 + 16 (bias) + 16 (relu: max) + 2*2*8*3 + 6 = 262, the same rules in XLA
    assert applied("xla", count_linen(Mlp(), x)).theirs == 262 == xla


def test_resnet50_under_the_fvcore_profile_is_fvcores_founding_figure() -> None:
    torch = pytest.importorskip("torch")
    from examples.resnet import resnet50

    explanation = applied("fvcore", torch_report(resnet50().eval(), torch.zeros(1, 3, 224, 224)))
    # what fvcore's FlopCountAnalysis reports when run (tests/unit/explain/peers/test_peer_fvcore.py, slow), item by
    # item: 53 convolutions and fc in MACs, 53 batch norms at 2 per element (11,113,984 elements), 17 ReLUs ignored,
    # 16 residual adds (5,519,360) and the max pool (1,806,336) without a handle, fc's bias
    assert (explanation.ours, explanation.theirs) == (8_239_860_200, 4_111_512_576)
    assert explanation.by_reason() == {
        "MACs vs FLOPs": 4_087_136_256 + 2_048_000,
        "per-element cost": 2 * 11_113_984,
        "counted as zero": 9_608_704,
        "op not supported": 5_519_360 + 1_806_336,
        "bias add": 1_000,
    }
