"""One part of a run across CI machines: which models a shard counts, and what it saw, as plain data.

A matrix of N jobs each runs `flopbudget check --shard K/N` (or pytest with `--flopbudget-shard K/N`) and
`flopbudget merge` judges their results as one run. This module is the partition and the record a shard leaves in
its results document (`Shard`): its index, the whole plan (every model the run counts, so the merge can name one
that no shard counted), its own part, and the fingerprints of what it read (configuration and baselines), so the
merge can refuse shards that did not see the same project. Nothing here reads a file or the environment beyond
what its caller hands it: the CLI and the plugin gather the facts, this module decides.

The partition is longest-processing-time-first over a weight per model, deterministic (ties by node id): every
shard computes the same plan from the same project, and no shard needs to hear from another. The weight is the
work a count does, read off the model's committed baseline (`work`): baselines record no wall time (a time would
rewrite every baseline on every update), but the op calls a count dispatched are what its time grows with.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._errors import ConfigError, FlopBudgetError
from pytest_flopbudget._version import __version__

if TYPE_CHECKING:
    from pytest_flopbudget._report import Report

#: The weight of loading a model and starting its count, in op calls: a model of two ops is not free to count.
LOAD_WORK = 100

#: Where `--shard auto` finds the index and total, in order: (index variable, total variable, first index). GitHub
#: Actions has none (its matrix passes `--shard ${{ matrix.shard }}/N`); GitLab's `parallel:` sets CI_NODE_*.
AUTO_SOURCES: tuple[tuple[str, str, int], ...] = (
    ("FLOPBUDGET_SHARD_INDEX", "FLOPBUDGET_SHARD_TOTAL", 1),
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),  # GitLab CI `parallel: N`
    ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),  # CircleCI `parallelism: N`
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),  # Buildkite `parallelism: N`
)
GRAMMAR = "K/N (this is shard K of N, 1 <= K <= N, e.g. 2/3) or auto"


class ShardError(ConfigError):
    """A `--shard` value that names no shard, or `auto` where the environment has no index and total."""


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` (1-based) of `total`."""

    index: int
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str, env: Mapping[str, str], option: str = "--shard") -> ShardSpec:
    """`K/N`, or `auto`: the first of `AUTO_SOURCES` whose two variables are set. Raises `ShardError`, one line."""
    raw = text.strip()
    if raw.lower() == "auto":
        for index_name, total_name, first in AUTO_SOURCES:
            index, total = env.get(index_name, "").strip(), env.get(total_name, "").strip()
            if index or total:
                shown = f"{index_name}={index!r} and {total_name}={total!r}"
                spec = _numbers(index, total, first)
                if spec is None:
                    last = total_name if first == 1 else f"{total_name} - 1"
                    raise ShardError(
                        f"{option} auto: {shown}: expected whole numbers, {index_name} from {first} to {last}"
                    )
                return spec
        names = ", ".join(f"{i} and {t}" for i, t, _ in AUTO_SOURCES)
        raise ShardError(
            f"{option} auto: no shard index and total in the environment (looked for {names}); set "
            f"FLOPBUDGET_SHARD_INDEX and FLOPBUDGET_SHARD_TOTAL, or give {option} K/N (GitHub Actions: "
            f"--shard ${{{{ matrix.shard }}}}/N)"
        )
    index, slash, total = raw.partition("/")
    spec = _numbers(index, total, 1) if slash else None
    if spec is None:
        raise ShardError(f"{option} {text!r}: expected {GRAMMAR}")
    return spec


def _numbers(index: str, total: str, first: int) -> ShardSpec | None:
    if not (index.isascii() and index.isdigit() and total.isascii() and total.isdigit()):
        return None
    spec = ShardSpec(int(index) + 1 - first, int(total))
    return spec if 1 <= spec.index <= spec.total <= 10_000 else None


def work(report: Report | None) -> int | None:
    """The work of counting a model, from its baseline: the op calls the count dispatched (counted and skipped),
    plus `LOAD_WORK`. None without a baseline."""
    if report is None:
        return None
    return LOAD_WORK + sum(op.calls for op in report.ops.values()) + report.skipped_calls


def partition(weights: Sequence[tuple[str, int | None]], total: int) -> list[list[str]]:
    """`total` parts of the keys (node ids) in `weights`, balanced by weight: the heaviest first, each to the part
    with the least work so far (the lowest index among equals). A key without a weight (no baseline yet) weighs
    the mean of the others. Each part keeps the keys in their given order."""
    known = [weight for _, weight in weights if weight is not None]
    default = round(sum(known) / len(known)) if known else LOAD_WORK
    weighed = [(key, default if weight is None else weight) for key, weight in weights]
    order = {key: position for position, (key, _) in enumerate(weighed)}
    parts: list[list[str]] = [[] for _ in range(total)]
    loads = [(0, index) for index in range(total)]
    for key, weight in sorted(weighed, key=lambda item: (-item[1], item[0])):
        load, index = heapq.heappop(loads)
        parts[index].append(key)
        heapq.heappush(loads, (load + weight, index))
    return [sorted(part, key=order.__getitem__) for part in parts]


@dataclass(frozen=True)
class PlanItem:
    """One model of the whole run: its name and the node id that tells it apart (`pyproject.toml::resnet50`, or
    a test's id under pytest)."""

    name: str
    nodeid: str


@dataclass(frozen=True)
class Shard:
    """What one shard's results document says about the run it is part of (the `shard` object of results/2).

    `configuration` maps what the shard read to its fingerprint or value (`pyproject.toml` -> sha256, `base-ref`
    -> the commit, `require-baseline`, the tool's version); `baselines` maps each baseline file to its sha256. The
    merge compares both across shards and names what differs.
    """

    index: int
    total: int
    plan: tuple[PlanItem, ...]
    part: tuple[str, ...]
    configuration: Mapping[str, str] = field(default_factory=dict)
    baselines: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.total}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total": self.total,
            "plan": [{"name": item.name, "nodeid": item.nodeid} for item in self.plan],
            "part": list(self.part),
            "configuration": dict(sorted(self.configuration.items())),
            "baselines": dict(sorted(self.baselines.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Shard:
        """The record as `to_dict` wrote it; a field of the wrong type raises ValueError naming it."""
        from pytest_flopbudget._json_fields import a_str, an_object

        index, total = data.get("index"), data.get("total")
        if not (isinstance(index, int) and isinstance(total, int) and 1 <= index <= total):
            raise ValueError("shard.index and shard.total must be whole numbers, 1 <= index <= total")
        plan, part = data.get("plan"), data.get("part")
        if not isinstance(plan, list) or not isinstance(part, list):
            raise ValueError("shard.plan and shard.part must be arrays")
        items = []
        for position, item in enumerate(plan):
            where = f"shard.plan[{position}]"
            entry = an_object(item, where)
            items.append(PlanItem(a_str(entry.get("name"), f"{where}.name"), a_str(entry.get("nodeid"), where)))
        configuration = an_object(data.get("configuration", {}), "shard.configuration")
        baselines = an_object(data.get("baselines", {}), "shard.baselines")
        return cls(
            index,
            total,
            tuple(items),
            tuple(a_str(key, f"shard.part[{i}]") for i, key in enumerate(part)),
            {key: a_str(value, f"shard.configuration.{key}") for key, value in configuration.items()},
            {key: a_str(value, f"shard.baselines.{key}") for key, value in baselines.items()},
        )


def plan(
    spec: ShardSpec,
    models: Sequence[PlanItem],
    baseline: Callable[[PlanItem], Report | None],
    *,
    configuration: Mapping[str, str],
    baselines: Mapping[str, str],
) -> Shard:
    """Shard `spec` of the run that counts `models` (node ids unique), each weighed by `work` on its baseline
    (`baseline(item)`; one that cannot be read weighs as one without)."""
    weights = []
    for item in models:
        try:
            report = baseline(item)
        except FlopBudgetError:  # its verdict says what is wrong with it; the plan only needs a weight
            report = None
        weights.append((item.nodeid, work(report)))
    part = set(partition(weights, spec.total)[spec.index - 1])
    chosen = tuple(item.nodeid for item in models if item.nodeid in part)
    return Shard(spec.index, spec.total, tuple(models), chosen, dict(configuration), dict(baselines))


def configuration(
    pyproject: Path | None, *, front_end: str, base: tuple[str, str] | None, require_baseline: bool
) -> dict[str, str]:
    """What a shard's verdicts depend on besides its models' counts: the tool, the front end, the pyproject file's
    bytes, the base (`--base-ref` REF, and the commit it named then) and whether baselines were required."""
    found: dict[str, str] = {"pytest-flopbudget": __version__, "front end": front_end}
    if pyproject is not None:
        found[display_path(str(pyproject))] = file_digest(pyproject)
    if base is not None:
        found["base-ref"] = f"{base[0]} at {base[1]}"
    found["require-baseline"] = "true" if require_baseline else "false"
    return found


def baseline_digests(directory: Path, suffix: str = ".json") -> dict[str, str]:
    """Each baseline file's sha256, by its path as outputs show it."""
    if not directory.is_dir():
        return {}
    files = sorted(p for p in directory.iterdir() if p.suffix == suffix and p.is_file())
    return {display_path(str(path)): file_digest(path) for path in files}


def file_digest(path: str | os.PathLike[str]) -> str:
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
