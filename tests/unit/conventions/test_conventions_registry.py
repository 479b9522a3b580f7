"""`_conventions/registry.py`: profiles by name from the modules of `MODULES` (adding one is one line), and a
budget's `convention` surviving the JSON round trip the xdist workers and the shards' results use."""

from __future__ import annotations

import sys
import types

import pytest

from pytest_flopbudget._config.budget import Budget, convention_names
from pytest_flopbudget._conventions import registry
from pytest_flopbudget._conventions.profile import ConventionError, Profile
from pytest_flopbudget._explain.items import Explanation


class Constant:
    """A profile that says 7 whatever the report: enough to see the registry find it."""

    name = "constant"
    title = "seven"
    source = "this test"

    def apply(self, report: object) -> Explanation:
        return Explanation("constant", self.title, "", "flops", 0, 7, ())


def test_a_module_of_profiles_is_one_line_in_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("conventions_probe")
    module.PROFILES = (Constant(),)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "conventions_probe", module)
    monkeypatch.setattr(registry, "MODULES", (*registry.MODULES, "conventions_probe"))
    registry._profiles.cache_clear()
    try:
        assert registry.profile_names()[-1] == "constant"
        profile: Profile = registry.profile_named("constant")
        assert profile.apply(object()).theirs == 7  # type: ignore[arg-type]
        assert "constant" in convention_names()  # the root plugged the registry's names into config/
    finally:
        monkeypatch.undo()
        registry._profiles.cache_clear()
    assert "constant" not in registry.profile_names()


def test_an_unknown_name_lists_the_accepted_ones() -> None:
    with pytest.raises(ConventionError, match=r"^unknown convention 'x'; accepted: megatron, megatron-causal, palm"):
        registry.profile_named("x")


def test_a_budget_keeps_its_convention_through_json() -> None:
    budget = Budget(convention="megatron")
    assert Budget.from_dict(budget.to_dict()) == budget
    assert "convention" not in Budget().to_dict()  # every other budget's JSON is as it was
    assert Budget().override(budget).convention == "megatron"


def test_the_peer_counters_conventions_are_profiles_too() -> None:
    assert registry.profile_names() == (
        *("megatron", "megatron-causal", "palm", "torchtitan", "maxtext", "vllm"),
        *("fvcore", "ptflops", "thop", "tf-profiler", "xla"),
    )


def test_a_peer_that_counts_macs_is_printed_in_macs() -> None:
    from pytest_flopbudget._conventions.text import convention_text

    # a 1x1 conv without bias on one pixel: 2 FLOPs to us, fvcore's 1 "flop" is 1 MAC
    text = convention_text(Explanation("fvcore", "fvcore's count", "", "macs", 2, 1, ()))
    assert "  fvcore                              1 MACs   (1 MACs)" in text
    assert "  exact                               2 FLOPs  (2 FLOPs)" in text
