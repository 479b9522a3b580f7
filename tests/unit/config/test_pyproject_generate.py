"""`generate = N` and `decode-inputs = "pkg.mod:fn"` in `[tool.flopbudget.models.NAME]`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import parse_settings

HEAD = '[tool.flopbudget.models.m]\ntarget = "pkg.models:build"\ninputs = [[1, 16]]\nflops = "1G"\n'


def entry(body: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    return parse_settings(HEAD + body, tmp_path / "pyproject.toml").models["m"]


def errors(body: str, tmp_path: Path) -> str:
    with pytest.raises(LocatedError) as info:
        entry(body, tmp_path)
    return str(info.value)


def test_generate_and_decode_inputs_are_read(tmp_path: Path) -> None:
    model = entry('generate = 64\nmethod = "step"\ndecode-inputs = "pkg.models:step_inputs"\n', tmp_path)
    assert (model.generate, model.decode_inputs, model.method) == (64, "pkg.models:step_inputs", "step")
    assert entry("", tmp_path).generate == 0 and entry("", tmp_path).decode_inputs is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("generate = 0\n", "generate: expected a number of new tokens (1 or more), got 0"),
        ('generate = "8"\n', "generate: expected a number of new tokens"),
        ("generate = true\n", "generate: expected a number of new tokens"),
        # every decode step is a phase: a million tokens took 43 s and 0.8 GB, a billion ran out of memory
        ("generate = 1000000000\n", "generate: at most 131072 new tokens (2**17; every decode step is a phase"),
        ("generate = 4\ntraining = true\n", "generate applies to PyTorch inference targets"),
        ('decode-inputs = "pkg.models:f"\n', "give generate = N too"),
        ('generate = 4\ndecode-inputs = "not a reference"\n', 'expected "package.module:function"'),
    ],
)
def test_a_wrong_value_is_located(tmp_path: Path, body: str, message: str) -> None:
    assert message in errors(body, tmp_path)
