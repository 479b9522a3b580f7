"""`flopbudget diff`: the per-layer change of every metric since the baseline, without judging.

The models go through the same `Run` as `flopbudget check`; the text is the `diff` output (reporters/layer_diff.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from pytest_flopbudget.config.pyproject import ModelEntry, Settings
from pytest_flopbudget.front_ends import CLI
from pytest_flopbudget.judge.baseline import BaselineStore

from ..reporters import ci, layer_diff
from ..run import EXIT_ERROR, EXIT_OK, Run
from .check import count_into
from .project import load_project, select_models


def run_diff(*, pyproject: str | None, names: Sequence[str], out: TextIO, err: TextIO) -> int:
    settings = load_project(pyproject)
    return diff_models(select_models(settings, names), settings, out, err)


def diff_models(entries: Sequence[ModelEntry], settings: Settings, out: TextIO, err: TextIO | None = None) -> int:
    """Print the per-layer change of every metric against the baseline; no budget is looked at."""
    run = Run(BaselineStore(settings.baseline_dir), front_end=CLI)
    count_into(run, entries, settings, err)
    result = run.finish()
    # the models in the order asked for (the run sorts them by name for the reports)
    position = {entry.name: index for index, entry in enumerate(entries)}
    result.verdicts.sort(key=lambda verdict: position[verdict.name])
    result.unchecked.sort(key=lambda unchecked: position[unchecked.name])
    ci.emit(result, [ci.LAYER_DIFF], stream=out, errors=err)
    return EXIT_ERROR if layer_diff.has_errors(result) else EXIT_OK
