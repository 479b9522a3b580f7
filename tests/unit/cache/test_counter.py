"""recorded_count's judgements: when a count may be kept, and how a cached Report differs from a fresh one."""

from __future__ import annotations

from pytest_flopbudget._cache.counter import CachedCounter, not_cacheable, report_difference
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._report import LayerCost, Report


def test_a_count_is_kept_only_when_everything_it_read_is_described(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert not_cacheable(Dependencies()) is None
    assert not_cacheable(None) == "what it read could not be recorded"
    assert not_cacheable(Dependencies(uncacheable="it ran a subprocess")) == "it ran a subprocess"
    changed = str(tmp_path / "x.py")
    assert not_cacheable(Dependencies(unstable=[changed])) == f"{changed} changed while it was counted"
    both = Dependencies(unstable=[changed], uncacheable="it ran a subprocess")
    assert not_cacheable(both) == "it ran a subprocess"


def test_the_first_differing_figure_is_named() -> None:
    cached, fresh = Report(model="m"), Report(model="m")
    assert report_difference(cached, fresh) is None
    difference = report_difference(
        Report(model="m", layers={"": LayerCost(params=10)}), Report(model="m", layers={"": LayerCost(params=12)})
    )
    assert difference == "params 10 cached, 12 counted"
    assert report_difference(Report(model="m"), Report(model="other")) == 'model "m" cached, "other" counted'


def test_a_mismatch_is_looked_up_by_model_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`check` puts each model's mismatch on its measurement; a model that agreed (or had no record) has none."""
    counter = CachedCounter(None, object(), verify=True)  # type: ignore[arg-type]
    counter.mismatches = [("a", "flops 86 cached, 128 counted")]
    assert counter.mismatch_of("a") == "flops 86 cached, 128 counted"
    assert counter.mismatch_of("b") is None


def test_the_pool_keeps_a_modules_models_together_in_at_most_jobs_parts() -> None:
    """`-j 2`: module a's five models in two runs of consecutive models (3 + 2), b's one model alone, c's two in
    two parts of one; the largest parts first, equal sizes in the plan's order."""
    from pytest_flopbudget._cache.counter import partition

    entries = ["a1", "b1", "a2", "c1", "a3", "a4", "c2", "a5"]
    parts = partition(entries, 2, lambda name: name[0])  # type: ignore[arg-type]
    assert parts == [["a1", "a2", "a3"], ["a4", "a5"], ["b1"], ["c1"], ["c2"]]
    assert partition(entries, 1, lambda name: name[0]) == [["a1", "a2", "a3", "a4", "a5"], ["c1", "c2"], ["b1"]]  # type: ignore[arg-type]
    assert partition([], 4, lambda name: name) == []  # type: ignore[arg-type]
