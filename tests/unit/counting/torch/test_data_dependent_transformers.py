"""Transformers models whose routing or masks are larger than small configs make them, in fake mode as in real.

Each failed in fake mode because known values were kept only for tensors of up to 65536 elements
(counting/torch/data_dependent.py): NLLB-MoE's and LongCat-Flash's one-hot expert masks ([tokens, experts,
experts] and [tokens, top_k, experts]) and ViLT's pixel mask of ones ([batch, 384, 384]) were larger, their values
were lost, and the model then read them (an expert looked up by f-string, `int(index)`, an interpolation size).

Small configs (hidden 32, one or two layers, vocabulary 64, 8 tokens) with the default router and image sizes that
make those tensors large. Fake and real counts are compared op by op, MACs and FLOPs, except the kernels named in
`ONE_HOT` and a padding check, which differ by design (asserted in each test).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import transformers  # noqa: E402

from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402

VOCAB, TOKENS = 64, 8

#: `one_hot` runs another kernel on fake tensors (`eq(index, arange)`, one comparison per mask element) than on real
#: ones (`aminmax` over the indices, a range check, then `scatter`, free)
ONE_HOT = {"aten.eq", "aten.aminmax", "aten.scatter"}


def by_op(report: Report, leave_out: set[str]) -> dict[str, tuple[int, int]]:
    """MACs and FLOPs per op; ops free of FLOPs, listed only for the bytes they move, are left out."""
    return {
        op: (cost.macs, cost.flops)
        for op, cost in report.ops.items()
        if op not in leave_out and not TORCH_OPS.is_free(op)
    }


def assert_same_count(fake: Report, real: Report, leave_out: set[str]) -> None:
    """MACs equal; MACs and FLOPs equal op by op, but for the ops in `leave_out` (asserted by each test)."""
    assert fake.macs == real.macs
    assert by_op(fake, leave_out) == by_op(real, leave_out)
    assert fake.skipped == real.skipped


def subtree_macs(report: Report, path: str) -> int:
    return sum(cost.macs for name, cost in report.layers.items() if name == path or name.startswith(f"{path}."))


def ids() -> Any:
    torch.manual_seed(0)
    return torch.randint(0, VOCAB, (1, TOKENS))


def test_nllb_moe_with_its_default_128_experts() -> None:
    # router mask [8 tokens, 128 experts], one-hot again in the experts: 8*128*128 = 131072 elements
    config = transformers.NllbMoeConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_sparse_step=1,
        decoder_sparse_step=1,
    )
    assert config.num_experts == 128
    torch.manual_seed(0)
    model = transformers.NllbMoeForConditionalGeneration(config).eval()
    tokens = ids()
    fake = count(model, tokens, decoder_input_ids=tokens)
    real = count(model, tokens, decoder_input_ids=tokens, execution="real")
    assert_same_count(fake, real, ONE_HOT)
    assert fake.skipped == {}
    # transformers 5 one-hot encodes the router's 0/1 [tokens, experts] mask again, over 128 classes, and runs
    # each class that occurs: class 1 (each token's top-1 entry, 8 rows) through expert_1 and class 0 (the other
    # 8*127 entries) through expert_0: 8*128 = 1024 rows through fc1 [32 -> 64] and fc2 [64 -> 32] per MoE layer,
    # 1024 * (32*64 + 64*32) = 4194304 MACs, whatever the routing; one MoE layer in the encoder, one in the decoder
    for stack in ("encoder", "decoder"):
        experts = f"model.{stack}.layers.0.ffn.experts"
        assert subtree_macs(fake, experts) == 4194304
        assert subtree_macs(fake, f"{experts}.expert_1") == 8 * 4096
    # one_hot: 3 per MoE layer on fake tensors, eq(index, arange) per mask element: top-1 and top-2 masks
    # [8, 128] = 1024 each, the experts' [8, 128, 128] = 131072; on real ones aminmax per index: 8, 8, 1024
    assert fake.ops["aten.eq"].flops == 2 * (1024 + 1024 + 131072)
    assert real.ops["aten.aminmax"].flops == 2 * (8 + 8 + 1024)


def test_nllb_moe_over_the_value_limit_names_the_value_it_needed() -> None:
    # 1100 tokens: the experts' one-hot mask [1100, 128, 128] = 18022400 elements, over VALUE_LIMIT = 2^24
    config = transformers.NllbMoeConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_sparse_step=1,
        decoder_sparse_step=1,
        max_position_embeddings=1104,
    )
    model = transformers.NllbMoeForConditionalGeneration(config).eval()
    tokens = torch.randint(0, VOCAB, (1, 1100))
    with pytest.raises(CountingError) as info:
        count(model, tokens, decoder_input_ids=tokens[:, :8])
    assert str(info.value) == (
        "fake mode cannot run this model: layer 'model.encoder.layers.0.ffn.experts' needs the values of a "
        "18022400-element bool tensor made by aten.eq in layer 'model.encoder.layers.0.ffn.experts' to run "
        "aten.nonzero, whose output size depends on them, and fake mode keeps values of at most 16777216 elements; "
        "count it with execution='real' (runs the real forward)"
    )


def test_longcat_flash_with_768_router_outputs() -> None:
    # 512 experts + 256 zero-compute (identity) experts, top-12: one-hot [8, 12, 768] = 73728 elements
    config = transformers.LongcatFlashConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=1,
        num_attention_heads=4,
        ffn_hidden_size=64,
        q_lora_rank=16,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=8,
        head_dim=8,
        v_head_dim=8,
        expert_ffn_hidden_size=16,
    )
    assert (config.n_routed_experts, config.zero_expert_num, config.moe_topk) == (512, 256, 12)
    torch.manual_seed(0)
    model = transformers.LongcatFlashForCausalLM(config).eval()
    # A pick of a zero-compute expert costs nothing, so the count depends on how many picks land there. Fake
    # mode's round-robin picks rows t*12 + j, experts 0..95, all real ones; the correction bias steers the real
    # router off the identity experts too (scores are softmax probabilities, at most 1), so both route every
    # pick through a real expert.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.router.e_score_correction_bias[512:] = -2.0
    tokens = ids()
    fake = count(model, tokens)
    real = count(model, tokens, execution="real")
    assert_same_count(fake, real, ONE_HOT)
    # one_hot of the [8, 12] picks over 768 classes: 73728 comparisons on fake tensors, 96 on real ones
    assert (fake.ops["aten.eq"].flops, real.ops["aten.aminmax"].flops) == (8 * 12 * 768, 8 * 12)
    # 8 tokens x 12 picks = 96 rows, each gate_up [32 -> 2*16] and down [16 -> 32]: 96 * (32*32 + 16*32) = 147456
    assert fake.layers["model.layers.0.mlp.experts"].macs == 147456
    assert fake.estimated == {"aten.topk": 1}  # the router's top-k: invented, and said so


@pytest.mark.parametrize("padded", [False, True], ids=["no-attention-mask", "padded-attention-mask"])
def test_vilt_with_its_default_384_pixel_images(padded: bool) -> None:
    # pixel mask of ones [1, 384, 384] = 147456 elements: its row and column sums size the position interpolation
    config = transformers.ViltConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    assert (config.image_size, config.patch_size) == (384, 32)
    torch.manual_seed(0)
    model = transformers.ViltModel(config).eval()
    tokens, pixels = ids(), torch.randn(1, 3, 384, 384)
    kwargs: dict[str, Any] = {"pixel_values": pixels}
    if padded:
        mask = torch.ones(1, TOKENS, dtype=torch.long)
        mask[0, -1] = 0
        kwargs["attention_mask"] = mask
    fake = count(model, tokens, **kwargs)
    real = count(model, tokens, execution="real", **kwargs)
    assert fake.skipped == real.skipped  # both sample patches (multinomial) and find the unique rows
    # transformers checks the mask for padding (`mask.all()`: 12*12 patches + 1 + 8 tokens = 153 positions) where it
    # may read its values, and skips building and adding it when none is padded; the fake count knows the mask
    # (made from the pixel mask and the tokens), so it reads it as the real run does (KnownValues.readable)
    assert_same_count(fake, real, set())
    assert fake.flops == real.flops
    assert fake.ops["aten.all"].flops == real.ops["aten.all"].flops == 153
