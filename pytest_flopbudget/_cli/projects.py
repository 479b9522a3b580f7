"""`flopbudget check --pyproject A --pyproject B`: several projects (a monorepo's packages) in one run.

Each project is checked as it would be alone: its own `[tool.flopbudget]`, its own baseline directory, its own
`--base-ref` comparison and require-baseline setting, one `Run` each, counted by the same loop as a single
project's (`check.count_into`). The results are then one `RunResult`: one exit status, one set of annotations and
exports, and summaries with a section per project (`RunResult.projects`). A model is told apart by its node id,
which names its project's pyproject.toml relative to the projects' common folder (`packages/a/pyproject.toml::net`),
and the command that records its baseline names its `--pyproject`. With `--shard K/N` the partition spans the
models of every project, so a matrix balances a monorepo as it balances one project.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pytest_flopbudget._cli import shard as sharding
from pytest_flopbudget._cli.check import _counter as counter_for
from pytest_flopbudget._cli.check import count_into
from pytest_flopbudget._cli.project import UsageError, load_project, model_named, unknown_model
from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._run import Project, Run, RunResult, entry_nodeid
from pytest_flopbudget._run import require_baseline as require_baseline_in
from pytest_flopbudget._safe_text import json_safe
from pytest_flopbudget._shard import PlanItem, Shard, ShardSpec, baseline_digests, configuration, plan


@dataclasses.dataclass
class Part:
    """One project of the run: as given on the command line, its settings, the models it checks, its run."""

    given: str
    settings: Settings
    entries: list[ModelEntry]
    run: Run
    nodeids: dict[str, str]


def run_projects(
    *,
    pyprojects: Sequence[str],
    names: Sequence[str],
    update: bool,
    reports: Sequence[str],
    base_ref: str | None,
    out: TextIO,
    err: TextIO,
    require_baseline: bool | None = None,
    cache: bool | str | None = None,
    cache_dir: str | None = None,
    format: str = "text",
    shard: str | None = None,
    jobs: int = 1,
) -> int:
    """`run_check` over several projects: count, judge and write baselines per project, then print and emit the
    one result; returns the exit status."""
    from pytest_flopbudget._reporters import ci

    document = out
    if format == "json":
        out = err
    specs = ci.resolve_specs([*reports, *(["none"] if shard is not None else [])])
    spec = sharding.shard_spec(shard, update=update, specs=specs, format=format, env=os.environ)
    parts = _parts(pyprojects, names, update=update, require_baseline=require_baseline, base_ref=base_ref)
    record = None
    if spec is not None:
        record = _plan(spec, parts)
        chosen = set(record.part)
        for part in parts:
            part.entries = [entry for entry in part.entries if part.nodeids[entry.name] in chosen]
    notes: list[str] = []
    mismatches = []
    for part in parts:
        counter = counter_for(part.settings, cache, cache_dir)
        counter.plan(part.entries, part.settings.root)
        count_into(part.run, part.entries, part.settings, err, counter, jobs)
        notes += counter.notes(len(part.entries))
        mismatches += list(counter.mismatches)
    for line in dict.fromkeys(notes):
        err.write(line + "\n")
    result = combined(parts, [part.run.finish() for part in parts])
    result.shard = record
    ci.emit(result, [ci.TERMINAL], stream=out, errors=err)
    for name, difference in mismatches:
        err.write(f"flopbudget: error: {name}: its cached count differs from a fresh count: {difference}\n")
    if format == "json":
        from pytest_flopbudget._reporters import json_report

        document.write(json_safe(json_report.dumps_results(result, root=ci.workspace_root(ci.output("json")))))
    if result.update:
        return result.exit_code
    emitted = ci.emit(result, specs, stream=out)
    for line in emitted.errors:
        err.write(line + "\n")
    return result.exit_code if emitted.ok else 2


def _parts(
    pyprojects: Sequence[str],
    names: Sequence[str],
    *,
    update: bool,
    require_baseline: bool | None,
    base_ref: str | None,
) -> list[Part]:
    """Every project, validated before anything is counted: each file once, each NAME in some project."""
    loaded: list[tuple[str, Settings]] = []
    seen: dict[str, str] = {}
    for given in pyprojects:
        settings = load_project(given)
        key = os.path.realpath(str(settings.pyproject))
        if key in seen:
            raise UsageError(f"--pyproject {given}: the same file as --pyproject {seen[key]}; give each project once")
        seen[key] = given
        if not settings.models:
            raise UsageError(f"{display_path(str(settings.pyproject))}: [tool.flopbudget] declares no models")
        loaded.append((given, settings))
    for name in names:
        if all(model_named(settings, name) is None for _, settings in loaded):
            raise UsageError(f"in none of the projects: {unknown_model(name, loaded[0][1])}")
    root = Path(os.path.commonpath([str(settings.root.resolve()) for _, settings in loaded]))
    parts = []
    for given, settings in loaded:
        if names:
            found = [model_named(settings, name) for name in names]
            entries = list({e.name: e for e in found if e is not None}.values())
        else:
            entries = list(settings.models.values())
        setting = settings.require_baseline if require_baseline is None else require_baseline
        run = Run(
            BaselineStore(settings.baseline_dir),
            update=update,
            require_baseline=require_baseline_in(setting, os.environ),
            front_end=CLI,
        )
        if base_ref:
            run.compare_with_base(settings, base_ref)
        nodeids = {entry.name: entry_nodeid(entry, root) for entry in settings.models.values()}
        parts.append(Part(given, settings, entries, run, nodeids))
    return parts


def _plan(spec: ShardSpec, parts: Sequence[Part]) -> Shard:
    """One partition over the models of every project, weighed by each project's baselines; the configuration
    and baselines of every project fingerprinted."""
    stores: dict[str, BaselineStore] = {}
    items = []
    found: dict[str, str] = {}
    baselines: dict[str, str] = {}
    for part in parts:
        store = BaselineStore(part.settings.baseline_dir)
        for entry in part.entries:
            nodeid = part.nodeids[entry.name]
            items.append(PlanItem(entry.name, nodeid))
            stores[nodeid] = store
        base = (part.run.base.revision.ref, part.run.base.revision.commit) if part.run.base is not None else None
        shown = display_path(str(part.settings.pyproject))
        for key, value in configuration(
            part.settings.pyproject, front_end=CLI.name, base=base, require_baseline=part.run.require_baseline
        ).items():
            found[f"{key} ({shown})" if key == "require-baseline" else key] = value
        baselines.update(baseline_digests(store.directory))
    return plan(spec, items, lambda item: stores[item.nodeid].load(item.name), configuration=found, baselines=baselines)


def combined(parts: Sequence[Part], results: Sequence[RunResult]) -> RunResult:
    """The one result of the projects' runs: every model under its node id across projects, each pyproject
    model's update command naming its `--pyproject`, and a section per project."""
    for part, result in zip(parts, results):
        for verdict in result.verdicts:
            measurement = verdict.measurement
            measurement.nodeid = part.nodeids.get(measurement.name, measurement.nodeid)
            measurement.pyproject = part.given
        result.unchecked = [dataclasses.replace(u, nodeid=part.nodeids.get(u.name, u.nodeid)) for u in result.unchecked]
    first = results[0]
    return RunResult(
        verdicts=sorted((v for r in results for v in r.verdicts), key=lambda v: (v.name, v.measurement.nodeid or "")),
        unchecked=sorted((u for r in results for u in r.unchecked), key=lambda u: (u.name, u.nodeid or "")),
        changes=[c for r in results for c in r.changes],
        update=first.update,
        written=[n for r in results for n in r.written],
        unchanged=[n for r in results for n in r.unchanged],
        update_errors=[e for r in results for e in r.update_errors],
        baseline_dir=", ".join(r.baseline_dir for r in results),
        base_ref=first.base_ref,
        front_end=CLI,
        projects=[
            Project(str(part.settings.pyproject), r.baseline_dir, tuple(r.written), tuple(r.unchanged))
            for part, r in zip(parts, results)
        ],
    )
