"""Op kinds (`_explain/kinds.py`): each counter's name for an op pairs with ours."""

from __future__ import annotations

import pytest

from pytest_flopbudget._explain.kinds import is_multiply_accumulate, kind, stem


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("aten.convolution", "conv"),  # fvcore
        ("aten.convolution", "Conv2d"),  # thop, ptflops module hooks
        ("aten.convolution", "F.conv2d"),  # calflops, DeepSpeed
        ("aten.addmm", "linear"),
        ("aten.mm", "F.linear"),
        ("aten.native_batch_norm", "batch_norm"),
        ("aten._native_batch_norm_legit_no_training", "BatchNorm2d"),
        ("aten.native_layer_norm", "F.layer_norm"),
        ("aten.max_pool2d_with_indices", "aten::max_pool2d"),
        ("aten.mean", "adaptive_avg_pool2d"),  # an adaptive pool to 1x1 runs as a mean
        ("aten.add", "aten::add_"),
        ("aten._scaled_dot_product_flash_attention_for_cpu", "F.scaled_dot_product_attention"),
        ("aten._native_multi_head_attention", "MultiheadAttention"),
    ],
)
def test_each_counters_name_pairs_with_ours(ours: str, theirs: str) -> None:
    assert kind(ours) == kind(theirs)


def test_stems_drop_namespaces_and_in_place_underscores() -> None:
    assert [stem(n) for n in ("aten::add_", "aten._softmax", "F.relu", "Conv2d", "__add__")] == [
        "add",
        "softmax",
        "relu",
        "conv2d",
        "__add__",
    ]


def test_multiply_accumulate_ops_are_convolutions_matmuls_and_attention() -> None:
    assert all(
        is_multiply_accumulate(op) for op in ("aten.convolution", "aten.bmm", "aten._native_multi_head_attention")
    )
    assert not any(is_multiply_accumulate(op) for op in ("aten.relu", "aten.native_layer_norm", "aten.add"))
