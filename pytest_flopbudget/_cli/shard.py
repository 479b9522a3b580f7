"""`flopbudget check --shard K/N`: this job's part of the models, and the record its results carry for the merge.

Every shard of a CI matrix reads the same project and computes the same partition (`_shard.partition`, weighed by
the work each model's committed baseline records), then counts only its part. What it read is fingerprinted into
its results (`Shard.configuration`, `Shard.baselines`), so that `flopbudget merge` can refuse shards that ran on
different commits, with different options or against a different base, instead of judging a run that never was.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._errors import BaselineError
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._reporters.ci import ReportSpec
from pytest_flopbudget._run import Run, entry_nodeid
from pytest_flopbudget._shard import PlanItem, Shard, ShardSpec, parse_shard, partition, work
from pytest_flopbudget._version import __version__


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
    spec: ShardSpec, entries: Sequence[ModelEntry], settings: Settings, run: Run, *, front_end: str
) -> tuple[list[ModelEntry], Shard]:
    """This shard's entries (in their configured order) and the record of the whole plan and what was read."""
    store = BaselineStore(settings.baseline_dir)
    nodeids = [entry_nodeid(entry, settings.root) for entry in entries]
    weights = [(nodeid, _work(store, entry.name)) for nodeid, entry in zip(nodeids, entries)]
    part = set(partition(weights, spec.total)[spec.index - 1])
    chosen = [entry for nodeid, entry in zip(nodeids, entries) if nodeid in part]
    plan = tuple(PlanItem(entry.name, nodeid) for nodeid, entry in zip(nodeids, entries))
    record = Shard(
        spec.index,
        spec.total,
        plan,
        tuple(nodeid for nodeid in nodeids if nodeid in part),
        configuration(settings, run, front_end=front_end),
        baseline_digests(store),
    )
    return chosen, record


def configuration(settings: Settings, run: Run, *, front_end: str) -> dict[str, str]:
    """What a shard's verdicts depend on besides its models' counts: the tool, the front end, the pyproject file's
    bytes, the base (`--base-ref`, and the commit it named then) and whether baselines were required."""
    found: dict[str, str] = {"pytest-flopbudget": __version__, "front end": front_end}
    if settings.pyproject is not None:
        found[display_path(str(settings.pyproject))] = file_digest(settings.pyproject)
    if run.base is not None:
        found["base-ref"] = f"{run.base.revision.ref} at {run.base.revision.commit}"
    found["require-baseline"] = "true" if run.require_baseline else "false"
    return found


def baseline_digests(store: BaselineStore) -> dict[str, str]:
    """Each baseline file's sha256, by its path as outputs show it."""
    return {display_path(str(store.directory / name)): file_digest(store.directory / name) for name in store.files()}


def file_digest(path: str | os.PathLike[str]) -> str:
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _work(store: BaselineStore, name: str) -> int | None:
    try:
        return work(store.load(name))
    except BaselineError:  # its verdict will say so; the shard plan only needs a weight
        return None
