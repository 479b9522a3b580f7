"""curve/decode_step.py on real generation counts: the decode step's formula of the context length, derived by hand
for a small dense decoder and a tiny transformers Llama, equal to every counted step, and refused where the steps
are not on one line (the engine's fallback that counts every step)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pytest_flopbudget._counting.torch.backend import count_torch  # noqa: E402
from pytest_flopbudget._counting.torch.generation import Generation  # noqa: E402
from pytest_flopbudget._curve.decode_step import CONTEXT, DecodeFormula, decode_formula  # noqa: E402
from pytest_flopbudget._metrics import MACS  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402
from tests.unit.counting.torch.cached_decoder import (  # noqa: E402
    HEAD_DIM,
    HEADS,
    LAYERS,
    VOCAB,
    WIDTH,
    CachedDecoder,
    decode_inputs,
    decoder,
    tiny_llama,
)

PROMPT = 6


def formula_of(report: Report) -> DecodeFormula:
    found = decode_formula(report)
    assert found is not None
    return found


def assert_every_step_on_its_formula(report: Report, found: DecodeFormula) -> None:
    """Each decode step's figure, metric by metric, is its formula at context = prompt + k - 1 (the last step
    plus what `last_off` says)."""
    steps = report.phases[1:]
    assert found.formulas and not found.missing
    for k, phase in enumerate(steps, start=1):
        for metric, poly in found.formulas.items():
            off = found.last_off.get(metric, 0) if k == len(steps) else 0
            assert poly.at({CONTEXT: PROMPT + k - 1}) + off == phase.get(metric), (metric, k)


def test_a_dense_decoder_grows_by_the_attention_over_one_more_token_per_context() -> None:
    """A decode step with `context` cached tokens, per layer: the QKV projection (3 x WIDTH^2 MACs) and one query
    attending over context + 1 keys (QK^T and AV: 2 x heads x head_dim x (context + 1)); then the head
    (WIDTH x VOCAB): MACs = 2 x layers x heads x head_dim x context + layers x (3 WIDTH^2 + 2 heads head_dim)
    + WIDTH x VOCAB = 128 context + 7296."""
    slope = 2 * LAYERS * HEADS * HEAD_DIM
    intercept = LAYERS * (3 * WIDTH * WIDTH + 2 * HEADS * HEAD_DIM) + WIDTH * VOCAB
    assert (slope, intercept) == (128, 7296)
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    counting = Generation(30, "decode_step", decode_inputs)
    report = count_torch(decoder(), (ids,), {}, generation=counting)
    assert counting.counted_steps == [1, 2, 3, 28, 29]  # the others read off the engine's line
    found = formula_of(report)
    assert str(found.formulas[MACS]) == "128*context + 7296"
    assert found.formulas[MACS].at({CONTEXT: PROMPT}) == report.phases[1].macs  # decode 1: the prompt cached
    assert found.contexts == (PROMPT, PROMPT + 28)
    assert_every_step_on_its_formula(report, found)


def test_a_tiny_llama_from_its_config_by_hand() -> None:
    """One token through a decode step with `context` cached tokens, hidden 64, 4 heads of 16, MLP 96, vocab 96:
    per layer q, k, v, o (4 x 64^2), gate, up, down (3 x 64 x 96) and attention over context + 1 keys
    (2 x 4 x 16 x (context + 1)); once, the LM head on the last position (64 x 96); the rotary angles are an
    elementwise product, no MACs. MACs = 256 context + 2 x (16384 + 18432 + 128) + 6144 = 256 context + 76032."""
    torch.manual_seed(0)
    with torch.no_grad():
        report = count_torch(tiny_llama(), (torch.zeros(1, PROMPT, dtype=torch.int64),), {}, generation=Generation(20))
    found = formula_of(report)
    assert str(found.formulas[MACS]) == "256*context + 76032"
    assert found.formulas[MACS].at({CONTEXT: PROMPT}) == report.phases[1].macs
    assert_every_step_on_its_formula(report, found)


def test_with_every_step_counted_the_formula_equals_each_one() -> None:
    counting = Generation(8)
    with torch.no_grad():
        report = count_torch(tiny_llama(), (torch.zeros(1, PROMPT, dtype=torch.int64),), {}, generation=counting)
    assert counting.counted_steps == list(range(1, 8))
    found = formula_of(report)
    assert str(found.formulas[MACS]) == "256*context + 76032"
    assert_every_step_on_its_formula(report, found)


class GrowsAtAThreshold(CachedDecoder):
    """From a cache of `THRESHOLD` tokens on, each decode step runs one more WIDTH x WIDTH projection: its cost is
    not linear in the context."""

    THRESHOLD = PROMPT + 6  # decode 7 on

    def __init__(self) -> None:
        super().__init__()
        self.extra = torch.nn.Linear(WIDTH, WIDTH, bias=False)

    def decode_step(self, token: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        if keys.shape[-2] >= self.THRESHOLD:
            self.extra(self.embed(token))
        return super().decode_step(token, keys, values)


def test_steps_off_one_line_are_all_counted_and_give_no_formula() -> None:
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    counting = Generation(12, "decode_step", decode_inputs)
    report = count_torch(GrowsAtAThreshold().eval(), (ids,), {}, generation=counting)
    assert counting.counted_steps == list(range(1, 12))  # the check at decode 10 refuted the line: the fallback
    found = formula_of(report)
    assert MACS not in found.formulas
    # decode 7 (context 12): 128 x 12 + 7296 on the line, plus the extra projection's 32 x 32
    assert found.missing[MACS] == (
        "the decode steps are not on one line: decode 7 has 9,856 MACs, the line through decode 1 and 2 gives 8,832"
    )


def test_a_generation_too_short_for_a_checked_line_has_none() -> None:
    ids = torch.zeros(1, PROMPT, dtype=torch.int64)
    report = count_torch(decoder(), (ids,), {}, generation=Generation(3, "decode_step", decode_inputs))
    found = formula_of(report)
    assert not found.formulas and found.missing[MACS].startswith("2 decode steps")
