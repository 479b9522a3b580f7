"""`flopbudget merge PATH...`: the results of the shards of one run judged as that run.

Each shard (`flopbudget check --shard K/N --report json:PATH`, or pytest with `--flopbudget-shard`) counted its
part and wrote its verdicts, with the whole plan and fingerprints of what it read. The merge reads those
documents only (`reporters.results_reader`: no pyproject.toml, no baseline, no model code; the files came from
jobs that ran the project's code and are read as untrusted input), refuses shards that did not see the same run,
and hands one `RunResult` to the same outputs a whole run writes: one terminal text, one exit status, one job
summary, one comment body, one pictures page, one set of exports.

Refused, each in one line, with nothing written: shards that read different configurations (the tool's version,
the front end, pyproject.toml, `--base-ref` and its commit, require-baseline) or different baselines (naming the
model whose file differs), counted with different library versions (naming the models), planned different runs,
or a model counted twice (naming it). A model no shard counted (a shard's results not given, or unreadable) is
not refused but reported: it is a model not checked in every output, named, and the exit status is 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from pytest_flopbudget._atomic_file import read_regular_file
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.baseline import baseline_filename
from pytest_flopbudget._judge.verdict import Verdict
from pytest_flopbudget._reporters import ci
from pytest_flopbudget._reporters.results_reader import Results, parse_results
from pytest_flopbudget._run import EXIT_ERROR, RunResult, Unchecked
from pytest_flopbudget._safe_text import one_line
from pytest_flopbudget._shard import Shard

#: The most a results document may hold: every model's per-layer Report and baseline, for hundreds of models.
MAX_BYTES = 1024 * 1024 * 1024
#: How many names a line lists before counting the rest.
NAMES_SHOWN = 10


@dataclass
class ShardResults:
    """One shard's document, read: where it came from, its run and its shard record."""

    path: str
    results: Results
    shard: Shard

    @property
    def label(self) -> str:
        return f"shard {self.shard.label} ({self.path})"


def run_merge(*, paths: Sequence[str], reports: Sequence[str], out: TextIO, err: TextIO) -> int:
    """Read, check and merge the shards' results in `paths`, print the run's text and write `reports` (`auto`:
    the GitHub output on GitHub Actions, as `flopbudget check`); returns the exit status."""
    specs = ci.resolve_specs(reports)
    root = ci.workspace_root(ci.output("json"))  # where the shards' JSON made its paths relative to
    shards, unread = read_shards(paths, root)
    problems = consistency_problems(shards)
    if problems:
        for line in problems:
            err.write(f"flopbudget: error: merge: {line}\n")
        return EXIT_ERROR
    result = merged(shards, unread)
    ci.emit(result, [ci.TERMINAL], stream=out, errors=err)
    for line in unread.values():
        err.write(f"flopbudget: error: merge: {line}\n")
    emitted = ci.emit(result, specs, stream=out)
    for line in emitted.errors:
        err.write(line + "\n")
    if unread or not emitted.ok:
        return EXIT_ERROR
    return result.exit_code


def read_shards(paths: Sequence[str], root: str) -> tuple[list[ShardResults], dict[str, str]]:
    """Each readable shard document, and a line for each path that is not one (missing, unreadable, not a shard's
    results)."""
    if not paths:
        raise UsageError("merge: give the shards' results files (flopbudget check --shard K/N --report json:PATH)")
    shards: list[ShardResults] = []
    unread: dict[str, str] = {}
    for path in dict.fromkeys(paths):  # a path given twice is one file, not a shard counted twice
        try:
            text = read_regular_file(path, MAX_BYTES).decode("utf-8")
            results = parse_results(text, root)
        except FileNotFoundError:
            unread[path] = f"{path}: no such file (did that shard finish?)"
            continue
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or exc
            unread[path] = one_line(f"{path}: cannot read it: {why}")
            continue
        if results.shard is None:
            unread[path] = (
                f"{path}: not a shard's results (no `shard` object): write them with flopbudget check --shard K/N "
                "--report json:PATH, or pytest --flopbudget-shard K/N --flopbudget-report json:PATH"
            )
        else:
            shards.append(ShardResults(path, results, results.shard))
    if not shards:
        raise UsageError("merge: no shard's results could be read: " + "; ".join(unread.values()))
    return shards, unread


def consistency_problems(shards: Sequence[ShardResults]) -> list[str]:
    """Why these shards are not parts of one run, one line each (empty: they are)."""
    first = shards[0]
    problems: list[str] = []
    for other in shards[1:]:
        problems.extend(_differences(first, other))
    problems.extend(_versions(shards))
    problems.extend(_twice(shards))
    for shard in shards:
        part = set(shard.shard.part)
        outside = [
            v.measurement.nodeid or v.name for v in shard.results.result.verdicts if v.measurement.nodeid not in part
        ]
        outside += [u.nodeid or u.name for u in shard.results.result.unchecked if u.nodeid not in part]
        if outside:
            problems.append(f"{shard.label} holds results outside its part of the plan: {_names(outside)}")
    return problems


def _differences(first: ShardResults, other: ShardResults) -> list[str]:
    a, b = first.shard, other.shard
    both = f"{first.label} and {other.label}"
    problems = []
    if a.total != b.total:
        return [f"{both} are shards of runs split {a.total} and {b.total} ways"]
    for key in sorted(set(a.configuration) | set(b.configuration)):
        left, right = a.configuration.get(key), b.configuration.get(key)
        if left != right:
            problems.append(f"{both} saw different configurations: {key} is {_short(left)} and {_short(right)}")
    models = {baseline_filename(item.name): item.name for item in a.plan}
    for key in sorted(set(a.baselines) | set(b.baselines)):
        left, right = a.baselines.get(key), b.baselines.get(key)
        if left != right:
            model = models.get(os.path.basename(key))
            whose = f" (model {model!r})" if model is not None else ""
            state = "differs" if left and right else f"is missing in {other.label if left else first.label}"
            problems.append(f"{both} saw different baselines: {key}{whose} {state}")
    if a.plan != b.plan:
        only = [item.nodeid for item in a.plan if item not in b.plan] + [i.nodeid for i in b.plan if i not in a.plan]
        problems.append(f"{both} planned different models: {_names(only) or 'the same ones in another order'}")
    run_a, run_b = first.results.result, other.results.result
    for what, left_value, right_value in (
        ("base ref", run_a.base_ref, run_b.base_ref),
        ("baseline directory", run_a.baseline_dir, run_b.baseline_dir),
        ("projects", [p.pyproject for p in run_a.projects], [p.pyproject for p in run_b.projects]),
    ):
        if left_value != right_value:
            problems.append(f"{both} saw different configurations: {what} {left_value!r} and {right_value!r}")
    if _budget_changes(run_a.changes) != _budget_changes(run_b.changes):
        problems.append(f"{both} saw different budget changes since the base ref")
    return problems


def _versions(shards: Sequence[ShardResults]) -> list[str]:
    """One line per library counted with more than one version across the shards, naming the models."""
    seen: dict[str, dict[str, list[str]]] = {}
    for shard in shards:
        for verdict in shard.results.result.verdicts:
            for library, version in verdict.report.versions.items():
                seen.setdefault(library, {}).setdefault(version, []).append(f"{verdict.name} in {shard.shard.label}")
    return [
        f"the shards counted with different {library} versions: "
        + "; ".join(f"{version} ({_names(models)})" for version, models in sorted(versions.items()))
        for library, versions in sorted(seen.items())
        if len(versions) > 1
    ]


def _twice(shards: Sequence[ShardResults]) -> list[str]:
    """A model (by name and node id) in the results of two shards."""
    where: dict[tuple[str, str], list[str]] = {}
    for shard in shards:
        result = shard.results.result
        keys = {(v.name, v.measurement.nodeid or "") for v in result.verdicts}
        keys |= {(u.name, u.nodeid or "") for u in result.unchecked}
        for key in sorted(keys):
            where.setdefault(key, []).append(shard.label)
    return [
        f"model {name!r} ({nodeid}) is counted twice: by {' and by '.join(labels)}"
        for (name, nodeid), labels in where.items()
        if len(labels) > 1
    ]


def merged(shards: Sequence[ShardResults], unread: Mapping[str, str]) -> RunResult:
    """The one run the shards are parts of; a model no shard's results hold is in it as not checked, named."""
    first = shards[0].results.result
    verdicts = sorted(
        (v for shard in shards for v in shard.results.result.verdicts),
        key=lambda v: (v.name, v.measurement.nodeid or ""),
    )
    unchecked = [u for shard in shards for u in shard.results.result.unchecked]
    covered = {nodeid for shard in shards for nodeid in shard.shard.part}
    given = sorted({shard.shard.index for shard in shards})
    absent = [index for index in range(1, shards[0].shard.total + 1) if index not in given]
    why = _absent(absent, shards[0].shard.total, unread)
    lost = [item for item in shards[0].shard.plan if item.nodeid not in covered]
    unchecked += [
        Unchecked(item.name, f"{item.name} ({item.nodeid}): in no shard's results: {why}", None, item.nodeid)
        for item in lost
    ]
    result = RunResult(
        verdicts=verdicts,
        unchecked=sorted(unchecked, key=lambda e: (e.name, e.nodeid or "")),
        changes=_budget_changes(first.changes) + _baseline_changes(shards, verdicts),
        baseline_dir=first.baseline_dir,
        base_ref=first.base_ref,
        front_end=first.front_end,
        projects=list(first.projects),
    )
    return result


def _absent(indices: Sequence[int], total: int, unread: Mapping[str, str]) -> str:
    shown = ", ".join(f"{index}/{total}" for index in indices)
    if not indices:
        return "no shard planned them"
    return f"the results of shard {shown} were not given" + (" or could not be read" if unread else "")


def _budget_changes(changes: Sequence[BudgetChange]) -> list[BudgetChange]:
    """The changes every shard reads from the configuration alone (budgets raised or removed since the base)."""
    return [change for change in changes if change.setting != "baseline"]


def _baseline_changes(shards: Sequence[ShardResults], verdicts: Sequence[Verdict]) -> list[BudgetChange]:
    """What the change did to each counted model's baseline, in the order of the models, as a whole run lists it."""
    order: dict[tuple[str, object], int] = {}
    for position, verdict in enumerate(verdicts):
        order.setdefault((verdict.name, verdict.measurement.origin), position)
    changes = [c for shard in shards for c in shard.results.result.changes if c.setting == "baseline"]
    return sorted(changes, key=lambda change: order.get((change.model, change.source), len(order)))


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > NAMES_SHOWN else "")


def _short(value: str | None) -> str:
    if value is None:
        return "absent"
    return repr(value[:19] + "..." if value.startswith("sha256:") else value)
