"""The op -> formula table (`counting/registry.py`): versions, the FREE sentinel and the users' layer on top."""

from __future__ import annotations

import pytest

from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.registry import FREE, FormulaRegistry


def one(*_: object) -> Cost:
    return Cost(1, 0)


def two(*_: object) -> Cost:
    return Cost(2, 0)


def three(*_: object) -> Cost:
    return Cost(3, 0)


def test_an_unknown_op_has_no_entry_and_no_default() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("test")
    assert registry.lookup("Conv") is None
    assert "Conv" not in registry
    assert not registry.is_free("Conv")


def test_register_files_one_formula_under_every_key() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("test")
    assert registry.register("Add", "Sub")(one) is one  # the decorator returns the function unchanged
    registry.register_free("Reshape", "Identity")
    assert registry.lookup("Add") is one and registry.lookup("Sub") is one
    assert registry.lookup("Reshape") is FREE and registry.is_free("Identity")
    assert list(registry.keys()) == ["Add", "Identity", "Reshape", "Sub"]  # sorted by repr
    assert repr(FREE) == "FREE"


def test_a_version_gets_the_newest_entry_that_applies_to_it() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("onnx")
    registry.register("Resize", since=13)(two)  # registered out of order on purpose
    registry.register("Resize", since=10)(one)
    registry.register_free("Resize", since=18)
    assert registry.builtin("Resize", 9) is None  # before the op existed
    assert registry.builtin("Resize", 10) is one
    assert registry.builtin("Resize", 12) is one
    assert registry.builtin("Resize", 13) is two
    assert registry.builtin("Resize", 17) is two
    assert registry.builtin("Resize", 18) is FREE
    assert registry.builtin("Resize") is FREE  # no version: the newest


def test_the_same_key_and_version_twice_is_a_bug() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("torch")
    registry.register("aten.mm")(one)
    with pytest.raises(ValueError, match=r"torch: 'aten.mm' \(since 0\) is registered twice"):
        registry.register("aten.mm")(two)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_free("aten.mm")


def test_users_formulas_stack_on_top_and_popping_restores_what_was_there() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("torch")
    registry.register("aten.mm")(one)
    registry.push_user("aten.mm", two)
    registry.push_user("aten.mm", three)
    assert registry.lookup("aten.mm") is three  # the newest user formula wins, at every version
    assert registry.lookup("aten.mm", 1) is three
    assert registry.builtin("aten.mm") is one  # the built-in entry is still there underneath
    assert registry.user_formulas("aten.mm") == [two, three]
    # removing the older one leaves the newer in use
    assert registry.pop_user("aten.mm", two)
    assert registry.lookup("aten.mm") is three
    assert registry.pop_user("aten.mm", three)
    assert registry.lookup("aten.mm") is one
    assert registry.user_keys() == []
    assert not registry.pop_user("aten.mm", three)  # no longer registered


def test_a_user_formula_can_cover_an_op_without_a_built_in_entry_or_a_free_one() -> None:
    registry: FormulaRegistry[str] = FormulaRegistry("torch")
    registry.register_free("aten.view")
    registry.push_user("aten.view", one)
    registry.push_user("aten.custom", two)
    assert not registry.is_free("aten.view")
    assert registry.lookup("aten.custom") is two
    assert "aten.custom" not in registry  # `in` asks about built-in entries only
    assert registry.user_keys() == ["aten.custom", "aten.view"]
