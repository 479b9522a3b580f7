"""`-j`: what `flopbudget check` accepts as a number of processes, and the one line it prints for anything else."""

from __future__ import annotations

import argparse
import os

import pytest

from pytest_flopbudget._cli import build_parser, main
from pytest_flopbudget._cli.parallel import available_cores, parse_jobs


@pytest.mark.parametrize(("text", "jobs"), [("1", 1), ("2", 2), (" 16 ", 16)])
def test_a_whole_number_is_the_number_of_processes(text: str, jobs: int) -> None:
    assert parse_jobs(text) == jobs


@pytest.mark.parametrize("text", ["auto", "AUTO", " auto "])
def test_auto_is_the_cores_this_process_may_use(text: str) -> None:
    assert parse_jobs(text) == available_cores() >= 1
    if hasattr(os, "sched_getaffinity"):
        assert available_cores() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("text", ["0", "-1", "x", "", "1.5", "2x"])
def test_anything_else_is_refused_with_what_is_accepted(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a whole number of at least 1, or auto"):
        parse_jobs(text)


def test_the_default_is_one_at_a_time() -> None:
    assert build_parser().parse_args(["check"]).jobs == 1
    assert build_parser().parse_args(["check", "-j", "auto"]).jobs == available_cores()
    assert build_parser().parse_args(["check", "--jobs=3", "resnet"]).jobs == 3


@pytest.mark.parametrize("value", ["0", "x"])
def test_a_bad_value_is_one_line_naming_the_option(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "-j", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"argument -j/--jobs: '{value}' is not a number of processes" in err and "--help" in err
