"""The same architectures in PyTorch and in Flax NNX, compared layer by layer: a Llama decoder (grouped-query
attention, rotary positions; `examples/decoder.py` and `examples/flax_decoder.py`), a ResNet bottleneck and a ViT
encoder layer (`examples/resnet.py`, `examples/vit.py` and `examples/flax_vision.py`).

MACs and parameters are identical in every layer. FLOPs are identical in every layer whose operations both
frameworks write alike (every matmul, convolution, bias, residual add and ReLU); where one framework writes an
operation with other primitives than the other prices it (a mean is JAX's sum and divide, `silu` is two
primitives, BatchNorm folds its scale into the per-channel factor, ...) the difference is pinned here, layer by layer,
with its per-op reason, and docs/jax.md lists the same table. Nothing is rounded or tolerated: a new difference, or
one that goes away, fails the test.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402

import pytest_flopbudget  # noqa: E402
from examples import flax_decoder, flax_vision  # noqa: E402
from examples.decoder import Llama, LlamaConfig, llama_inputs  # noqa: E402
from examples.resnet import Bottleneck, conv1x1  # noqa: E402
from examples.vit import EncoderBlock  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_nnx  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

Figures = dict[str, tuple[int, int, int]]


def figures(report: Report, fold: Sequence[str] = ()) -> Figures:
    """(FLOPs, MACs, params) by layer; the layers under each `fold` path added into it."""
    out: Figures = {}
    for path, layer in report.layers.items():
        path = next((root for root in fold if path.startswith(root + ".")), path)
        flops, macs, params = out.get(path, (0, 0, 0))
        out[path] = (flops + layer.flops, macs + layer.macs, params + layer.params)
    return out


def flops_deltas(torch_report: Report, jax_report: Report, fold: Sequence[str] = ()) -> dict[str, int]:
    """JAX's FLOPs minus PyTorch's, for each layer where they differ, after checking that both counts have the
    same layers and that MACs and parameters agree in every one."""
    ours, theirs = figures(jax_report, fold), figures(torch_report, fold)
    assert sorted(ours) == sorted(theirs)
    assert {path: value[1:] for path, value in ours.items()} == {path: value[1:] for path, value in theirs.items()}
    return {path: ours[path][0] - theirs[path][0] for path in ours if ours[path][0] != theirs[path][0]}


def test_a_llama_decoder_with_gqa_and_rope_counts_the_same() -> None:
    config = LlamaConfig.tiny()  # d 64, 4 query heads sharing 2 kv heads (head_dim 16), MLP 160, vocab 128
    torch_report = pytest_flopbudget.count(Llama(config).eval(), *llama_inputs(config, seq=8))
    jax_report = count_nnx(flax_decoder.abstract_llama(config, scanned=False), flax_decoder.token_ids(1, 8))

    # MACs per block on 8 tokens: q and o 8*64*64 = 32768 each, k and v 8*64*32 = 16384 each, QK^T and AV
    # 4 heads*8*8*16 = 4096 each, gate/up/down 8*64*160 = 81920 each: 352256; 2 blocks + lm_head 8*64*128 = 65536
    assert jax_report.macs == torch_report.macs == 2 * 352256 + 65536
    # params: embed 128*64, per block 2*64*64 + 2*64*32 + 3*64*160 + 2*64 (norms) = 43136, norm 64, lm_head 64*128
    assert jax_report.params == torch_report.params == 8192 + 2 * 43136 + 64 + 8192

    deltas = flops_deltas(torch_report, jax_report)
    rms_norm = 8  # jnp.mean is reduce_sum then div: the divide, 1 per row (8 rows); torch's mean is 1 per input
    attention = (
        64  # causal mask: jax.nn.dot_product_attention builds tril(8x8): iota + 0 (an integer add) ...
        + 64  # ... and the ge comparison,
        + 256  # then ands it with the [1, 4, 8, 8] mask; SDPA's is_causal builds no mask
        + 32  # the softmax's guard max(-inf, row max), 1 per row (1*4*8); the 5 per score are torch's softmax
        + 16  # jnp.arange(0, 16, 2) is iota * 2 + 0: 8 mul and 8 add; torch.arange is free
        - 8  # 1.0 / x: torch prices reciprocal and a multiply by 1.0 (16), JAX one div (8)
    )
    silu = 8 * 160  # jax.nn.silu is logistic then mul (2 per element); aten.silu is 1
    embedding = 16  # jnp.take wraps negative ids: lt and add per id (2*8); aten.embedding is free
    assert deltas == {
        "embed_tokens": embedding,
        "layers.0.input_layernorm": rms_norm,
        "layers.0.self_attn": attention,
        "layers.0.post_attention_layernorm": rms_norm,
        "layers.0.mlp": silu,
        "layers.1.input_layernorm": rms_norm,
        "layers.1.self_attn": attention,
        "layers.1.post_attention_layernorm": rms_norm,
        "layers.1.mlp": silu,
        "norm": rms_norm,
    }
    assert attention == 424
    assert jax_report.flops - torch_report.flops == sum(deltas.values()) == 16 + 5 * 8 + 2 * 424 + 2 * 1280
    assert jax_report.skipped_ops == torch_report.skipped_ops == {}


def test_the_scanned_llama_counts_what_the_loop_counts() -> None:
    config = LlamaConfig.tiny()
    looped = count_nnx(flax_decoder.abstract_llama(config, scanned=False), flax_decoder.token_ids(1, 8))
    scanned = count_nnx(flax_decoder.abstract_llama(config, scanned=True), flax_decoder.token_ids(1, 8))
    assert (scanned.flops, scanned.macs, scanned.params) == (looped.flops, looped.macs, looped.params)
    # the scanned blocks' work sits under the scanned module: layers.self_attn holds both blocks' attention
    assert scanned.layers["layers.self_attn.q_proj"].macs == 2 * looped.layers["layers.0.self_attn.q_proj"].macs


def test_a_resnet_bottleneck_counts_the_same() -> None:
    shortcut = torch.nn.Sequential(conv1x1(64, 64, 2), torch.nn.BatchNorm2d(64))
    torch_report = pytest_flopbudget.count(Bottleneck(64, 16, 2, shortcut).eval(), torch.randn(1, 64, 8, 8))
    jax_report = count_nnx(
        lambda: flax_vision.Bottleneck(64, 16, 2, nnx.Rngs(0)), jax.ShapeDtypeStruct((1, 8, 8, 64), jnp.float32)
    )
    # conv1 8*8*16 outputs * 64 = 65536 MACs; conv2 4*4*16 * 16*9 = 36864; conv3 4*4*64 * 16 = 16384;
    # downsample.0 4*4*64 * 64 = 65536
    assert jax_report.macs == torch_report.macs == 65536 + 36864 + 16384 + 65536
    assert jax_report.layers["relu"].flops == torch_report.layers["relu"].flops == 1024 + 256 + 1024

    def batch_norm(elements: int, channels: int) -> int:
        # torch's eval BatchNorm: 4 per element (subtract mean, scale by 1/std, weight, bias). nnx.BatchNorm folds
        # the scale into a per-channel factor: (x - mean) * (rsqrt(var + eps) * scale) + bias is 3 per element
        # and 3 per channel (add eps, rsqrt, multiply by the scale)
        return (3 * elements + 3 * channels) - 4 * elements

    assert flops_deltas(torch_report, jax_report) == {
        "bn1": batch_norm(8 * 8 * 16, 16),  # 3120 - 4096 = -976
        "bn2": batch_norm(4 * 4 * 16, 16),  # 816 - 1024 = -208
        "bn3": batch_norm(4 * 4 * 64, 64),  # 3264 - 4096 = -832
        "downsample.1": batch_norm(4 * 4 * 64, 64),
    }
    assert jax_report.layers["bn1"].flops == 3120


def test_a_vit_encoder_layer_counts_the_same() -> None:
    torch_report = pytest_flopbudget.count(EncoderBlock(64, 4, 128).eval(), torch.randn(1, 17, 64))
    jax_report = count_nnx(
        lambda: flax_vision.EncoderBlock(64, 4, 128, nnx.Rngs(0)), jax.ShapeDtypeStruct((1, 17, 64), jnp.float32)
    )
    # PyTorch's fused attention kernel charges the q/k/v and output projections to `self_attention` (its
    # `out_proj` holds parameters only); nnx.MultiHeadAttention calls them as submodules
    # (`self_attention.query`, ...): the attention is compared as one subtree
    fold = ["self_attention"]
    # projections 4 * 17*64*64 = 278528 MACs, QK^T and AV 2 * 4 heads*17*17*16 = 36992, MLP 2 * 17*64*128
    assert figures(jax_report, fold)["self_attention"][1] == 278528 + 36992
    assert jax_report.macs == torch_report.macs == 278528 + 36992 + 2 * 139264

    rows, elements = 17, 17 * 64
    # nnx.LayerNorm: E[x^2] - E[x]^2 in one pass; per element square, 2 sums, subtract, rsqrt*scale, multiply,
    # add bias (7); per row 2 divides, square, subtract, guard max(0, var), add eps, rsqrt (7).
    # torch's LayerNorm rule: 8 per element (statistics 4, normalise 2, affine 2)
    layer_norm = 7 * elements + 7 * rows - 8 * elements
    gelu = 4 * 17 * 128  # erf GELU is 0.5*x, neg, mul by 1/sqrt(2), erfc, mul (5 per element); aten.gelu is 1
    assert flops_deltas(torch_report, jax_report, fold) == {
        "ln_1": layer_norm,
        "ln_2": layer_norm,
        "mlp.1": gelu,
        "self_attention": 4 * 17,  # the softmax's guard max, 1 per row (4 heads * 17 queries)
    }
    assert layer_norm == -969
