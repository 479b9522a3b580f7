"""Generation counts (counting/torch/generation.py) against torch's FlopCounterMode around a real greedy generate."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cached_decoder import HEAD_DIM, HEADS, LAYERS, decode_inputs, decoder, tiny_llama  # noqa: E402

from pytest_flopbudget._counting.torch import generation as generation_module  # noqa: E402
from pytest_flopbudget._counting.torch.backend import count_torch  # noqa: E402
from pytest_flopbudget._counting.torch.generation import Generation  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402
from pytest_flopbudget._report import PREFILL, Report  # noqa: E402

PROMPT = 6


def tiny_qwen2() -> torch.nn.Module:
    """GQA (8 query heads over 2 key/value heads) and tied input and output embeddings."""
    config = transformers.Qwen2Config(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=8,
        num_key_value_heads=2, tie_word_embeddings=True, attn_implementation="eager",
    )  # fmt: skip
    return transformers.Qwen2ForCausalLM(config).eval()


def tiny_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=96, n_positions=64, n_embd=48, n_layer=2, n_head=3, attn_implementation="eager"
    )
    return transformers.GPT2LMHeadModel(config).eval()


#: model factory -> (layers, query heads, head_dim): one more cached token costs 2 x layers x heads x head_dim MACs
#: (QK^T gains a column, AV a row, per query head and layer).
MODELS = {
    "llama": (tiny_llama, (2, 4, 16)),
    "qwen2": (tiny_qwen2, (3, 8, 8)),
    "gpt2": (tiny_gpt2, (2, 3, 16)),
}


def generated(model: torch.nn.Module, tokens: int) -> Report:
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    with torch.no_grad():
        return count_torch(model, (ids,), {}, generation=Generation(tokens))


def flop_counter_macs(model: torch.nn.Module, tokens: int) -> int:
    """MACs of a real greedy generate as FlopCounterMode sees them (2 FLOPs per MAC of its matmuls)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    ids = torch.randint(0, 96, (1, PROMPT))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert out.shape[-1] == PROMPT + tokens  # no early stop
    assert counter.get_total_flops() % 2 == 0
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("tokens", [1, 5, 13])
def test_the_phases_add_up_to_flop_counter_mode_around_a_real_generate(name: str, tokens: int) -> None:
    factory, _ = MODELS[name]
    torch.manual_seed(0)
    model = factory()
    report = generated(model, tokens)
    assert [phase.name for phase in report.phases] == [PREFILL, *(f"decode {k}" for k in range(1, tokens))]
    assert sum(phase.macs for phase in report.phases) == report.macs
    assert sum(phase.flops for phase in report.phases) == report.flops
    assert report.macs == flop_counter_macs(model, tokens)
    assert report.model.endswith(".generate")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_decode_step_grows_by_the_attention_over_one_more_cached_token(name: str) -> None:
    factory, (layers, heads, head_dim) = MODELS[name]
    report = generated(factory(), 16)
    steps = [phase.macs for phase in report.phases[1:]]
    assert {after - before for before, after in zip(steps, steps[1:])} == {2 * layers * heads * head_dim}


def test_derived_steps_equal_counting_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps 1-3 and the last two are counted, the others read off the line: the same report as counting all."""
    model = tiny_qwen2()
    derived = Generation(20)
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    with torch.no_grad():
        fast = count_torch(model, (ids,), {}, generation=derived)
    assert derived.counted_steps == [1, 2, 3, 18, 19]
    monkeypatch.setattr(generation_module, "COUNT_ALL", 100)
    every = Generation(20)
    with torch.no_grad():
        slow = count_torch(model, (ids,), {}, generation=every)
    assert every.counted_steps == list(range(1, 20))
    assert fast.layers == slow.layers
    assert fast.skipped_ops == slow.skipped_ops and fast.estimated == slow.estimated
    assert [(p.name, p.values) for p in fast.phases] == [(p.name, p.values) for p in slow.phases]
    # peaks are those of the real run where measured (the prefill and the first steps); the last steps ran on a
    # grown cache without the loop's earlier tensors, so they have none, nor have the steps read off the line
    assert all(fast.phases[k].peak_memory == slow.phases[k].peak_memory is not None for k in (0, 1, 2, 3))
    assert all(phase.peak_memory is None for phase in fast.phases[4:])


def test_a_step_off_the_line_makes_every_step_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_flopbudget._counting import phases

    def refuted(*args: object, **kwargs: object) -> object:
        raise phases.NotLinear("test")

    monkeypatch.setattr(generation_module, "decode_line", refuted)
    counting = Generation(10)
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    with torch.no_grad():
        report = count_torch(tiny_llama(), (ids,), {}, generation=counting)
    assert counting.counted_steps == list(range(1, 10))
    assert report.macs == flop_counter_macs(tiny_llama(), 10)


def test_the_callers_model_and_inputs_are_unchanged() -> None:
    torch.manual_seed(0)
    model = tiny_llama()
    before = copy.deepcopy(model.state_dict())
    config = model.generation_config.to_dict()
    ids = torch.arange(PROMPT).unsqueeze(0)
    with torch.no_grad():
        count_torch(model, (ids,), {}, generation=Generation(12))
    assert torch.equal(ids, torch.arange(PROMPT).unsqueeze(0))
    assert model.generation_config.to_dict() == config
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not model.training


def test_the_decode_step_protocol_counts_a_model_without_generate(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    fast = count_torch(decoder(), (ids,), {}, generation=Generation(30, "decode_step", decode_inputs))
    monkeypatch.setattr(generation_module, "COUNT_ALL", 100)
    slow = count_torch(decoder(), (ids,), {}, generation=Generation(30, "decode_step", decode_inputs))
    assert fast.layers == slow.layers
    assert [p.values for p in fast.phases] == [p.values for p in slow.phases]
    steps = [phase.macs for phase in fast.phases[1:]]
    assert {after - before for before, after in zip(steps, steps[1:])} == {2 * LAYERS * HEADS * HEAD_DIM}
    assert fast.phases[0].macs == count_torch(decoder(), (ids,), {}).macs


def test_a_model_without_generate_or_a_decode_step_is_refused() -> None:
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    with pytest.raises(CountingError, match="decode-inputs"):
        count_torch(decoder(), (ids,), {}, generation=Generation(3))


def test_a_cache_that_cannot_grow_makes_every_step_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot(cache: object, extra: int) -> None:
        raise ValueError("a cache of its own kind")

    monkeypatch.setattr(generation_module, "_grow", cannot)
    counting = Generation(10)
    with torch.no_grad():
        report = count_torch(tiny_gpt2(), (torch.zeros(1, PROMPT, dtype=torch.int64),), {}, generation=counting)
    assert counting.counted_steps == list(range(1, 10))
    assert report.macs == flop_counter_macs(tiny_gpt2(), 10)
