"""The plugin's command-line options and ini key, and what they resolve to with `[tool.flopbudget]`.

Every `--flopbudget-*` option overrides its pyproject setting; `read_options` applies that precedence once, so
the hooks read one `Options` instead of asking pytest and the settings in turn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_flopbudget._config.pyproject import Settings
from pytest_flopbudget._reporters import ci
from pytest_flopbudget._run import require_baseline


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flopbudget", "compute budgets (pytest-flopbudget)")
    group.addoption(
        "--flopbudget-update",
        action="store_true",
        default=False,
        help="write the baseline of every counted model (baseline-dir/<name>.json) and do not fail on budgets",
    )
    group.addoption(
        "--flopbudget-no-models",
        action="store_false",
        dest="flopbudget_models",
        default=None,
        help="do not collect the models of [tool.flopbudget.models] as test items (overrides collect-models)",
    )
    group.addoption(
        "--flopbudget-models",
        action="store_true",
        dest="flopbudget_models",
        default=None,
        help="collect the models of [tool.flopbudget.models] as test items even if collect-models = false",
    )
    group.addoption(
        "--flopbudget-baseline-dir",
        default=None,
        metavar="DIR",
        help="directory of baseline files (overrides baseline-dir; relative to the current directory)",
    )
    group.addoption("--flopbudget-report", action="append", default=[], metavar="SPEC", help=ci.SPEC_HELP)
    group.addoption(
        "--flopbudget-require-baseline",
        action="store_true",
        default=None,
        help="fail a budgeted model that has no committed baseline (default: require-baseline in pyproject, else "
        "on when the CI environment variable is set)",
    )
    group.addoption(
        "--flopbudget-base-ref",
        default=None,
        metavar="REF",
        help="compare every model with its baseline at the git ref REF (e.g. origin/main) and report every budget "
        "or baseline the change raised, removed or rewrote",
    )
    group.addoption(
        "--flopbudget-shard",
        default=None,
        metavar="K/N",
        help="run only shard K of N of the budget tests (pyproject models, flop_budget markers, the flopbudget "
        "fixture), balanced by the work their baselines record, and write the part's results with "
        "--flopbudget-report json:PATH for `flopbudget merge`; auto: K and N from FLOPBUDGET_SHARD_INDEX/_TOTAL or "
        "GitLab's CI_NODE_INDEX/CI_NODE_TOTAL; other tests are left alone",
    )
    parser.addini("flopbudget_report", ci.SPEC_HELP, type="args", default=[])


@dataclass(frozen=True)
class Options:
    """The options of one session, pyproject settings applied where no option was given."""

    update: bool
    collect_models: bool
    baseline_dir: Path
    require_baseline: bool
    base_ref: str | None
    #: the `flopbudget_report` ini key's specs, then the `--flopbudget-report` values (unparsed: a bad one is a
    #: usage error). The command line adds to the configured outputs rather than replacing them, as specs combine
    #: everywhere (`none` turns off only the automatic GitHub output): a CI step that asks for one more file, the
    #: action's comment body, must not silently drop the project's own.
    reports: list[str]
    #: `--flopbudget-shard K/N` or `auto`, unparsed (a bad one is a usage error); None for a whole run.
    shard: str | None = None


def read_options(config: pytest.Config, settings: Settings) -> Options:
    models = config.getoption("flopbudget_models")
    directory = config.getoption("flopbudget_baseline_dir")
    required = config.getoption("flopbudget_require_baseline")
    return Options(
        update=config.getoption("flopbudget_update"),
        collect_models=settings.collect_models if models is None else models,
        baseline_dir=config.invocation_params.dir / directory if directory else settings.baseline_dir,
        require_baseline=require_baseline(settings.require_baseline if required is None else required, os.environ),
        base_ref=config.getoption("flopbudget_base_ref"),
        reports=[*config.getini("flopbudget_report"), *config.getoption("flopbudget_report")],
        shard=config.getoption("flopbudget_shard"),
    )


def find_pyproject(config: pytest.Config) -> Path | None:
    """The pyproject.toml pytest was configured from, else the one in the rootdir, if any."""
    inipath = config.inipath
    if inipath is not None and inipath.name == "pyproject.toml":
        return inipath.resolve()
    candidate = config.rootpath / "pyproject.toml"
    return candidate.resolve() if candidate.is_file() else None


def explicit_args(config: pytest.Config) -> bool:
    """True when the command line names what to run (then pyproject models join only if pyproject.toml is named)."""
    source = getattr(config, "args_source", None)
    args_source = getattr(pytest.Config, "ArgsSource", None)
    return source is not None and args_source is not None and source == args_source.ARGS
