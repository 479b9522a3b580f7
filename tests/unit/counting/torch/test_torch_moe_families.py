"""Every mixture-of-experts family in the installed transformers counts with nothing skipped.

The families are not listed by hand: they are every config class in transformers' auto mapping with a field that
names experts or MoE (`num_experts`, `n_routed_experts`, `moe_intermediate_size`, ...), plus `NESTED` (DBRX keeps
them in a sub-config), so a family added by a transformers upgrade is tested without anyone adding it here; a scan
of the modeling files checks that no model with an `*Experts` class escapes the enumeration. Each is built from a
tiny config (hidden 64, 2 layers, 4 heads, 4 experts, top-2; `TINY` where the config has the field, `OVERRIDES`
where a family needs more), with random weights, and counted on 8 token ids in fake mode (the default). Required
of each: the model routed tokens to experts (an experts module ran and did arithmetic), and
`report.skipped == {}`: the routers' top-k, sort, histc, bincount and argmax all have formulas (docs/conventions.md,
"comparisons"), so `max-skipped-ops = 0` holds for MoE models.

Families that are not routed mixtures of experts are listed in `NOT_ROUTED` with the reason; families that cannot be
counted for a reason other than skipped ops are strict xfails in `FAILS` with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

# transformers is a dev dependency: a missing install must fail these tests, not skip them.
import transformers  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # noqa: E402
from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)

from pytest_flopbudget import count  # noqa: E402

#: Class names of the modules that hold a layer's experts.
EXPERTS = re.compile(r"(Experts|MoE|Moe|MoeBlock|MoEBlock|SparseMLP)$")

#: Applied to every family whose config has the field.
TINY: dict[str, Any] = {
    "vocab_size": 128,
    "pad_token_id": 0,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 16,
    "max_position_embeddings": 256,
    # experts: 4, top-2, small
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_local_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "top_k_experts": 2,
    "moe_k": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 0,
    "expert_capacity": 64,  # above the 8 tokens: no token dropped (Switch, NLLB-MoE)
    # multi-head latent attention and its sparse indexer (DeepSeek-V2/V3/V3.2, GLM-MoE-DSA, ...)
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "index_n_heads": 4,
    "index_head_dim": 16,
    "index_topk": 4,
}

#: What one family needs beyond TINY, each for the reason given.
OVERRIDES: dict[str, dict[str, Any]] = {
    # hybrid models: one linear-attention (or conv / mamba) layer and one attention layer, small mixers
    "granitemoehybrid": {
        "layer_types": ["linear_attention", "attention"],
        "mamba_n_heads": 4,
        "mamba_d_head": 32,
        "mamba_d_state": 16,
        "mamba_chunk_size": 8,
    },
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 0},
    "glm5_next_text": {
        "linear_head_dim": 16,
        "linear_num_heads": 4,
        "index_kpool": 4,
        "qk_rope_head_dim": 0,
        "mlp_layer_types": ["sparse", "sparse"],
    },
    # the default layer lists describe the full-size model's dense first layers
    "deepseek_ocr2_text": {"mlp_layer_types": ["sparse", "sparse"]},
    "step3p5": {"mlp_layer_types": ["sparse", "sparse"], "sliding_window": 4, "share_expert_dim": 32},
    # rotary sections sized to a 16-wide head (8 frequencies)
    "ernie4_5_vl_moe_text": {
        "moe_intermediate_size": [32, 16],
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default", "mrope_section": [3, 3, 2]},
    },
    "glm4v_moe_text": {
        "rope_parameters": {
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
            "rope_type": "default",
            "mrope_section": [2, 1, 1],
        },
    },
    "hy_v4_vl_text": {"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default", "mrope_section": [2, 1, 1]}},
    "beam": {"mlp_layer_types": ["dense", "sparse"]},
    "flint": {"mlp_only_layers": []},
    "zaya": {"num_experts_per_tok": 1},  # ZAYA supports top-1 only
    # sliding-window layers have their own (Inkling) or doubled (MiMo) key/value heads
    "mimo_v2_flash": {"num_key_value_heads": 2},
    "inkling2_text": {
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 4,
        "swa_head_dim": 16,
        "unpadded_vocab_size": 120,
        "eos_token_id": 1,
    },
    "inkling2_loop_text": {
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 4,
        "swa_head_dim": 16,
        "unpadded_vocab_size": 120,
        "eos_token_id": 1,
    },
    "gemma4_text": {
        "enable_moe_block": True,
        "vocab_size_per_layer_input": 128,
        "hidden_size_per_layer_input": 16,
        "global_head_dim": 16,
    },
    "doge": {"is_moe": True},
    # encoder-decoders with T5 / fairseq field names
    "switch_transformers": {
        "d_model": 64,
        "d_kv": 16,
        "d_ff": 64,
        "num_layers": 2,
        "num_decoder_layers": 2,
        "num_heads": 4,
        "encoder_sparse_step": 1,
        "decoder_sparse_step": 1,
    },
    "nllb-moe": {
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "encoder_sparse_step": 1,
        "decoder_sparse_step": 1,
    },
    # a vision encoder with MoE blocks; the full-size model has extra experts in layers 25-39
    "dots3_note_vision_encoder": {
        "per_layer_config": {},
        "mlp_layer_types": ["sparse", "sparse"],
        "adapter_in_dim": 64,
        "adapter_out_dim": 64,
    },
    "dbrx": {
        "d_model": 64,
        "n_heads": 4,
        "n_layers": 2,
        "max_seq_len": 256,
        "attn_config": {"kv_n_heads": 4, "clip_qkv": 8.0},
        "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2},
    },
    "longcat_flash": {
        "num_layers": 1,
        "ffn_hidden_size": 64,
        "expert_ffn_hidden_size": 32,
        "zero_expert_num": 2,
        "head_dim": 8,
    },
}

#: Attributes set on the config after it is made: fields a model reads that its config class does not declare.
ATTRIBUTES: dict[str, dict[str, Any]] = {
    # transformers 5.24: the talker's sparse block reads shared_expert_intermediate_size, which only the full talker
    # config passes down
    "qwen3_omni_moe_talker_text": {"shared_expert_intermediate_size": 32},
    # transformers 5.24: DBRX's attention reads attn_config.rope_theta, which DbrxAttentionConfig does not declare
    "dbrx": {"attn_config.rope_theta": 10000.0},
}

#: Config classes with expert fields whose models do not route tokens to experts.
NOT_ROUTED: dict[str, str] = {
    "vitpose_backbone": "ViTPose+ picks one expert head per dataset index, given as an input: no router",
}

#: Families that cannot be counted for a reason other than skipped ops (strict: a fix makes them pass loudly).
FAILS: dict[str, str] = {}


def _fields(config_class: type) -> set[str]:
    names: set[str] = set()
    for klass in config_class.__mro__:
        if dataclasses.is_dataclass(klass):
            names.update(f.name for f in dataclasses.fields(klass))
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(inspect.signature(init).parameters)
    return names


#: Families whose expert fields sit in a nested sub-config, which the field scan does not see.
NESTED = {"dbrx": "DbrxConfig"}  # ffn_config.moe_num_experts, ffn_config.moe_top_k


def moe_families() -> dict[str, type]:
    """model_type -> config class, for every config class of transformers with an expert or MoE field."""
    families: dict[str, type] = {model_type: getattr(transformers, name) for model_type, name in NESTED.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type, class_name in sorted(CONFIG_MAPPING_NAMES.items()):
            config_class = getattr(transformers, class_name, None)
            if config_class is None:
                continue
            if any("expert" in name or "moe" in name for name in _fields(config_class)):
                families[model_type] = config_class
    return families


FAMILIES = moe_families()


def test_the_enumeration_finds_the_families_the_issue_names() -> None:
    # Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V2/V3, Switch, NLLB-MoE, GPT-OSS, Jamba, Granite-MoE, PhiMoE, DBRX
    named = {
        "mixtral",
        "qwen2_moe",
        "qwen3_moe",
        "olmoe",
        "deepseek_v2",
        "deepseek_v3",
        "switch_transformers",
        "nllb-moe",
        "gpt_oss",
        "jamba",
        "granitemoe",
        "phimoe",
        "dbrx",
    }
    assert named <= set(FAMILIES)
    assert len(FAMILIES) >= 60
    assert set(OVERRIDES) | set(ATTRIBUTES) | set(NOT_ROUTED) | set(FAILS) <= set(FAMILIES), "an entry names no family"


def test_every_model_with_an_experts_module_is_enumerated() -> None:
    # a new family whose expert fields the scan misses (nested in a sub-config, as DBRX's) must be added to NESTED
    models = Path(transformers.__file__).parent / "models"
    enumerated = {config_class.__module__.split(".")[2] for config_class in FAMILIES.values()}
    with_experts = {
        source.parent.name
        for source in models.glob("*/modeling_*.py")
        if re.search(r"^class \w+(Experts|SparseMoeBlock)\(", source.read_text(encoding="utf-8"), re.M)
    }
    assert with_experts, "the scan found no experts module at all"
    assert with_experts - enumerated - {"vitpose_backbone"} == set()


def model_class(model_type: str, config_class: type) -> type:
    """The causal LM (or base model) of the family; for sub-configs without an auto mapping, the modeling module's
    class built from exactly this config class."""
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or MODEL_MAPPING_NAMES.get(model_type)
    if isinstance(name, (list, tuple)):
        name = name[0]
    if name is not None and hasattr(transformers, name):
        return getattr(transformers, name)  # type: ignore[no-any-return]
    module = importlib.import_module(config_class.__module__.replace(".configuration_", ".modeling_"))
    candidates = [
        getattr(module, attr)
        for attr in dir(module)
        if attr.endswith(("ForCausalLM", "Model"))
        and getattr(getattr(module, attr), "config_class", None) is config_class
        and "PreTrained" not in attr
    ]
    assert candidates, f"no model class for {model_type}"
    candidates.sort(key=lambda cls: (not cls.__name__.endswith("ForCausalLM"), len(cls.__name__)))
    return candidates[0]  # type: ignore[no-any-return]


def build(model_type: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The tiny model and what to call it with: 8 token ids (and 8 decoder ids), or the family's own inputs."""
    config_class = FAMILIES[model_type]
    fields = _fields(config_class)
    options = {key: value for key, value in TINY.items() if key in fields}
    options.update(OVERRIDES.get(model_type, {}))
    config = config_class(**options)
    for dotted, value in ATTRIBUTES.get(model_type, {}).items():
        *parents, name = dotted.split(".")
        owner = config
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, name, value)
    torch.manual_seed(0)
    model = model_class(model_type, config_class)(config).eval()
    size = sum(p.numel() for p in model.parameters())
    assert size < 5_000_000, f"{model_type}: the tiny config left {size} parameters; shrink it in OVERRIDES"
    if model_type == "dots3_note_vision_encoder":  # 16 patches of 3 x 14 x 14 pixels on a 1 x 4 x 4 grid
        patch = config.num_channels * config.patch_size**2
        return model, (torch.randn(16, patch), torch.tensor([[1, 4, 4]])), {}
    args: tuple[Any, ...] = (torch.randint(0, 100, (1, 8)),)
    kwargs: dict[str, Any] = {}
    if model_type == "qwen3_omni_moe_talker_text":  # the talker has no token embedding: it reads the thinker's
        args, kwargs["inputs_embeds"] = (), torch.randn(1, 8, config.hidden_size)
    if config.is_encoder_decoder:
        kwargs["decoder_input_ids"] = torch.randint(0, 100, (1, 8))
    elif "use_cache" in inspect.signature(model.forward).parameters:
        kwargs["use_cache"] = False  # a prompt without a cache: nothing a hybrid's linear-attention cache can refuse
    return model, args, kwargs


def family_params() -> list[Any]:
    params = []
    for model_type in FAMILIES:
        if model_type in NOT_ROUTED:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=FAILS[model_type])] if model_type in FAILS else []
        params.append(pytest.param(model_type, id=model_type, marks=marks))
    return params


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("model_type", family_params())
def test_moe_family_counts_with_nothing_skipped(model_type: str) -> None:
    model, args, kwargs = build(model_type)
    report = count(model, *args, **kwargs)
    assert_routed_with_nothing_skipped(model_type, model, report)


def assert_routed_with_nothing_skipped(model_type: str, model: Any, report: Any) -> None:
    assert report.skipped == {}, f"{model_type}: skipped {report.skipped}"
    # the tiny model really is a mixture of experts, and its experts ran: some *Experts module did arithmetic
    experts = [path for path, module in model.named_modules() if EXPERTS.search(type(module).__name__)]
    assert experts, f"{model_type}: no experts module (*Experts, *MoE, *SparseMoeBlock, ...) in the tiny model"
    ran = sum(cost.flops for path, cost in report.layers.items() if any(path.startswith(e) for e in experts))
    assert ran > 0, f"{model_type}: the experts did no arithmetic"


@pytest.mark.filterwarnings("ignore")
def test_vision_moe_counts_in_fake_mode_as_in_real_execution() -> None:
    """The patch grid (`grid_thw`, an integer input) decides the vision encoder's shapes: a known value in fake
    mode (known_inputs.py), so the fake count is the real one."""
    model, args, kwargs = build("dots3_note_vision_encoder")
    real = count(model, *args, execution="real", **kwargs)
    assert_routed_with_nothing_skipped("dots3_note_vision_encoder", model, real)
    fake = count(model, *args, **kwargs)
    assert (fake.macs, fake.flops) == (real.macs, real.flops)
