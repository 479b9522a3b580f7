"""`flopbudget count TARGET --input 1,P:int64 --generate N`: phases in the JSON and under the table, in process."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from pytest_flopbudget._cli import main

MODELS = """\
import torch
import transformers


def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(config)
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "generate_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    (tmp_path / f"{name}.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lists_the_prefill_and_every_decode_step(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--generate", "10", "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert [phase["name"] for phase in data["phases"]] == ["prefill", *(f"decode {k}" for k in range(1, 10))]
    assert sum(phase["metrics"]["macs"] for phase in data["phases"]) == data["totals"]["macs"]
    # one more cached token per step: 2 x 2 layers x 2 heads x 16 head_dim MACs
    macs = [phase["metrics"]["macs"] for phase in data["phases"][1:]]
    assert {b - a for a, b in zip(macs, macs[1:])} == {128}
    assert data["model"] == "LlamaForCausalLM.generate"


def test_the_table_shows_prefill_first_last_and_mean(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--generate", "6")
    assert code == 0, err
    assert "phases (6 tokens generated)" in out
    for row in ("prefill", "decode 1 (first)", "decode 5 (last)", "decode mean per token"):
        assert f"\n{row} " in out


def test_without_generate_nothing_changes(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--format", "json")
    assert code == 0 and "phases" not in json.loads(out)


def test_zero_tokens_is_a_usage_error(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["count", f"{module}:llama", "--input", "1,8:int64", "--generate", "0"])
    assert info.value.code == 2 and "not a number of new tokens" in capsys.readouterr().err


def test_more_tokens_than_the_limit_are_refused_naming_it(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    """10**9 tokens ended in "the model raised ... MemoryError", blaming the model: the limit is named up front, by
    the command line and by `count(generate=)` alike."""
    with pytest.raises(SystemExit) as info:
        main(["count", f"{module}:llama", "--input", "1,8:int64", "--generate", str(10**9)])
    err = capsys.readouterr().err
    assert (
        info.value.code == 2
        and f"at most 131072 new tokens (2**17; every decode step is a phase of the Report), got {10**9}" in err
    )
    import torch

    from pytest_flopbudget import count
    from pytest_flopbudget._errors import CountingError

    with pytest.raises(CountingError, match="at most 131072 new tokens"):
        count(torch.nn.Linear(2, 2), torch.zeros(1, 2), generate=131073)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--decode-inputs", "a.b:c"], "give --generate N too"),
        (["--generate", "3", "--training"], "--generate counts a PyTorch model's inference"),
    ],
)
def test_wrong_flags_are_refused(
    module: str, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    code, _, err = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64", *flags)
    assert code == 2 and message in err


def test_the_prompt_length_may_be_a_named_dim(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    named = ("--input", "1,prompt:int64", "--dim", "prompt=8", "--generate", "3", "--format", "json")
    code, out, err = run(capsys, "count", f"{module}:llama", *named)
    assert code == 0, err
    code, plain, err = run(
        capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--generate", "3", "--format", "json"
    )
    assert json.loads(out)["phases"] == json.loads(plain)["phases"]
    code, _, err = run(capsys, "count", f"{module}:llama", "--input", "1,p:int64", "--dim", "p=4..8", "--generate", "3")
    assert code == 2 and "--generate counts one point" in err


def test_the_decode_step_is_a_formula_of_the_context_under_the_phases(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # per layer 4 x 32^2 + 3 x 32 x 48 + 2 x 2 heads x 16 x (context + 1), two layers, then the head 32 x 64
    code, out, err = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--generate", "10")
    assert code == 0, err
    tail = out[out.index("decode mean per token") :].splitlines()
    assert tail[2] == (
        "decode step formulas in context = the tokens in the cache when decode k runs (prompt 8 + k - 1), "
        "exact on context in [8, 16]:"
    )
    assert "  MACs per decode step        = 128*context + 19584" in tail


def test_the_json_has_the_decode_formula_beside_the_phases(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    sympy = pytest.importorskip("sympy")
    code, out, err = run(
        capsys, "count", f"{module}:llama", "--input", "1,8:int64", "--generate", "12", "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    decode = data["decode_formula"]
    assert decode["formula"]["macs"] == "128*context + 19584"
    assert decode["variable"] == "context" and decode["prompt"] == 8 and decode["range"] == [8, 18]
    context = sympy.Symbol("context")
    for k, phase in enumerate(data["phases"][1:], start=1):
        for metric, text in decode["formula"].items():
            off = decode.get("last_off", {}).get(metric, 0) if k == 11 else 0
            assert sympy.sympify(text).subs(context, 8 + k - 1) + off == phase["metrics"][metric]


def test_without_generate_there_is_no_decode_formula(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64")
    assert code == 0 and "decode step" not in out
    one_token = ("--generate", "1", "--format", "json")
    code, out, _ = run(capsys, "count", f"{module}:llama", "--input", "1,8:int64", *one_token)
    assert code == 0 and "decode_formula" not in json.loads(out)
