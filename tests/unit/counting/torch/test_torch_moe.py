"""Mixture-of-experts decoders from Hugging Face transformers 5, counted against MACs derived from the config alone.

Models: Mixtral, Qwen2-MoE (with shared experts), Qwen3-MoE and Jamba (attention, mamba and MoE layers), built from
tiny configs with random weights, each with the three experts implementations transformers 5 ships for CPU:
`grouped_mm` (the default: `torch.nn.functional.grouped_mm`), `batched_mm` (one bmm row per token and expert) and
`eager` (a Python loop over the experts that were hit). The implementation is chosen with the config's
`experts_implementation=` keyword (`model.set_experts_implementation(...)` switches it later).

The MoE rule: a routed expert layer costs exactly tokens x top_k rows through one expert MLP, whatever the routing
and whichever implementation runs. Real routing always selects top_k distinct experts per token, so the real count
is exact; in fake mode the counter cannot see the router's choices and must arrive at the same tokens x top_k rows.

The analytic counts (MACs only; elementwise FLOPs differ between the implementations by design) follow the
counter's conventions: embeddings are free; a Linear on T tokens is T*in*out; attention is dense, QK^T + AV =
2*B*heads*S*S*head_dim even under the causal mask (the dense rule, docs/conventions.md); the router is a Linear to E
logits; each expert is a gated MLP, gate_up [H -> 2I] and down [I -> H]: 3*H*I per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

# transformers is a dev dependency: a missing install must fail these tests, not skip them.
import transformers  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensor  # noqa: E402

from pytest_flopbudget import Report, count  # noqa: E402

VOCAB, HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, TOP_K = 64, 32, 64, 4, 2, 2
SHAPES = [(1, 1), (2, 5), (3, 7)]  # (batch, sequence): one token, and sequences below and above Jamba's d_conv=4


# --- the analytic counts ---------------------------------------------------------------------------------------


def head_dim(config: Any) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def attention_macs(config: Any, batch: int, seq: int) -> int:
    """q, k, v, o projections on every token, then dense attention per query head (grouped K/V heads are shared
    by several query heads, but each query head still does its own QK^T and AV)."""
    tokens, hidden, hd = batch * seq, config.hidden_size, head_dim(config)
    q, kv = config.num_attention_heads * hd, config.num_key_value_heads * hd
    projections = tokens * hidden * q + 2 * tokens * hidden * kv + tokens * q * hidden
    return projections + 2 * batch * config.num_attention_heads * seq * seq * hd


def gated_mlp_macs(rows: int, hidden: int, intermediate: int) -> int:
    """gate and up [H -> I] and down [I -> H]: 3*H*I per row (Mixtral-style fused gate_up is the same 2*H*I)."""
    return 3 * rows * hidden * intermediate


def routed_experts_macs(config: Any, tokens: int, experts: int, intermediate: int) -> int:
    """The router (a Linear to `experts` logits) on every token, then tokens x top_k rows through one expert each."""
    return tokens * config.hidden_size * experts + gated_mlp_macs(
        tokens * config.num_experts_per_tok, config.hidden_size, intermediate
    )


def mixtral_macs(config: Any, batch: int, seq: int) -> int:
    tokens = batch * seq
    layer = attention_macs(config, batch, seq) + routed_experts_macs(
        config, tokens, config.num_local_experts, config.intermediate_size
    )
    return config.num_hidden_layers * layer + tokens * config.hidden_size * config.vocab_size  # + lm_head


def is_qwen_sparse_layer(config: Any, index: int) -> bool:
    """Qwen2-MoE / Qwen3-MoE: a layer is MoE unless listed in mlp_only_layers or off the decoder_sparse_step."""
    return index not in config.mlp_only_layers and (index + 1) % config.decoder_sparse_step == 0


def qwen_moe_macs(config: Any, batch: int, seq: int) -> int:
    """Qwen2-MoE adds a shared expert (a dense gated MLP on every token) and its sigmoid gate (a Linear to 1)."""
    tokens, hidden = batch * seq, config.hidden_size
    total = tokens * hidden * config.vocab_size  # lm_head
    for index in range(config.num_hidden_layers):
        total += attention_macs(config, batch, seq)
        if is_qwen_sparse_layer(config, index):
            total += routed_experts_macs(config, tokens, config.num_experts, config.moe_intermediate_size)
            shared = getattr(config, "shared_expert_intermediate_size", 0)
            if shared:
                total += gated_mlp_macs(tokens, hidden, shared) + tokens * hidden
        else:
            total += gated_mlp_macs(tokens, hidden, config.intermediate_size)
    return total


def mamba_macs(config: Any, batch: int, seq: int) -> int:
    """Jamba's mamba mixer on the PyTorch path (no mamba-ssm kernels), I = expand * H inner channels:

    in_proj [H -> 2I]; the depthwise causal conv1d, I channels * d_conv taps per output position, computed over the
    padded length (the input is left-padded by d_conv - 1, and with the default cache a prompt shorter than d_conv
    is first padded up to d_conv); x_proj [I -> dt_rank + 2N]; dt_proj [dt_rank -> I]; the selective scan's output
    state @ C, one [I, N] @ [N, 1] product per token; out_proj [I -> H].
    """
    tokens, hidden = batch * seq, config.hidden_size
    inner, rank = config.mamba_expand * hidden, config.mamba_dt_rank
    state, taps = config.mamba_d_state, config.mamba_d_conv
    conv_input = max(seq, taps) if config.use_cache else seq
    conv = batch * inner * (conv_input + taps - 1) * taps
    projections = tokens * hidden * 2 * inner + tokens * inner * (rank + 2 * state) + tokens * rank * inner
    return projections + conv + tokens * inner * state + tokens * inner * hidden


def jamba_macs(config: Any, batch: int, seq: int) -> int:
    tokens, hidden = batch * seq, config.hidden_size
    total = tokens * hidden * config.vocab_size  # lm_head
    for kind, experts in zip(config.layers_block_type, config.layers_num_experts):
        total += attention_macs(config, batch, seq) if kind == "attention" else mamba_macs(config, batch, seq)
        if experts > 1:
            total += routed_experts_macs(config, tokens, experts, config.intermediate_size)
        else:
            total += gated_mlp_macs(tokens, hidden, config.intermediate_size)
    return total


# --- the models ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoeModel:
    config_class: Callable[..., Any]
    model_class: Callable[..., Any]
    macs: Callable[[Any, int, int], int]
    expert_intermediate: str  # the config field sizing one routed expert
    extra: dict[str, Any] = field(default_factory=dict)

    def config(self, implementation: str | None = None, **overrides: Any) -> Any:
        kwargs: dict[str, Any] = {
            "vocab_size": VOCAB,
            "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE,
            "num_hidden_layers": 2,
            "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS,
            "num_experts_per_tok": TOP_K,
            **self.extra,
            **overrides,
        }
        if implementation is not None:
            kwargs["experts_implementation"] = implementation
        return self.config_class(**kwargs)

    def build(self, implementation: str | None = None, **overrides: Any) -> tuple[Any, Any]:
        config = self.config(implementation, **overrides)
        torch.manual_seed(0)
        model = self.model_class(config).eval()
        # guard against a silent fallback: the default must resolve to grouped_mm
        assert model.config._experts_implementation == (implementation or "grouped_mm")
        return model, config


MODELS = {
    "mixtral": MoeModel(
        transformers.MixtralConfig,
        transformers.MixtralForCausalLM,
        mixtral_macs,
        "intermediate_size",
        {"num_local_experts": 4},
    ),
    # layer 1 is a dense MLP (mlp_only_layers), layer 0 routed experts + shared expert
    "qwen2_moe": MoeModel(
        transformers.Qwen2MoeConfig,
        transformers.Qwen2MoeForCausalLM,
        qwen_moe_macs,
        "moe_intermediate_size",
        {"num_experts": 4, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 40, "mlp_only_layers": [1]},
    ),
    # 8 experts; decoder_sparse_step=2 over 3 layers: only layer 1 is MoE; head_dim 16 (q is 64 wide, H is 32)
    "qwen3_moe": MoeModel(
        transformers.Qwen3MoeConfig,
        transformers.Qwen3MoeForCausalLM,
        qwen_moe_macs,
        "moe_intermediate_size",
        {
            "num_experts": 8,
            "moe_intermediate_size": 48,
            "head_dim": 16,
            "num_hidden_layers": 3,
            "decoder_sparse_step": 2,
        },
    ),
    # 3 layers: mamba+MoE, attention+MLP, mamba+MoE
    "jamba": MoeModel(
        transformers.JambaConfig,
        transformers.JambaForCausalLM,
        jamba_macs,
        "intermediate_size",
        {
            "num_experts": 4,
            "num_hidden_layers": 3,
            "attn_layer_period": 2,
            "attn_layer_offset": 1,
            "expert_layer_period": 2,
            "expert_layer_offset": 0,
            "mamba_d_state": 8,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
        },
    ),
}

IMPLEMENTATIONS = [None, "batched_mm", "eager"]
IMPLEMENTATION_IDS = ["default-grouped_mm", "batched_mm", "eager"]


def fake_params() -> list[Any]:
    # every implementation counts in fake mode: grouped_mm in float32 through the bf16 meta fallback, the eager
    # expert loop through invented round-robin routing (KnownValues in counting/torch/data_dependent.py)
    return [
        pytest.param(name, impl, id=f"{name}-{impl_id}")
        for name in MODELS
        for impl, impl_id in zip(IMPLEMENTATIONS, IMPLEMENTATION_IDS)
    ]


def real_params() -> list[Any]:
    return [
        pytest.param(name, impl, id=f"{name}-{impl_id}")
        for name in MODELS
        for impl, impl_id in zip(IMPLEMENTATIONS, IMPLEMENTATION_IDS)
    ]


def experts_layers(model: Any) -> list[str]:
    """Module paths of the routed-experts modules (MixtralExperts, Qwen2MoeExperts, ...)."""
    return [path for path, module in model.named_modules() if type(module).__name__.endswith("Experts")]


def check(report: Report, spec: MoeModel, model: Any, config: Any, batch: int, seq: int) -> None:
    assert report.macs == spec.macs(config, batch, seq)
    # each routed-experts module: tokens x top_k rows through one expert MLP, 3*H*I each
    rows = batch * seq * config.num_experts_per_tok
    per_layer = gated_mlp_macs(rows, config.hidden_size, getattr(config, spec.expert_intermediate))
    layers = experts_layers(model)
    assert layers
    assert {path: report.layers[path].macs for path in layers} == dict.fromkeys(layers, per_layer)


# --- the analytic functions, by hand ---------------------------------------------------------------------------


def test_mixtral_analytic_count_by_hand() -> None:
    config = MODELS["mixtral"].config()
    # batch 2 x seq 5 = 10 tokens, H = 32, 4 heads of 8, 2 KV heads (16 wide), 4 experts of I = 64, top_k 2:
    #   q 10*32*32 = 10240, k and v 10*32*16 = 5120 each, o 10240                 -> 30720
    #   attention QK^T + AV, dense: 2 * (2*4 heads) * 5*5 * 8                      -> 3200
    #   router 10*32*4                                                             -> 1280
    #   experts: 10*2 = 20 rows * 3*32*64                                          -> 122880
    #   per layer 158080, 2 layers 316160; lm_head 10*32*64 = 20480                -> 336640
    assert mixtral_macs(config, 2, 5) == 336640


def test_jamba_analytic_count_by_hand() -> None:
    config = MODELS["jamba"].config()
    # mamba mixer on 10 tokens (batch 2 x seq 5), I = 2*32 = 64, dt_rank = ceil(32/16) = 2, N = 8, d_conv 4:
    #   in_proj 10*32*128 = 40960; conv 2*64 channels * (5 + 3) positions * 4 taps = 4096;
    #   x_proj 10*64*(2 + 16) = 11520; dt_proj 10*2*64 = 1280; scan 10*64*8 = 5120; out_proj 10*64*32 = 20480
    #   -> 83456 per mamba layer, 2 of them
    assert mamba_macs(config, 2, 5) == 83456
    # one token: the cached prompt is padded to d_conv = 4 before the conv: 1*64 * (4 + 3) * 4 = 1792
    assert mamba_macs(config, 1, 1) == 32 * 128 + 1792 + 64 * 18 + 2 * 64 + 64 * 8 + 64 * 32
    # + attention layer 30720 + 3200 (as Mixtral) + 2 MoE blocks 2*(1280 + 122880) + dense MLP 3*10*32*64 = 61440
    # + lm_head 20480
    assert jamba_macs(config, 2, 5) == 2 * 83456 + 33920 + 2 * 124160 + 61440 + 20480


# --- real execution: real routing, exact -----------------------------------------------------------------------


@pytest.mark.parametrize(("batch", "seq"), SHAPES)
@pytest.mark.parametrize(("name", "implementation"), real_params())
def test_real_count_matches_the_analytic_count(name: str, implementation: str | None, batch: int, seq: int) -> None:
    spec = MODELS[name]
    model, config = spec.build(implementation)
    report = count(model, torch.randint(0, VOCAB, (batch, seq)), execution="real")
    check(report, spec, model, config, batch, seq)


# --- fake mode (the default) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("batch", "seq"), SHAPES)
@pytest.mark.parametrize(("name", "implementation"), fake_params())
def test_fake_count_matches_the_analytic_count(name: str, implementation: str | None, batch: int, seq: int) -> None:
    spec = MODELS[name]
    model, config = spec.build(implementation)
    report = count(model, torch.randint(0, VOCAB, (batch, seq)))
    check(report, spec, model, config, batch, seq)
    # the figures rest on invented routing, and the report says so: one router top-k per MoE layer
    moe_layers = sum(1 for module in model.modules() if type(module).__name__.endswith("Experts"))
    assert report.estimated["aten.topk"] == moe_layers
    assert report.estimated_ops["aten.topk"].rule.startswith("routing indices invented")


@pytest.mark.parametrize("execution", ["real", "fake"])
def test_grouped_mm_in_bfloat16(execution: str) -> None:
    # the grouped_mm meta kernel takes bf16, so the default implementation already counts in fake mode here:
    # the 2*5*2 = 20 routed rows are the [S, K] operand of aten._grouped_mm, counted from its shape
    spec = MODELS["mixtral"]
    model, config = spec.build()
    model = model.to(torch.bfloat16)
    report = count(model, torch.randint(0, VOCAB, (2, 5)), execution=execution)
    check(report, spec, model, config, 2, 5)
    # two grouped_mm per MoE layer: gate_up 20*32*128 = 81920 and down 20*64*32 = 40960; 2 layers
    assert (report.ops["aten._grouped_mm"].calls, report.ops["aten._grouped_mm"].macs) == (4, 2 * (81920 + 40960))


# --- the model is left as it was -------------------------------------------------------------------------------


@pytest.mark.parametrize("execution", ["real", "fake"])
@pytest.mark.parametrize(("name", "implementation"), real_params())
def test_model_runs_for_real_after_count(name: str, implementation: str | None, execution: str) -> None:
    model, _ = MODELS[name].build(implementation)
    ids = torch.randint(0, VOCAB, (2, 5))
    with torch.no_grad():
        before = model(ids).logits
    count(model, ids, execution=execution)
    with torch.no_grad():
        after = model(ids).logits
    assert type(after) is torch.Tensor and not isinstance(after, FakeTensor)
    assert all(type(p) is torch.nn.Parameter and not isinstance(p.data, FakeTensor) for p in model.parameters())
    assert torch.equal(before, after)


# --- routers that call module.to(dtype) in forward and look experts up by an f-string --------------------------


def _switch() -> tuple[torch.nn.Module, dict[str, Any]]:
    from transformers import SwitchTransformersConfig, SwitchTransformersEncoderModel

    config = SwitchTransformersConfig(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        num_experts=4,
        encoder_sparse_step=1,
        expert_capacity=64,
    )
    return SwitchTransformersEncoderModel(config).eval(), {}


def _nllb() -> tuple[torch.nn.Module, dict[str, Any]]:
    from transformers import NllbMoeConfig, NllbMoeModel

    config = NllbMoeConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_experts=4,
        encoder_sparse_step=1,
        decoder_sparse_step=1,
        expert_capacity=64,
    )
    return NllbMoeModel(config).eval(), {"decoder_input_ids": True}


@pytest.mark.parametrize("build", [_switch, _nllb], ids=["switch_transformers", "nllb_moe"])
def test_self_casting_routers_count_in_fake_mode_as_in_real(build: Any) -> None:
    # their routers run `self.classifier.to(dtype)` in forward and pick experts by `self[f"expert_{idx}"]`;
    # with expert capacity above the token count nothing is dropped, so the routed count is exact
    model, extra = build()
    ids = torch.randint(0, VOCAB, (2, 5))
    kwargs = {"decoder_input_ids": ids} if extra else {}
    fake = count(model, ids, **kwargs)
    real = count(model, ids, execution="real", **kwargs)
    assert fake.macs == real.macs
    # FLOPs differ only where one_hot runs another kernel: on fake tensors it is eq(arange, index), 1 per
    # element of the [tokens, experts] mask; on real ones aminmax over the indices (a range check), 1 per index
    one_hot = {op: fake.ops[op].flops for op in ("aten.eq",) if op in fake.ops}
    checks = {op: real.ops[op].flops for op in ("aten.aminmax",) if op in real.ops}
    assert fake.flops - sum(one_hot.values()) == real.flops - sum(checks.values())
    assert fake.skipped == real.skipped == {}
    assert "aten.argmax" in fake.estimated and real.estimated == {}
