"""The matching (`_explain/match.py`) on counts built by hand: each rule names its reason, and the items always sum
exactly to ours - theirs."""

from __future__ import annotations

from explain_helpers import ToyPeer, peer_count, report
from hypothesis import given
from hypothesis import strategies as st

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.match import explain
from pytest_flopbudget._explain.peers.protocol import ModelFacts, PeerFigure

# Conv2d(3, 8, 3) with a bias on 1x3x6x6: 1x8x4x4 = 128 outputs of 3*3*3 = 27 taps each.
# MACs 128*27 = 3456; FLOPs 2*3456 + 128 (the bias, 1 per output) = 7040.
CONV = {"conv": {"aten.convolution": (7040, 3456)}}


def summary(explanation: reasons.Explanation) -> list[tuple[str | None, str | None, int, int, str]]:
    return [(i.layer, i.op, i.ours, i.theirs, i.reason) for i in explanation.items]


def test_a_peer_in_macs_without_the_bias_is_macs_vs_flops_and_a_bias_add() -> None:
    # fvcore's conv: 3456 "flops" (MACs, no bias). 7040 - 3456 = 3584 = 3456 (unit) + 128 (bias)
    explanation = explain(report(CONV), peer_count([("conv", "conv", 3456)]), ToyPeer())
    assert summary(explanation) == [
        ("conv", "aten.convolution", 6912, 3456, reasons.MACS_VS_FLOPS),
        ("conv", "aten.convolution", 128, 0, reasons.BIAS_ADD),
    ]
    assert explanation.difference == 3584 and explanation.residual == 0


def test_a_peer_in_flops_with_the_bias_agrees() -> None:
    explanation = explain(report(CONV), peer_count([("conv", "F.conv2d", 7040)], unit="flops"), ToyPeer(hooks=True))
    assert explanation.items == () and explanation.difference == 0


def test_a_peer_in_macs_with_the_bias_is_macs_vs_flops_only() -> None:
    # ptflops' conv: 3456 MACs + 128 bias = 3584; 7040 - 3584 = 3456, all of it the unit
    explanation = explain(report(CONV), peer_count([("conv", "Conv2d", 3584)]), ToyPeer())
    assert summary(explanation) == [("conv", "aten.convolution", 6912, 3456, reasons.MACS_VS_FLOPS)]


def test_an_op_the_peer_warned_about_is_not_supported() -> None:
    ours = report({"block": {"aten.add": (4096, 0)}, "pool": {"aten.max_pool2d_with_indices": (900, 0)}})
    unsupported = {"block": {"aten::add_": 1}, "pool": {"aten::max_pool2d": 1}}
    explanation = explain(ours, peer_count([], unsupported=unsupported), ToyPeer())
    assert summary(explanation) == [
        ("block", "aten.add", 4096, 0, reasons.NOT_SUPPORTED),
        ("pool", "aten.max_pool2d_with_indices", 900, 0, reasons.NOT_SUPPORTED),
    ]
    assert explanation.items[0].detail == "toy has no rule for aten::add_ (1 call)"


def test_an_op_the_peer_prices_at_zero_silently_is_counted_as_zero() -> None:
    explanation = explain(report({"relu": {"aten.relu": (1000, 0)}}), peer_count([]), ToyPeer())
    assert summary(explanation) == [("relu", "aten.relu", 1000, 0, reasons.COUNTED_AS_ZERO)]


def test_a_fused_attention_kernel_the_peer_saw_is_fused_attention() -> None:
    ours = report({"attn": {"aten._native_multi_head_attention": (642328, 315520)}})
    facts = ModelFacts(seen={"attn": {"aten._native_multi_head_attention": 1}})
    explanation = explain(ours, peer_count([], unit="flops"), ToyPeer(), facts)
    assert summary(explanation) == [("attn", "aten._native_multi_head_attention", 642328, 0, reasons.FUSED_ATTENTION)]


def test_an_add_in_a_blocks_own_forward_is_a_residual_add_missed_by_hooks() -> None:
    ours = report({"layer1.0": {"aten.add": (65536, 0)}, "layer1.0.norm": {"aten.add": (16, 0)}})
    facts = ModelFacts(containers=frozenset({"layer1.0"}))
    explanation = explain(ours, peer_count([], unit="flops"), ToyPeer(hooks=True), facts)
    # the leaf's add (`variance + eps` in an RMSNorm) is no residual: a patched-function peer has no patch for it
    assert summary(explanation) == [
        ("layer1.0", "aten.add", 65536, 0, reasons.RESIDUAL_ADD_MISSED),
        ("layer1.0.norm", "aten.add", 16, 0, reasons.NOT_SUPPORTED),
    ]


def test_an_op_outside_every_hooked_module_is_missed_by_hooks() -> None:
    ours = report({"attn": {"aten.mul": (3072, 0)}, "attn.q": {"aten.mm": (131072, 65536)}})
    counted = peer_count([PeerFigure("attn.q", "Linear", 65536, module=True)], hooked=frozenset({"attn.q"}))
    explanation = explain(ours, counted, ToyPeer(hooks=True))
    assert summary(explanation) == [
        ("attn", "aten.mul", 3072, 0, reasons.MISSED_BY_HOOKS),
        ("attn.q", "aten.mm", 131072, 65536, reasons.MACS_VS_FLOPS),
    ]


def test_a_module_hook_prices_all_of_the_modules_ops_and_a_patched_function_counts_one_again() -> None:
    # ptflops on nn.MultiheadAttention with gradients on: our ops in the layer are the projections (addmm) and the
    # attention; its hook prices the module as a whole. And nn.ReLU: the hook's figure, and F.relu's again.
    ours = report(
        {
            "attn": {
                "aten.addmm": (561408, 278528),
                "aten._scaled_dot_product_flash_attention_for_cpu": (80920, 36992),
            },
            "relu": {"aten.relu": (65536, 0)},
        }
    )
    counted = peer_count(
        [
            PeerFigure("attn", "MultiheadAttention", 322116, module=True),
            PeerFigure("relu", "ReLU", 65536, module=True),
            PeerFigure("relu", "F.relu", 65536),
        ]
    )
    explanation = explain(ours, counted, ToyPeer(hooks=True))
    both = "aten.addmm + aten._scaled_dot_product_flash_attention_for_cpu"
    # MACs 278528 + 36992 = 315520; ours 2*315520 = 631040 against 315520; the rest: ours 642328 - 631040 = 11288,
    # theirs 322116 - 315520 = 6596 (its own formula for the biases, scale and softmax)
    assert summary(explanation) == [
        ("attn", both, 631040, 315520, reasons.MACS_VS_FLOPS),
        ("attn", both, 11288, 6596, reasons.OTHER_FORMULA),
        ("relu", "aten.relu", 0, 65536, reasons.COUNTED_TWICE),
    ]
    assert explanation.residual == 0


def test_an_op_both_count_differently_is_a_per_element_cost() -> None:
    # batch norm in eval on 65536 elements: ours 4 per element, fvcore's 2
    ours = report({"bn": {"aten.native_batch_norm": (262144, 0)}})
    explanation = explain(ours, peer_count([("bn", "batch_norm", 131072)]), ToyPeer())
    assert summary(explanation) == [("bn", "aten.native_batch_norm", 262144, 131072, reasons.PER_ELEMENT)]
    assert explanation.items[0].detail == "ours is 2x theirs"


def test_fewer_multiply_accumulates_than_ours_is_a_different_formula() -> None:
    ours = report({"attn": {"aten._scaled_dot_product_flash_attention_for_cpu": (80920, 36992)}})
    explanation = explain(ours, peer_count([("attn", "attention", 40000)], unit="flops"), ToyPeer())
    assert summary(explanation) == [
        ("attn", "aten._scaled_dot_product_flash_attention_for_cpu", 80920, 40000, reasons.OTHER_FORMULA)
    ]


def test_a_flops_peer_without_attentions_softmax_counts_it_as_zero() -> None:
    # DeepSpeed's F.scaled_dot_product_attention: 2 per MAC of QK^T and AV (73984), no scale or softmax (6936)
    ours = report({"attn": {"aten._scaled_dot_product_flash_attention_for_cpu": (80920, 36992)}})
    counted = peer_count([("attn", "F.scaled_dot_product_attention", 73984)], unit="flops")
    explanation = explain(ours, counted, ToyPeer(hooks=True))
    assert summary(explanation) == [
        ("attn", "aten._scaled_dot_product_flash_attention_for_cpu", 6936, 0, reasons.COUNTED_AS_ZERO)
    ]


def test_what_no_rule_accounts_for_is_unexplained_never_dropped() -> None:
    # two ops of ours, one figure of a kind neither is: it cannot be paired
    ours = report({"mix": {"aten.relu": (10, 0), "aten.tanh": (40, 0)}})
    counted = peer_count([("mix", "mystery", 7), ("elsewhere", "mystery", 3)], total=12)
    explanation = explain(ours, counted, ToyPeer())
    assert [(i.layer, i.their_op, i.ours, i.theirs, i.reason) for i in explanation.items] == [
        ("mix", "mystery", 0, 7, reasons.UNEXPLAINED),
        ("mix", None, 10, 0, reasons.COUNTED_AS_ZERO),
        ("mix", None, 40, 0, reasons.COUNTED_AS_ZERO),
        ("elsewhere", "mystery", 0, 3, reasons.UNEXPLAINED),
        (None, None, 0, 2, reasons.UNEXPLAINED),  # the peer's total is 2 more than its layers
    ]
    assert explanation.residual == 0 and explanation.difference == 50 - 12


_OPS = st.sampled_from(["aten.convolution", "aten.addmm", "aten.relu", "aten.add", "aten.native_layer_norm"])
_THEIR_OPS = st.sampled_from([None, "conv", "Linear", "F.relu", "add", "layer_norm", "mystery"])
_LAYERS = st.sampled_from(["", "a", "a.b", "c"])


@given(
    ours=st.dictionaries(_LAYERS, st.dictionaries(_OPS, st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)))),
    theirs=st.lists(st.tuples(_LAYERS, _THEIR_OPS, st.integers(0, 10**6), st.booleans())),
    unit=st.sampled_from(["macs", "flops"]),
    hooks=st.booleans(),
    extra=st.integers(-100, 100),
)
def test_the_items_always_sum_exactly_to_the_difference(
    ours: dict[str, dict[str, tuple[int, int]]],
    theirs: list[tuple[str, str | None, int, bool]],
    unit: str,
    hooks: bool,
    extra: int,
) -> None:
    figures = [PeerFigure(layer, op, value, module=module) for layer, op, value, module in theirs]
    counted = peer_count(figures, unit=unit, total=sum(f.value for f in figures) + extra)  # type: ignore[arg-type]
    explanation = explain(report(ours), counted, ToyPeer(hooks=hooks))
    assert explanation.residual == 0
    assert sum(item.ours - item.theirs for item in explanation.items) == explanation.ours - explanation.theirs


def test_our_ops_of_one_kind_in_a_layer_pair_together() -> None:
    # a block that projects with F.linear (aten.mm) and multiplies with torch.matmul (aten.bmm) in its own forward;
    # fvcore names them linear and matmul: one matmul pair, 2 * (64 + 32) FLOPs against 64 + 32 MACs
    ours = report({"block": {"aten.mm": (128, 64), "aten.bmm": (64, 32)}})
    explanation = explain(ours, peer_count([("block", "linear", 64), ("block", "matmul", 32)]), ToyPeer())
    assert summary(explanation) == [("block", "aten.mm + aten.bmm", 192, 96, reasons.MACS_VS_FLOPS)]
