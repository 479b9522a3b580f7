"""Find the project the CLI works on and pick its models by name, failing with one line that says what to fix.

Separate from `config` (which validates a file it is given) because the CLI has questions of its own: where is
pyproject.toml when the user only typed `flopbudget check`, is there a `[tool.flopbudget]` table at all, and did
`flopbudget check resnt50` mean `resnet50`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._config.pyproject import ModelEntry, Settings, find_pyproject, load_settings
from pytest_flopbudget._errors import ConfigError

EXAMPLE_TABLE = (
    '[tool.flopbudget.models.NAME] with target = "package.module:factory", inputs = [[1, 3, 224, 224]] '
    'and a budget such as flops = "4.1G"'
)


class UsageError(ConfigError):
    """A command line the CLI cannot act on (missing project, unknown model, bad `--input`): exit status 2."""


def load_project(pyproject: str | None, start: Path | None = None) -> Settings:
    """The validated settings of `pyproject` (a path given with `--pyproject`) or of the nearest pyproject.toml.

    A project without a `[tool.flopbudget]` table is an error here, unlike in the pytest plugin (where most test
    suites have no budgets): `flopbudget check` with nothing to check is a mistake in the set-up, and passing
    silently would hide it.
    """
    start = start or Path.cwd()
    if pyproject is not None:
        path = Path(pyproject)
        if not path.is_file():
            raise UsageError(f"--pyproject {pyproject}: no such file")
    else:
        found = find_pyproject(start)
        if found is None:
            raise UsageError(
                f"no pyproject.toml in {start.resolve()} or any parent directory: run flopbudget inside your "
                f"project, or name the file with --pyproject PATH"
            )
        path = found
    settings = load_settings(path)
    shown = display_path(str(settings.pyproject or path))
    if settings.source.file is None:  # config.py leaves the Location empty when the table is absent
        raise UsageError(f"{shown} has no [tool.flopbudget] table: add {EXAMPLE_TABLE}")
    return settings


def select_models(settings: Settings, names: Sequence[str]) -> list[ModelEntry]:
    """The entries named on the command line (all of them when none is named), in the order given.

    Every name is checked before anything is counted, so a typo fails in a fraction of a second instead of after
    the other models have been counted.
    """
    shown = display_path(str(settings.pyproject))
    if not settings.models:
        raise UsageError(f"{shown}: [tool.flopbudget] declares no models: add {EXAMPLE_TABLE}")
    if not names:
        return list(settings.models.values())
    found = [model_named(settings, name) for name in names]
    for name, entry in zip(names, found):
        if entry is None:
            raise UsageError(f"{shown}: {unknown_model(name, settings)}")
    return list({entry.name: entry for entry in found if entry is not None}.values())


def model_named(settings: Settings, name: str) -> ModelEntry | None:
    """The model `name` names: the one of that exact name, else the one the name names without the spaces around
    it (a quoting slip: `flopbudget check "  net"`; a TOML key may hold spaces, so an exact name wins)."""
    return settings.models.get(name) or settings.models.get(name.strip())


def unknown_model(name: str, settings: Settings) -> str:
    """`no model 'resnt50' in [tool.flopbudget.models]; did you mean 'resnet50'? (models: resnet18, resnet50)`."""
    known = list(settings.models)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(known) if len(known) <= 12 else ", ".join(known[:12]) + f", ... ({len(known)} in all)"
    return f"no model {name!r} in [tool.flopbudget.models]{hint} (models: {listed or 'none'})"
