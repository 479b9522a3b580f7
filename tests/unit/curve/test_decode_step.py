"""curve/decode_step.py: a generation's decode step as a formula of its context length, from hand-built phases
whose figures are chosen, so every formula and reason below is derived by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from pytest_flopbudget._curve.decode_step import CONTEXT, DecodeFormula, decode_formula, prompt_length
from pytest_flopbudget._curve.polynomial import Polynomial, to_sympy
from pytest_flopbudget._curve.text import decode_formula_text
from pytest_flopbudget._metrics import BYTES, FLOPS, INT_OPS, MACS
from pytest_flopbudget._report import PREFILL, Phase, Report, decode_step_name

PROMPT = 10


def generation(macs: Sequence[int], flops: Sequence[int] | None = None, int_ops: int = 0) -> Report:
    """A generation Report of a prompt of `PROMPT` tokens whose decode steps have these figures (bytes 3 x MACs)."""
    flops = flops or [2 * value for value in macs]
    phases = [Phase(PREFILL, {FLOPS: 1000, MACS: 500, BYTES: 7000})]
    phases += [
        Phase(decode_step_name(k), {FLOPS: f, MACS: m, BYTES: 3 * m, INT_OPS: int_ops})
        for k, (m, f) in enumerate(zip(macs, flops), start=1)
    ]
    return Report(phases=phases, inputs=[{"shape": [1, PROMPT], "dtype": "int64"}], optional_metrics=frozenset({BYTES}))


def line(steps: int, start: int = 700, slope: int = 8) -> list[int]:
    return [start + slope * k for k in range(steps)]


def test_each_metric_is_the_line_in_context_prompt_plus_k_minus_1() -> None:
    # decode k has 700 + 8 (k - 1) MACs and runs with context = 10 + k - 1: MACs = 8 context + 700 - 80
    found = decode_formula(generation(line(6)))
    assert found is not None
    assert found.formulas == {
        FLOPS: Polynomial((CONTEXT,), {(1,): 16, (0,): 1240}),
        MACS: Polynomial((CONTEXT,), {(1,): 8, (0,): 620}),
        BYTES: Polynomial((CONTEXT,), {(1,): 24, (0,): 1860}),
    }
    assert str(found.formulas[MACS]) == "8*context + 620"
    assert found.contexts == (10, 15) and not found.missing and not found.last_off
    assert found.describe() == "exact on context in [10, 15]"


def test_integer_ops_appear_only_where_a_decode_step_has_some() -> None:
    without = decode_formula(generation(line(4)))
    with_int_ops = decode_formula(generation(line(4), int_ops=64))
    assert without is not None and INT_OPS not in without.formulas
    assert with_int_ops is not None and str(with_int_ops.formulas[INT_OPS]) == "64"


def test_steps_off_one_line_give_no_formula_and_the_first_miss() -> None:
    macs = line(8)
    macs[4] += 3  # decode 5
    found = decode_formula(generation(macs, flops=[2 * value for value in line(8)]))
    assert found is not None
    assert MACS not in found.formulas and FLOPS in found.formulas
    assert found.missing[MACS] == (
        "the decode steps are not on one line: decode 5 has 735 MACs, the line through decode 1 and 2 gives 732"
    )


def test_the_last_step_may_stand_apart_and_is_said_so() -> None:
    macs = line(6)
    macs[-1] -= 32  # generate prepares no step after the last one
    found = decode_formula(generation(macs))
    assert found is not None
    assert str(found.formulas[MACS]) == "8*context + 620" and found.last_off == {MACS: -32, FLOPS: -64, BYTES: -96}
    assert "MACs per decode step        = 8*context + 620; the last step (decode 6) 32 less" in decode_formula_text(
        found
    )


def test_three_steps_are_needed_and_a_last_step_apart_cannot_check_the_line() -> None:
    two = decode_formula(generation(line(2)))
    assert two is not None and not two.formulas
    assert two.missing[MACS] == "2 decode steps: two fix a line and a third must check it"
    assert decode_formula_text(two) == f"decode step formulas: none, {two.missing[MACS]}"
    three = line(3)
    three[-1] += 1
    found = decode_formula(generation(three))
    assert found is not None and MACS not in found.formulas
    assert found.missing[MACS].startswith("only the last step (decode 3) could check the line")


def test_a_count_without_decode_steps_has_none() -> None:
    assert decode_formula(generation([])) is None
    assert decode_formula(Report()) is None


def test_an_unknown_prompt_length_gives_no_formula() -> None:
    report = generation(line(4))
    report.inputs = ["tuple"]
    found = decode_formula(report)
    assert found is not None and found.prompt is None and not found.formulas
    assert prompt_length([{"shape": [2, 7], "dtype": "int64"}, {"shape": [2, 9]}]) == 7
    assert prompt_length([{"shape": []}]) is None
    assert prompt_length([{"shape": [1, 7, 64], "dtype": "float32"}]) is None  # embeddings: not the prompt's ids
    assert prompt_length([{"shape": [1, 7]}]) is None  # no dtype recorded: not known to be ids


def test_the_text_names_the_variable_and_lines_up_each_metric() -> None:
    found = decode_formula(generation(line(5)))
    assert found is not None
    assert decode_formula_text(found).splitlines() == [
        "decode step formulas in context = the tokens in the cache when decode k runs (prompt 10 + k - 1), "
        "exact on context in [10, 14]:",
        "  FLOPs per decode step       = 16*context + 1240",
        "  MACs per decode step        = 8*context + 620",
        "  bytes moved per decode step = 24*context + 1860",
    ]


def test_json_round_trip_and_sympy_reads_each_formula() -> None:
    macs = line(7)
    macs[-1] += 5
    flops = line(7)
    flops[3] += 1
    found = decode_formula(generation(macs, flops=flops))
    assert found is not None
    data = json.loads(json.dumps(found.to_dict()))
    assert data["formula"] == {"macs": "8*context + 620", "bytes": "24*context + 1860"}
    assert data["last_off"] == {"macs": 5, "bytes": 15} and set(data["no_formula"]) == {"flops"}
    assert data["variable"] == "context" and data["prompt"] == 10 and data["range"] == [10, 16]
    assert DecodeFormula.from_dict(data) == found
    assert DecodeFormula.from_dict({"decode_formula": data}) == found
    sympy = pytest.importorskip("sympy")
    context = sympy.Symbol("context", integer=True, positive=True)
    for metric, text in data["formula"].items():
        parsed = sympy.sympify(text, locals={"context": context})
        assert sympy.expand(parsed - to_sympy(found.formulas[metric])) == 0
        assert parsed.subs(context, 12) == found.formulas[metric].at({CONTEXT: 12})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"steps": 3}, "missing field 'formula'"),
        ({"steps": 0, "formula": {}}, "steps must be an integer of at least 1"),
        ({"steps": 3, "formula": {"macs": "8*seq"}}, "not a dim"),
        ({"steps": 3, "formula": {"watts": "1"}}, "unknown metric 'watts'"),
        ({"steps": 3, "formula": {}, "last_off": {"macs": "5"}}, "last_off.macs must be an integer"),
    ],
)
def test_a_wrong_json_object_is_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecodeFormula.from_dict(data)
