"""`flopbudget check --shard K/N`: this job's part of the models, and the record its results carry for the merge.

Every shard of a CI matrix reads the same project and computes the same partition (`_shard.plan`, weighed by the
work each model's committed baseline records), then counts only its part. What it read is fingerprinted into its
results (`Shard.configuration`, `Shard.baselines`), so that `flopbudget merge` can refuse shards that ran on
different commits, with different options or against a different base, instead of judging a run that never was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._reporters.ci import ReportSpec
from pytest_flopbudget._run import Run, entry_nodeid
from pytest_flopbudget._shard import PlanItem, Shard, ShardSpec, baseline_digests, configuration, parse_shard, plan


def shard_spec(
    text: str | None, *, update: bool, specs: Sequence[ReportSpec], format: str, env: Mapping[str, str]
) -> ShardSpec | None:
    """The shard `--shard` names (None without it), after the checks that need no project: a shard writes its
    results for the merge, and records no baselines (each job would write only its part, on its own machine)."""
    if text is None:
        return None
    spec = parse_shard(text, env)
    if update:
        raise UsageError(
            "--shard with --update: record baselines in one run of every model (flopbudget check --update)"
        )
    if format != "json" and not any(s.kind == "json" for s in specs):
        raise UsageError(
            f"--shard {text}: the shard's results go nowhere: add --report json:PATH (or --format json), which "
            "flopbudget merge reads"
        )
    return spec


def select_shard(
    spec: ShardSpec, entries: Sequence[ModelEntry], settings: Settings, run: Run
) -> tuple[list[ModelEntry], Shard]:
    """This shard's entries (in their configured order) and the record of the whole plan and what was read."""
    store = BaselineStore(settings.baseline_dir)
    nodeids = [entry_nodeid(entry, settings.root) for entry in entries]
    base = (run.base.revision.ref, run.base.revision.commit) if run.base is not None else None
    record = plan(
        spec,
        [PlanItem(entry.name, nodeid) for entry, nodeid in zip(entries, nodeids)],
        lambda item: store.load(item.name),
        configuration=configuration(
            settings.pyproject, front_end=CLI.name, base=base, require_baseline=run.require_baseline
        ),
        baselines=baseline_digests(store.directory),
    )
    part = set(record.part)
    return [entry for entry, nodeid in zip(entries, nodeids) if nodeid in part], record
