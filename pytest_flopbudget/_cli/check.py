"""`flopbudget check`: every pyproject model against its budget and baseline, through the shared `Run`.

Counting, judging, baselines and every output are the same code pytest runs (`run.Run`, `reporters`), so a model
fails the pre-commit hook exactly when it fails `pytest`, with the same words and the same report files. This
module only picks the models, shows progress, and prints.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pytest_flopbudget._cache import counter as recorded_count
from pytest_flopbudget._cache.counter import CachedCounter, IsolatedCounter
from pytest_flopbudget._cache.store import CACHE_DIR_NAME, CountCache, cache_enabled
from pytest_flopbudget._cli import parallel
from pytest_flopbudget._cli.progress import Progress
from pytest_flopbudget._cli.project import load_project, select_models
from pytest_flopbudget._config.pyproject import ModelEntry, Settings
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._run import Counter, InProcessCounter, Run, entry_nodeid
from pytest_flopbudget._run import require_baseline as require_baseline_in
from pytest_flopbudget._safe_text import json_safe

if TYPE_CHECKING:
    from pytest_flopbudget._judge.verdict import Verdict


def run_check(
    *,
    pyproject: str | None,
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
    conventions: Sequence[str] = (),
) -> int:
    """Count, judge, write baselines on update, print, and emit the CI outputs; returns the exit status.

    With `format="json"` stdout gets the results document (as `--report json:PATH` writes it) and nothing else:
    the text, and any GitHub workflow commands, go to `err` instead. `cache` is True/False (`--cache`,
    `--no-cache`), "verify" (`--cache=verify`: recount everything and fail where a record disagrees) or None.
    `shard` (`--shard K/N` or `auto`) counts this job's part only and records the plan in the JSON results, for
    `flopbudget merge`; the merge, not a shard, writes the GitHub annotations and job summary.
    `jobs` (`-j`) is how many models are counted at once (`cli/parallel.py`).
    """
    from pytest_flopbudget._cli import shard as sharding
    from pytest_flopbudget._reporters import ci

    document = out
    if format == "json":
        out = err

    # a bad spec is a usage error before anything is counted; a shard leaves the GitHub output to the merge
    specs = ci.resolve_specs([*reports, *(["none"] if shard is not None else [])])
    from pytest_flopbudget._cli.count import convention_profiles

    profiles = convention_profiles(list(conventions))  # a typo costs no count
    spec = sharding.shard_spec(shard, update=update, specs=specs, format=format, env=os.environ)
    settings = load_project(pyproject)
    entries = select_models(settings, names)
    setting = settings.require_baseline if require_baseline is None else require_baseline
    require = require_baseline_in(setting, os.environ)
    run = Run(BaselineStore(settings.baseline_dir), update=update, require_baseline=require, front_end=CLI)
    # No stale baselines here: a file no pyproject model uses may be a marker test's, which only a whole pytest run
    # sees; listing it on every commit would be a warning about what this command cannot judge.
    if base_ref:
        run.compare_with_base(settings, base_ref)
    plan = None
    if spec is not None:
        entries, plan = sharding.select_shard(spec, entries, settings, run)
    counter = _counter(settings, cache, cache_dir)
    counter.plan(entries, settings.root)
    count_into(run, entries, settings, err, counter, jobs)
    for line in counter.notes(len(entries)):
        err.write(line + "\n")
    result = run.finish()  # a mismatch is a violation on its model's verdict: every output, and the exit code
    result.shard = plan
    ci.emit(result, [ci.TERMINAL], stream=out, errors=err)
    under = _under_conventions(result.verdicts, profiles, out)
    for name, difference in counter.mismatches:
        err.write(f"flopbudget: error: {name}: its cached count differs from a fresh count: {difference}\n")
    if format == "json":
        from pytest_flopbudget._reporters import json_report

        text = json_report.dumps_results(result, root=ci.workspace_root(ci.output("json")))
        if under:  # `--convention`: each model's figures under the conventions, beside the results
            import json

            data = json.loads(text)
            data["under_conventions"] = under
            text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        document.write(json_safe(text))
    if result.update:
        return result.exit_code
    emitted = ci.emit(result, specs, stream=out)
    for line in emitted.errors:
        err.write(line + "\n")
    return result.exit_code if emitted.ok else 2


def _under_conventions(verdicts: Sequence[Verdict], profiles: Sequence[Any], out: TextIO) -> dict[str, Any]:
    """`--convention NAME`: each counted model's FLOPs under each convention, itemised, printed after the results;
    returned by model for the JSON document. A convention that cannot price a model is one line, not a failure."""
    from pytest_flopbudget._conventions.text import convention_text, conventions_data

    found: dict[str, Any] = {}
    for verdict in verdicts if profiles else ():
        explanations = []
        for profile in profiles:
            try:
                explanations.append(profile.apply(verdict.report))
            except FlopBudgetError as exc:
                out.write(f"{verdict.name}: {exc}\n")
        for explanation in explanations:
            out.write(f"{verdict.name}: " + convention_text(explanation))
        found[verdict.name] = conventions_data(explanations)
    return found


def count_into(
    run: Run,
    entries: Sequence[ModelEntry],
    settings: Settings,
    err: TextIO | None = None,
    counter: Counter | None = None,
    jobs: int = 1,
) -> None:
    counter = counter if counter is not None else InProcessCounter()
    with Progress(len(entries), getattr(err, "raw", err) or sys.stderr) as progress:
        counter.fork_guard = progress.drawing
        parallel.count_ahead(counter, jobs, progress, err)  # -j: the models counted now, then taken in order
        for entry in entries:
            progress.start(entry.name)
            with contextlib.suppress(FlopBudgetError):  # recorded in the run as Unchecked
                measurement = run.count(entry, settings.root, entry_nodeid(entry, settings.root), counter)
                measurement.cache_mismatch = counter.mismatch_of(entry.name)
            progress.advance()


def _counter(settings: Settings, cache: bool | str | None, cache_dir: str | None) -> Counter:
    """How each model is counted: in a child process of its own where there is fork, through the count cache
    when it is on (`--cache`/`--no-cache`/`--cache=verify`, `--cache-dir`, `FLOPBUDGET_CACHE_DIR`); where there
    is no fork, every model in this process and no cache (`InProcessCounter`)."""
    if not recorded_count.can_fork():
        return InProcessCounter()
    verify = cache == "verify"
    if not (verify or cache_enabled(cache if isinstance(cache, bool) else None, os.environ)):
        return IsolatedCounter(settings.root, record=False)
    directory = cache_dir or os.environ.get("FLOPBUDGET_CACHE_DIR") or str(settings.root / CACHE_DIR_NAME)
    store = CountCache.for_user(Path(directory).resolve(), os.environ)
    return CachedCounter(store, IsolatedCounter(settings.root, record=True), verify=verify)
