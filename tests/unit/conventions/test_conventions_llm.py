"""The LLM stacks' conventions (`_conventions/llm.py`): each profile's figure hand-derived on a tiny model, every
explanation's items summing exactly to ours - theirs, and the founding Llama identities on meta-device configs."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._conventions.profile import ConventionError  # noqa: E402
from pytest_flopbudget._conventions.registry import profile_named, profile_names  # noqa: E402
from pytest_flopbudget._errors import FlopBudgetError  # noqa: E402
from pytest_flopbudget._explain.items import (  # noqa: E402
    BACKWARD_RULE,
    CAUSAL_HALVING,
    EMBEDDINGS_OUT,
    LM_HEAD_LAST,
    OUTSIDE_CONVENTION,
    PER_PARAMETER,
)

LLM = ("megatron", "megatron-causal", "palm", "torchtitan", "maxtext", "vllm")


class Tiny(nn.Module):
    """Vocabulary 10, width 4, one head of 4: embedding, RMSNorm, q/k/v without bias, causal SDPA, a residual add
    and an untied lm_head. On ids of shape (1, 3): 3 tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.RMSNorm(4)
        self.q, self.k, self.v = nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False)
        self.lm_head = nn.Linear(4, 10, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.embed(ids))
        q, k, v = (proj(x).unsqueeze(1) for proj in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1)
        return self.lm_head(x + attended)


# Hand-derived (3 tokens, d = 4, V = 10, L = H = 1, Q = 4, T = 3):
#   q, k, v: 3 * 4*4 = 48 MACs each = 144; lm_head: 3 * 4*10 = 120; attention: QK^T 3*3*4 = 36 + AV 36 = 72
#   parameters: embedding 10*4 = 40, norm 4, q/k/v 3*16 = 48, lm_head 40: 132
INFERENCE = {
    "megatron": 2 * (144 + 120 + 72),  # 672: every matmul at 2 FLOPs per MAC
    "megatron-causal": 2 * (144 + 120) + 72,  # 600: attention halved
    "palm": 2 * 132 * 3 + 4 * 1 * 1 * 4 * 3 * 3,  # 792 + 144 = 936: (2N + 4·L·H·Q·T) per token, N = 132
    "torchtitan": 2 * (132 - 40) * 3 + 4 * 1 * 1 * 4 * 3 * 3,  # 552 + 144 = 696: N without the embedding
    "maxtext": 2 * 132 * 3 + 72,  # 792 + 72 = 864: 2 per parameter per token + the causal attention
}
TRAINING = {
    "megatron": 6 * (144 + 120 + 72),  # 2016: 3x the forward matmuls
    "megatron-causal": 6 * (144 + 120) + 3 * 72,  # 1584 + 216 = 1800
    "palm": 6 * 132 * 3 + 12 * 1 * 1 * 4 * 3 * 3,  # 2376 + 432 = 2808: (6N + 12·L·H·Q·T) per token
    "torchtitan": 6 * (132 - 40) * 3 + 12 * 1 * 1 * 4 * 3 * 3,  # 1656 + 432 = 2088
    "maxtext": 6 * (144 + 120) + 3 * 72,  # 1800: as megatron-causal
}


@pytest.fixture(scope="module")
def tiny_reports():
    model, ids = Tiny(), torch.zeros(1, 3, dtype=torch.int64)
    return count(model.eval(), ids), count(model, ids, training=True)


@pytest.mark.parametrize("name", list(INFERENCE))
def test_each_profile_on_the_tiny_model_inference(tiny_reports, name: str) -> None:
    report = tiny_reports[0]
    explained = report.under(name)
    assert (explained.peer, explained.unit, explained.version) == (name, "flops", "inference")
    assert (explained.ours, explained.theirs) == (report.flops, INFERENCE[name])
    assert explained.residual == 0


@pytest.mark.parametrize("name", list(TRAINING))
def test_each_profile_on_the_tiny_model_training(tiny_reports, name: str) -> None:
    report = tiny_reports[1]
    explained = report.under(name)
    assert (explained.ours, explained.theirs, explained.version) == (report.flops, TRAINING[name], "training")
    assert explained.residual == 0


def test_vllm_prices_the_lm_head_on_the_last_token(tiny_reports) -> None:
    report = tiny_reports[0]
    explained = report.under("vllm")
    # lm_head: 2 * 120 = 240 FLOPs on 3 tokens; vLLM's prefill computes the last token's logits only: 80
    assert explained.theirs == report.flops - 240 + 80
    [item] = explained.items
    assert (item.op, item.ours, item.theirs, item.reason) == ("lm_head", 240, 80, LM_HEAD_LAST)


def test_vllm_refuses_a_training_count(tiny_reports) -> None:
    with pytest.raises(ConventionError, match="vllm: an inference convention"):
        tiny_reports[1].under("vllm")


def test_the_items_name_their_reasons(tiny_reports) -> None:
    inference, training = tiny_reports
    reasons = inference.under("megatron-causal").by_reason()
    # the dense attention's 144 FLOPs against the causal 72
    assert reasons[CAUSAL_HALVING] == 144 - 72
    assert set(reasons) == {CAUSAL_HALVING, OUTSIDE_CONVENTION}  # norm, softmax, residual add: no embedding FLOPs
    trained = training.under("megatron")
    # the CPU flash kernel's backward recomputes QK^T: 5 matmuls of 36 MACs, not 4 -> 2 * 36 = 72 FLOPs more
    assert trained.by_reason()[BACKWARD_RULE] == 72
    assert EMBEDDINGS_OUT in trained.by_reason()  # the embedding's backward scatter-add (3 tokens x 4 = 12)
    # torchtitan prices the norm's 4 weights at 6 per token: 6 * 4 * 3 = 72 FLOPs, against its real ops
    norms = next(i for i in training.under("torchtitan").items if i.op == "norms")
    assert (norms.reason, norms.theirs) == (PER_PARAMETER, 72)


def test_torchtitan_minus_megatron_is_six_times_the_norm_parameters_per_token(tiny_reports) -> None:
    training = tiny_reports[1]
    # 6 * 4 norm weights * 3 tokens = 72 (the two price every matmul alike: see the Llama test below)
    assert training.under("torchtitan").theirs - training.under("megatron").theirs == 6 * 4 * 3


def test_per_token_profiles_need_token_ids() -> None:
    report = count(nn.Linear(4, 4), torch.zeros(2, 4))
    assert report.under("megatron").theirs == 2 * 2 * 4 * 4  # needs no tokens: 32 MACs at 2
    with pytest.raises(ConventionError, match=r"palm: the convention is per token.*--input 1,seq:int64"):
        report.under("palm")


def test_an_unknown_convention_is_one_line_listing_the_names(tiny_reports) -> None:
    with pytest.raises(FlopBudgetError) as raised:
        tiny_reports[0].under("megatorn")
    message = str(raised.value)
    assert "\n" not in message and "megatorn" in message
    assert all(name in message for name in LLM)
    assert set(LLM) <= set(profile_names())
    assert profile_named(" Megatron ").name == "megatron"


def test_every_profile_cites_its_source() -> None:
    for name in LLM:
        profile = profile_named(name)
        assert profile.title and profile.source and "\n" not in profile.title


# -- Llama configs on the meta device: the identities of issue 33 ----------------------------------------------

transformers = pytest.importorskip("transformers")

LLAMAS = {
    # name: (config, sequence length)
    "llama-2-7b": (dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096), 4096),
    "llama-3-8b": (dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192), 8192),
    "llama-3-70b": (dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                         num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=8192), 8192),
}  # fmt: skip


@functools.lru_cache(maxsize=1)
def _llama_training(name: str):
    config, seq = LLAMAS[name]
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config))
    return count(model, torch.zeros(1, seq, dtype=torch.int64), training=True)


def _by_hand(config: dict) -> dict[str, int]:
    """N, L, H, Q and the norm parameters written from the config alone."""
    d, f, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv, vocab = config["num_attention_heads"], config["num_key_value_heads"], config["vocab_size"]
    q = d // heads
    per_layer = d * d + 2 * d * kv * q + d * d + 3 * d * f + 2 * d  # q, k, v, o; gate, up, down; two RMSNorms
    norms = (2 * layers + 1) * d  # two per block and the final one
    total = vocab * d + layers * per_layer + d + vocab * d  # embedding, blocks, final norm, untied lm_head
    return {"N": total, "L": layers, "H": heads, "Q": q, "norms": norms}


@pytest.mark.parametrize("name", [n if n == "llama-3-8b" else pytest.param(n, marks=pytest.mark.slow) for n in LLAMAS])
def test_llama_conventions_against_their_formulas(name: str) -> None:
    config, seq = LLAMAS[name]
    report = _llama_training(name)
    hand = _by_hand(config)
    assert report.params == hand["N"]
    megatron, titan, palm = (report.under(n) for n in ("megatron", "torchtitan", "palm"))
    # Megatron-classic: 3 x the forward matmul FLOPs = 6 x the forward matmul MACs (every MAC of a Llama forward is
    # a matmul's: projections, MLP, QK^T and AV dense, lm_head; the embedding lookup has none)
    assert megatron.theirs == 6 * report.forward.macs
    # torchtitan - Megatron-classic = 6 x the norm parameters per token, exactly: both price a linear layer at
    # 6 x its weights per token (its forward MACs are tokens x weights: no bias, every token through every
    # layer), both price attention at 12·L·H·Q·T per token = 6 x its forward MACs (2·L·H·Q·T² per sequence of T);
    # the lm_head is in both; the embedding is out of both (torchtitan subtracts it, Megatron has no matmul for
    # it); what remains of torchtitan's 6·(params - embedding) is the RMSNorm weights, which Megatron leaves out
    tokens = seq
    assert titan.theirs - megatron.theirs == 6 * hand["norms"] * tokens
    # PaLM / nanoGPT: (6N + 12·L·H·Q·T) per token, N every parameter (Llama has no position table)
    assert palm.theirs == (6 * hand["N"] + 12 * hand["L"] * hand["H"] * hand["Q"] * seq) * tokens
    for explained in (megatron, titan, palm, report.under("megatron-causal"), report.under("maxtext")):
        assert explained.residual == 0 and explained.ours == report.flops


def test_llama_3_8b_published_figures() -> None:
    seq = LLAMAS["llama-3-8b"][1]
    report = _llama_training("llama-3-8b")
    per_token = {name: report.under(name).theirs // seq for name in ("palm", "torchtitan", "megatron-causal")}
    # issue 33's figures per token at 8,192 tokens: PaLM/nanoGPT 6.107e10, torchtitan 5.791e10, Megatron today
    # (and MaxText) 5.147e10; torchtitan's published Llama-3-8B throughput and MFU imply 6.108e10, the palm figure
    assert per_token == {"palm": 61_066_469_376, "torchtitan": 57_914_449_920, "megatron-causal": 51_470_401_536}
    assert abs(per_token["palm"] / 6.108e10 - 1) < 5e-4
    assert report.under("maxtext").theirs == report.under("megatron-causal").theirs


def test_a_hand_written_attention_prices_as_the_fused_one() -> None:
    """Hugging Face's eager attention (matmuls in a layer without weights) and its SDPA kernel: the same figures
    under every convention, inference and training (the eager one's forward read as a third of its training
    MACs, said in a note)."""
    figures = {}
    for implementation in ("eager", "sdpa"):
        config = transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=2, attn_implementation=implementation,
        )  # fmt: skip
        with torch.device("meta"):
            model = transformers.LlamaForCausalLM(config)
        ids = torch.zeros(1, 8, dtype=torch.int64)
        reports = (count(model, ids), count(model, ids, training=True))
        figures[implementation] = [report.under(name).theirs for report in reports for name in LLM[:5]]
        if implementation == "eager":
            assert any("not one fused kernel" in note for note in reports[1].under("megatron").notes)
    assert figures["eager"] == figures["sdpa"]
