"""Finding the line of the `flop_budget(...)` call that made a marker, from the test file's syntax tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._plugin.marker_source import marker_line

SOURCE = """\
import pytest

BUDGET = "4G"


@pytest.mark.slow
@pytest.mark.flop_budget("8.3G", params="25.6M")
def test_one(flopbudget):
    pass


@pytest.mark.parametrize(
    "n",
    [
        pytest.param(1, marks=pytest.mark.flop_budget(macs="20")),
        pytest.param(2, marks=pytest.mark.flop_budget(macs="30")),
    ],
)
@pytest.mark.flop_budget(macs="1k")
def test_two(flopbudget, n):
    pass


@pytest.mark.flop_budget(BUDGET)
def test_three(flopbudget):
    pass


class TestGroup:
    pytestmark = pytest.mark.flop_budget(flops="1M")

    def test_four(self, flopbudget):
        pass
"""


@pytest.fixture
def test_file(tmp_path: Path) -> str:
    path = tmp_path / "test_x.py"
    path.write_text(SOURCE)
    return str(path)


def test_a_decorator_below_another_is_found_on_its_own_line(test_file: str) -> None:
    assert marker_line(test_file, 6, pytest.mark.flop_budget("8.3G", params="25.6M").mark) == 7


def test_each_parameters_marker_and_the_functions_are_told_apart_by_their_arguments(test_file: str) -> None:
    assert marker_line(test_file, 12, pytest.mark.flop_budget(macs="20").mark) == 15
    assert marker_line(test_file, 12, pytest.mark.flop_budget(macs="30").mark) == 16
    assert marker_line(test_file, 12, pytest.mark.flop_budget(macs="1k").mark) == 19


def test_arguments_written_as_names_fall_back_to_the_functions_only_marker(test_file: str) -> None:
    assert marker_line(test_file, 24, pytest.mark.flop_budget("4G").mark) == 24


def test_a_class_marker_is_found_anywhere_in_the_file_when_its_arguments_are_unique(test_file: str) -> None:
    assert marker_line(test_file, 32, pytest.mark.flop_budget(flops="1M").mark) == 30


def test_what_cannot_be_told_is_none(test_file: str, tmp_path: Path) -> None:
    assert marker_line(test_file, 32, pytest.mark.flop_budget(flops="2M").mark) is None
    assert marker_line(str(tmp_path / "missing.py"), 1, pytest.mark.flop_budget("1").mark) is None
    broken = tmp_path / "test_broken.py"
    broken.write_text("def (:\n")
    assert marker_line(str(broken), 1, pytest.mark.flop_budget("1").mark) is None
