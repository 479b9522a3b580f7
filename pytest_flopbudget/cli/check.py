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
from typing import TextIO

from ..baseline import BaselineStore
from ..config import ModelEntry, Settings
from ..errors import FlopBudgetError
from ..formatting import CLI_UPDATE_HINT
from ..reporters import terminal
from ..run import Run, entry_nodeid
from ..run import require_baseline as require_baseline_in
from ..safe_text import json_safe
from .progress import Progress
from .project import load_project, select_models


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
    format: str = "text",
) -> int:
    """Count, judge, write baselines on update, print, and emit the CI outputs; returns the exit status.

    With `format="json"` stdout gets the results document (as `--report json:PATH` writes it) and nothing else:
    the text, and any GitHub workflow commands, go to `err` instead.
    """
    from ..reporters import ci

    document = out
    if format == "json":
        out = err

    specs = ci.resolve_specs(reports)  # a bad spec is a usage error before anything is counted
    settings = load_project(pyproject)
    entries = select_models(settings, names)
    setting = settings.require_baseline if require_baseline is None else require_baseline
    require = require_baseline_in(setting, os.environ)
    run = Run(BaselineStore(settings.baseline_dir), update=update, require_baseline=require)
    if not names:  # every pyproject model: files none of them uses are stale, or a marker test's
        run.find_stale(
            list(settings.models), complete=False,
            note="they may belong to marker tests, which only pytest sees: `pytest --flopbudget-update` removes "
            "the stale ones",
        )  # fmt: skip
    if base_ref:
        run.compare_with_base(settings, base_ref)
    count_into(run, entries, settings, err)
    result = run.finish()
    changes = result.changes
    out.write(terminal.run_text(result, update_hint=CLI_UPDATE_HINT))
    for line in terminal.error_lines(result):
        err.write(f"flopbudget: error: {line}\n")
    for change in changes:
        out.write(f"{change}\n")
    if format == "json":
        from ..reporters import json_report

        document.write(json_safe(json_report.dumps_results(result, root=ci.workspace_root(ci.OUTPUTS["json"]))))
    if result.update:
        return result.exit_code
    emitted = ci.emit(result, specs, stream=out)
    for line in emitted.errors:
        err.write(line + "\n")
    return result.exit_code if emitted.ok else 2


def count_into(run: Run, entries: Sequence[ModelEntry], settings: Settings, err: TextIO | None = None) -> None:
    with Progress(len(entries), getattr(err, "raw", err) or sys.stderr) as progress:
        for entry in entries:
            progress.start(entry.name)
            with contextlib.suppress(FlopBudgetError):  # recorded in the run as a ModelError
                run.count(entry, settings.root, entry_nodeid(entry, settings.root))
            progress.advance()
