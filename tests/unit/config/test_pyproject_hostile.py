"""Hostile pyproject files: one located line each, never an internal error (issue 12, pyproject)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_flopbudget._config.pyproject import load_settings
from pytest_flopbudget._errors import FlopBudgetError

MODEL = '[tool.flopbudget.models.m]\ntarget = "pkg:m"\ninputs = [[1, 2]]\nflops = "1k"\n'


def problems(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FlopBudgetError) as info:
        load_settings(path, tmp_path)
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tool.flopbudget]\nx = " + "9" * 5000 + "\n", "cannot be read as TOML"),
        ("[tool.flopbudget]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "cannot be read as TOML"),
        ('[tool.flopbudget]\nbaseline-dir = "' + "d" * 5000 + '"\n' + MODEL, "at most 1024 characters"),
        ('[tool.flopbudget]\nbaseline-dir = "a\\u0000b"\n' + MODEL, "no NUL"),
    ],
    ids=["huge-integer", "deep-arrays", "long-baseline-dir", "nul-baseline-dir"],
)
def test_one_line_each(tmp_path: Path, text: str, expected: str) -> None:
    message = problems(tmp_path, text)
    assert expected in message
    assert "pyproject.toml" in message and len(message.splitlines()) == 1 and len(message) < 400


def test_a_model_name_with_a_newline_keeps_the_error_on_one_line(tmp_path: Path) -> None:
    text = '[tool.flopbudget.models."a\\n::stop-commands::x"]\ntarget = 5\n'
    message = problems(tmp_path, text)
    assert "a\\x0a::stop-commands::x" in message
    assert all(len(line.splitlines()) == 1 for line in message.splitlines())
    assert not any(line.lstrip().startswith("::") for line in message.splitlines())


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_settings_or_one_located_error(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    # a fuzz of the whole surface: whatever the file holds, the answer is Settings or FlopBudgetError, never
    # another exception
    root = tmp_path_factory.mktemp("fuzz")
    path = root / "pyproject.toml"
    path.write_text("[tool.flopbudget]\n" + text, encoding="utf-8", errors="surrogatepass")
    try:
        load_settings(path, root)
    except FlopBudgetError as exc:
        assert str(exc).strip()
