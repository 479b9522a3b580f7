"""judge/versions.py: which library versions changed since the baseline, and the one line that says so."""

from __future__ import annotations

from pytest_flopbudget._judge.versions import changed_versions, version_note, with_libraries_of

BASE = {"torch": "2.13.0", "pytest-flopbudget": "0.1.0", "execution": "fake"}


def test_a_changed_torch_is_one_line() -> None:
    now = {**BASE, "torch": "2.14.0"}
    assert changed_versions(BASE, now) == [("torch", "2.13.0", "2.14.0")]
    assert version_note(BASE, now) == "counted with torch 2.13.0 at the base, 2.14.0 now"


def test_several_libraries_are_named_in_order() -> None:
    base = {**BASE, "transformers": "4.57.1"}
    now = {**base, "pytest-flopbudget": "0.2.0", "transformers": "5.0.0", "torch": "2.14.0"}
    assert version_note(base, now) == (
        "counted with torch 2.13.0 at the base, 2.14.0 now; transformers 4.57.1 at the base, 5.0.0 now; "
        "pytest-flopbudget 0.1.0 at the base, 0.2.0 now"
    )


def test_same_versions_say_nothing() -> None:
    assert version_note(BASE, dict(BASE)) is None


def test_a_version_missing_on_either_side_says_nothing() -> None:
    """An old baseline without versions (or without a library recorded now) reads fine and is not a change."""
    assert version_note({}, {**BASE, "torch": "2.14.0"}) is None
    assert version_note(BASE, {**BASE, "transformers": "5.0.0"}) is None


def test_keys_that_are_not_libraries_are_not_versions() -> None:
    assert version_note(BASE, {**BASE, "execution": "real"}) is None
    assert version_note({"opsets": "ai.onnx=17"}, {"opsets": "ai.onnx=18"}) is None


def test_with_libraries_of_swaps_only_library_versions() -> None:
    now = {"torch": "2.14.0", "transformers": "5.0.0", "execution": "real"}
    assert with_libraries_of(BASE, now) == {"execution": "fake", "torch": "2.14.0", "transformers": "5.0.0"}
