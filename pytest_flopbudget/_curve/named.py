"""The public `count_curve(model)`: a pyproject model's formula, for code that wants it without the CLI.

The curve machinery takes a validated entry and the project's root; a user names the model as `flopbudget curve`
does, and the project is found as the CLI finds it (the nearest pyproject.toml, or the file given).
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_flopbudget._config.pyproject import find_pyproject, load_settings
from pytest_flopbudget._curve.engine import count_curve as count_entry_curve
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._report import Report


def count_curve(model: str, pyproject: str | os.PathLike[str] | None = None) -> tuple[Report, Formula]:
    """The count of `[tool.flopbudget.models.<model>]` at its `dims` and each metric's formula over its `curve`.

    `pyproject` is the file to read (default: the nearest pyproject.toml above the working directory). Raises
    `FlopBudgetError` with one line for a missing file, an unknown model, a model without a curve or a failed count.
    """
    path = Path(pyproject) if pyproject is not None else find_pyproject(Path.cwd())
    if path is None or not path.is_file():
        raise ConfigError(
            f"count_curve(pyproject={pyproject!r}): no such file"
            if pyproject
            else f"count_curve(): no pyproject.toml in {Path.cwd()} or any parent directory"
        )
    settings = load_settings(path)
    entry = settings.models.get(model) or settings.models.get(model.strip())
    if entry is None:
        known = ", ".join(settings.models) or "none"
        raise ConfigError(f"count_curve({model!r}): no such model in {path} [tool.flopbudget.models] (models: {known})")
    return count_entry_curve(entry, settings.root)
