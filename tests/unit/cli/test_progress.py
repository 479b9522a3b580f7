"""The progress line: drawn in place on a terminal, erased at the end, absent from pipes and pre-commit output."""

from __future__ import annotations

import io
import time

import pytest

from pytest_flopbudget._cli import progress as cli_progress
from pytest_flopbudget._cli.progress import CLEAR, Progress, is_interactive


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    monkeypatch.setenv("TERM", "xterm")


def test_draws_in_place_and_erases_itself():
    stream = FakeTerminal()
    with Progress(2, stream, interval=60) as progress:
        progress.start("resnet50")
        assert stream.getvalue().endswith("] 0/2 counting resnet50 (0 s)")
        progress.advance()
        progress.start("vit_tiny")
        progress.advance()
    text = stream.getvalue()
    assert text.startswith(CLEAR + "[>")
    assert CLEAR + "[==========>         ] 1/2" in text
    assert "counting vit_tiny" in text
    assert CLEAR + "[====================] 2/2" in text
    assert text.endswith(CLEAR), "the line is erased, so results print on a clean line"
    assert "\n" not in text, "the progress never scrolls the terminal"


def test_the_clock_keeps_ticking_while_a_model_counts():
    stream = FakeTerminal()
    with Progress(1, stream, interval=0.01) as progress:
        progress.start("big")
        draws = stream.getvalue().count(CLEAR)
        deadline = time.monotonic() + 60  # a hang guard: three draws 10 ms apart take a fraction of a second
        while stream.getvalue().count(CLEAR) < draws + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.getvalue().count(CLEAR) >= draws + 3
        progress.advance()
    assert progress._thread is None


def test_line_is_cut_to_the_terminal_width(monkeypatch):
    monkeypatch.setattr(cli_progress.shutil, "get_terminal_size", lambda fallback: type("S", (), {"columns": 30})())
    progress = Progress(3, FakeTerminal(), enabled=True)
    progress.label = "a_model_with_a_very_long_name_indeed"
    assert len(progress.render()) == 29


def test_silent_in_a_pipe():
    stream = io.StringIO()
    with Progress(2, stream) as progress:
        progress.start("resnet50")
        progress.advance()
    assert stream.getvalue() == ""


@pytest.mark.parametrize(("variable", "value"), [("PRE_COMMIT", "1"), ("TERM", "dumb")])
def test_off_under_pre_commit_and_dumb_terminals(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    assert not is_interactive(FakeTerminal())


def test_interactive_terminal():
    assert is_interactive(FakeTerminal())
    assert not is_interactive(io.StringIO())
