"""The partition of a run across CI machines: `--shard K/N` and `auto`, balanced, deterministic, complete."""

from __future__ import annotations

import itertools

import pytest

from pytest_flopbudget._report import LayerCost, OpCost, PhaseTotals, Report, SkippedOp
from pytest_flopbudget._shard import (
    LOAD_WORK,
    PlanItem,
    Shard,
    ShardError,
    ShardSpec,
    parse_shard,
    partition,
    plan,
    work,
)


@pytest.mark.parametrize(
    ("text", "env", "spec"),
    [
        ("2/3", {}, ShardSpec(2, 3)),
        (" 1/1 ", {}, ShardSpec(1, 1)),
        ("auto", {"FLOPBUDGET_SHARD_INDEX": "3", "FLOPBUDGET_SHARD_TOTAL": "4"}, ShardSpec(3, 4)),
        ("auto", {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "5"}, ShardSpec(1, 5)),  # GitLab `parallel: 5`: 1-based
        ("AUTO", {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "2"}, ShardSpec(1, 2)),  # CircleCI: 0-based
        ("auto", {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, ShardSpec(3, 3)),
        # ours first: a job can shard the budgets its own way inside GitLab's parallel jobs
        (
            "auto",
            {"FLOPBUDGET_SHARD_INDEX": "1", "FLOPBUDGET_SHARD_TOTAL": "2", "CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "5"},
            ShardSpec(1, 2),
        ),
    ],
)
def test_a_shard_is_k_of_n_or_the_ci_systems_index_and_total(text, env, spec) -> None:
    assert parse_shard(text, env) == spec
    assert str(spec) == f"{spec.index}/{spec.total}"


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("4/3", {}, "--shard '4/3': expected K/N (this is shard K of N, 1 <= K <= N, e.g. 2/3) or auto"),
        ("0/3", {}, "--shard '0/3': expected K/N"),
        ("1/0", {}, "--shard '1/0': expected K/N"),
        ("2", {}, "--shard '2': expected K/N"),
        ("-1/3", {}, "--shard '-1/3': expected K/N"),
        ("\uff11/\uff13", {}, "--shard '\uff11/\uff13': expected K/N"),  # full-width digits: isdigit()'s, not ours
        ("auto", {}, "--shard auto: no shard index and total in the environment (looked for FLOPBUDGET_SHARD_INDEX"),
        (
            "auto",
            {"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "3"},
            "--shard auto: CI_NODE_INDEX='0' and CI_NODE_TOTAL='3': expected whole numbers, CI_NODE_INDEX from 1 to "
            "CI_NODE_TOTAL",
        ),
        (
            "auto",
            {"CIRCLE_NODE_INDEX": "2"},
            "--shard auto: CIRCLE_NODE_INDEX='2' and CIRCLE_NODE_TOTAL='': expected whole numbers, CIRCLE_NODE_INDEX "
            "from 0 to CIRCLE_NODE_TOTAL - 1",
        ),
    ],
)
def test_a_shard_that_names_none_is_one_line(text, env, message) -> None:
    with pytest.raises(ShardError) as raised:
        parse_shard(text, env)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_auto_without_the_variables_says_how_to_set_them_and_what_github_does() -> None:
    with pytest.raises(ShardError, match=r"give --flopbudget-shard K/N \(GitHub Actions: --shard \$\{\{ matrix"):
        parse_shard("auto", {}, option="--flopbudget-shard")


def test_the_heaviest_go_first_each_to_the_lightest_part() -> None:
    # weights 9 7 6 5 4 3 over 2 parts: 9->A, 7->B, 6->B (13), 5->A (14), 4->B (17), 3->A (17)
    weights = [("a", 3), ("b", 9), ("c", 4), ("d", 7), ("e", 5), ("f", 6)]
    parts = partition(weights, 2)
    assert parts == [["a", "b", "e"], ["c", "d", "f"]]  # each part in the given order
    assert [sum(dict(weights)[key] for key in part) for part in parts] == [17, 17]


def test_every_key_is_in_exactly_one_part_whatever_the_count() -> None:
    weights = [(f"pyproject.toml::m{i:03d}", (i * 37) % 101 + 1) for i in range(200)]
    for total in (1, 2, 3, 7, 200, 250):
        parts = partition(weights, total)
        assert len(parts) == total
        assert sorted(itertools.chain(*parts)) == sorted(key for key, _ in weights)
        loads = [sum(dict(weights)[key] for key in part) for part in parts]
        if total <= 7:  # longest-processing-time first: no part more than the heaviest model over the mean
            assert max(loads) - sum(loads) / total <= max(w for _, w in weights)


def test_the_partition_depends_on_the_weights_not_on_the_order_given() -> None:
    weights = [(f"m{i}", i % 4 + 1) for i in range(12)]
    shuffled = weights[5:] + weights[:5]
    assert [sorted(part) for part in partition(weights, 3)] == [sorted(part) for part in partition(shuffled, 3)]


def test_a_model_without_a_baseline_weighs_the_mean_of_the_others() -> None:
    # 10 and 30 known: the two unknown weigh 20 each; 30 -> A, 20 (x) -> B, 20 (y) -> C, 10 -> B or C: C has
    # the same load as B, and B's index is lower
    assert partition([("a", 10), ("b", 30), ("x", None), ("y", None)], 3) == [["b"], ["a", "x"], ["y"]]
    assert partition([("x", None), ("y", None)], 2) == [["x"], ["y"]]


def report(calls: dict[str, int], skipped: int = 0) -> Report:
    layers = {
        "fc": LayerCost(
            flops=10, macs=5, ops={op: OpCost(n, flops=10 // len(calls), macs=0) for op, n in calls.items()}
        )
    }
    skipped_ops = {"aten.op": SkippedOp(skipped, ["fc"])} if skipped else {}
    return Report(layers=layers, forward=PhaseTotals(flops=10, macs=5), skipped_ops=skipped_ops)


def test_the_work_of_a_count_is_its_op_calls_counted_and_skipped() -> None:
    assert work(None) is None
    assert work(report({"aten.mm": 3, "aten.add": 4}, skipped=2)) == LOAD_WORK + 3 + 4 + 2


def test_a_plan_names_the_whole_run_and_this_shards_part() -> None:
    items = [PlanItem(f"m{i}", f"pyproject.toml::m{i}") for i in range(4)]
    baselines = {"m0": report({"aten.mm": 500}), "m1": report({"aten.mm": 1}), "m2": report({"aten.mm": 1})}
    record = plan(
        ShardSpec(1, 2), items, lambda item: baselines.get(item.name), configuration={"a": "1"}, baselines={"b": "2"}
    )
    assert record.plan == tuple(items)
    # 600 for m0, 101 for m1 and m2, and m3 (no baseline) their mean, 267: m0 alone outweighs the rest
    assert record.part == ("pyproject.toml::m0",)
    other = plan(ShardSpec(2, 2), items, lambda item: baselines.get(item.name), configuration={}, baselines={})
    assert other.part == ("pyproject.toml::m1", "pyproject.toml::m2", "pyproject.toml::m3")
    assert Shard.from_dict(record.to_dict()) == record


def test_a_baseline_that_cannot_be_read_weighs_as_none() -> None:
    from pytest_flopbudget._errors import BaselineError

    def unreadable(item: PlanItem) -> Report | None:
        raise BaselineError("corrupt")

    record = plan(ShardSpec(1, 1), [PlanItem("m", "n")], unreadable, configuration={}, baselines={})
    assert record.part == ("n",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"index": 3, "total": 2, "plan": [], "part": []}, "shard.index and shard.total must be whole numbers"),
        ({"index": 1, "total": 2, "plan": {}, "part": []}, "shard.plan and shard.part must be arrays"),
        ({"index": 1, "total": 2, "plan": [{"name": 1, "nodeid": "x"}], "part": []}, "shard.plan[0].name must be"),
        ({"index": 1, "total": 2, "plan": [], "part": [], "baselines": {"a": 1}}, "shard.baselines.a must be"),
    ],
)
def test_a_record_of_the_wrong_shape_is_refused_naming_the_field(data, message) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        Shard.from_dict(data)
    assert message in str(raised.value)
