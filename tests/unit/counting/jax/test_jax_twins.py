"""The same architectures in PyTorch and in Flax NNX count the same, layer by layer: a Llama decoder (grouped-query
attention, rotary positions; `examples/decoder.py` and `examples/flax_decoder.py`), a ResNet bottleneck and a ViT
encoder layer (`examples/resnet.py`, `examples/vit.py` and `examples/flax_vision.py`).

MACs, FLOPs and parameters are identical in every layer. The named composites JAX writes with several primitives
(`jax.nn.silu`, the exact `jax.nn.gelu`, `jnp.mean`, `jax.nn.dot_product_attention` with its causal mask and
softmax, `nnx.LayerNorm`, `nnx.BatchNorm`, `nnx.Embed`, `jnp.arange`) are priced by the shared rules PyTorch's ops
are (docs/jax.md, "Named composites"); where the two programs run different math, the Flax twin runs PyTorch's
(`1.0 / t` is `t.reciprocal() * 1.0` in PyTorch). Nothing is rounded or tolerated.
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


def assert_identical(torch_report: Report, jax_report: Report, fold: Sequence[str] = ()) -> Figures:
    """Both counts have the same layers with the same FLOPs, MACs and parameters in each, and nothing skipped;
    returns the figures."""
    ours, theirs = figures(jax_report, fold), figures(torch_report, fold)
    assert ours == theirs
    assert (jax_report.flops, jax_report.macs, jax_report.params) == (
        torch_report.flops,
        torch_report.macs,
        torch_report.params,
    )
    assert jax_report.skipped_ops == torch_report.skipped_ops == {}
    return ours


def test_a_llama_decoder_with_gqa_and_rope_counts_the_same() -> None:
    config = LlamaConfig.tiny()  # d 64, 4 query heads sharing 2 kv heads (head_dim 16), MLP 160, vocab 128
    torch_report = pytest_flopbudget.count(Llama(config).eval(), *llama_inputs(config, seq=8))
    jax_report = count_nnx(flax_decoder.abstract_llama(config, scanned=False), flax_decoder.token_ids(1, 8))
    layers = assert_identical(torch_report, jax_report)

    # MACs per block on 8 tokens: q and o 8*64*64 = 32768 each, k and v 8*64*32 = 16384 each, QK^T and AV
    # 4 heads*8*8*16 = 4096 each, gate/up/down 8*64*160 = 81920 each: 352256; 2 blocks + lm_head 8*64*128 = 65536
    assert jax_report.macs == 2 * 352256 + 65536
    # params: embed 128*64, per block 2*64*64 + 2*64*32 + 3*64*160 + 2*64 (norms) = 43136, norm 64, lm_head 64*128
    assert jax_report.params == 8192 + 2 * 43136 + 64 + 8192

    # the layers whose FLOPs differed before the composites were priced by rule, now equal:
    # embedding free (a gather; jnp.take's wrap of negative ids is part of nnx.Embed)
    assert layers["embed_tokens"] == (0, 0, 8192)
    # RMSNorm on 8 rows of 64 (512 elements): square 512, jnp.mean 512 (1 per input element, its divide part of
    # it), + eps 8, rsqrt 8, * rsqrt 512, * weight 512: 2064
    assert layers["norm"][0] == layers["layers.0.input_layernorm"][0] == 4 * 512 + 2 * 8 == 2064
    # attention: projections 2 * (32768 + 16384 + 16384 + 32768) = 196608; rotary tables: inv_freq over 8 pairs
    # (arange free, / 16, theta **, reciprocal, * 1.0: 4 * 8), outer 8*8, cos and sin 2 * 8*16: 352; rotation of
    # q (8*64: mul cos, neg half, mul sin, add: 3.5 per element = 1792) and k (8*32: 896); then the attention rule
    # of scaled_dot_product_attention: QK^T and AV 2 * 2*4096 = 16384, scale and softmax 6 per score (4*8*8 = 256):
    # 1536 (is_causal adds nothing: the mask jax.nn.dot_product_attention builds is part of it)
    assert layers["layers.0.self_attn"][0] == 352 + 1792 + 896 + 16384 + 1536
    assert layers["layers.0.self_attn.q_proj"][0] == 2 * 32768
    # SwiGLU: silu 1 per element (8*160 = 1280) and the gate product 1280
    assert layers["layers.0.mlp"][0] == 2 * 1280
    assert jax_report.flops == 1566736


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

    layers = assert_identical(torch_report, jax_report)
    # BatchNorm in evaluation: the running statistics, normalise 2 and scale and bias 1 each per element (4);
    # nnx.BatchNorm's folding of its scale into a per-channel factor is part of the rule
    assert layers["bn1"][0] == 4 * 8 * 8 * 16 == 4096
    assert layers["bn3"][0] == layers["downsample.1"][0] == 4 * 4 * 4 * 64 == 4096


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

    layers = assert_identical(torch_report, jax_report, fold)
    # LayerNorm: statistics 4, normalise 2, scale and bias 1 each: 8 per element (17*64 = 1088): 8704
    assert layers["ln_1"][0] == layers["ln_2"][0] == 8 * 17 * 64 == 8704
    # the exact GELU: 1 per element (17*128 = 2176)
    assert layers["mlp.1"][0] == 17 * 128
    # the attention: projections with biases 4 * (2*17*64*64 + 17*64) = 561408, then the attention rule:
    # QK^T and AV 2 * 2*4*17*17*16 = 73984, scale and softmax 6 per score (4*17*17 = 1156): 6936
    assert layers["self_attention"][0] == 561408 + 73984 + 6936
