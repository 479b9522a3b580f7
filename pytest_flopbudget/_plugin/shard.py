"""`--flopbudget-shard K/N`: this job runs its part of the budget tests, and its results say so, for the merge.

The budget tests are the pyproject models' items and every test with a `flop_budget` marker or the `flopbudget`
fixture; each shard of a CI matrix collects the same suite, computes the same partition of them (`_shard.plan`,
weighed by the work their baselines record) and deselects the others, as `-k` would. Other tests are left alone:
which of them run where is the project's choice. The record of the plan travels in the run's result to the JSON
results (`--flopbudget-report json:PATH`), which `flopbudget merge` judges as one run with the other shards'.
Under pytest-xdist every worker collects, so every worker computes the record and sends it to the controller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._front_ends import PYTEST
from pytest_flopbudget._plugin.items import ModelItem
from pytest_flopbudget._plugin.marker import owned_model
from pytest_flopbudget._plugin.options import Options
from pytest_flopbudget._plugin.state import SessionState
from pytest_flopbudget._reporters.ci import ReportSpec
from pytest_flopbudget._shard import PlanItem, ShardSpec, baseline_digests, configuration, parse_shard, plan


def shard_spec(options: Options, specs: Sequence[ReportSpec]) -> ShardSpec | None:
    """The shard `--flopbudget-shard` names (None without it); a shard writes its results for the merge and
    records no baselines. Raises `ConfigError` (a usage error) otherwise."""
    if options.shard is None:
        return None
    spec = parse_shard(options.shard, os.environ, option="--flopbudget-shard")
    if options.update:
        raise ConfigError(
            "--flopbudget-shard with --flopbudget-update: record baselines in one run of every test "
            "(pytest --flopbudget-update)"
        )
    if not any(s.kind == "json" for s in specs):
        raise ConfigError(
            f"--flopbudget-shard {options.shard}: the shard's results go nowhere: add "
            "--flopbudget-report json:PATH, which flopbudget merge reads"
        )
    return spec


class ShardSelection:
    """Registered where `--flopbudget-shard` is given: after every other plugin has chosen the tests, keeps this
    shard's part of the budget tests and records the plan on the session."""

    def __init__(self, session: SessionState, spec: ShardSpec) -> None:
        self.session = session
        self.spec = spec

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        state = self.session
        budget = [(item, name) for item in items if (name := _model_of(item)) is not None]
        run = state.run
        base = (run.base.revision.ref, run.base.revision.commit) if run.base is not None else None
        record = plan(
            self.spec,
            [PlanItem(name, item.nodeid) for item, name in budget],
            lambda item: state.store.load(item.name),
            configuration=configuration(
                state.settings.pyproject, front_end=PYTEST.name, base=base, require_baseline=run.require_baseline
            ),
            baselines=baseline_digests(state.store.directory),
        )
        state.shard = record
        part = set(record.part)
        others = [item for item, _ in budget if item.nodeid not in part]
        if others:
            dropped = set(map(id, others))
            items[:] = [item for item in items if id(item) not in dropped]
            config.hook.pytest_deselected(items=others)


def _model_of(item: pytest.Item) -> str | None:
    """The model a budget test counts (a pyproject item's entry, a marker's `name=` or the test's own name), or
    None for a test that is not a budget test."""
    if isinstance(item, ModelItem):
        return item.entry.name
    return owned_model(item)
