"""Errors that reach users as one line.

Every failure caused by the user's input (a model, a shape, a config key, a budget string) is raised as a
`FlopBudgetError` whose message names what to change. Front ends print `str(error)` and never a traceback, so the
message must stand on its own.
"""

from __future__ import annotations


class FlopBudgetError(Exception):
    """A problem with what the user gave us, phrased so they can fix it."""


class CountingError(FlopBudgetError):
    """The model could not be counted (it raised, or the tracing machinery could not run it)."""


class ConfigError(FlopBudgetError):
    """`[tool.flopbudget]`, a marker argument or a budget string is malformed."""


class BaselineError(FlopBudgetError):
    """A baseline file is unreadable, corrupt or was written by something else."""


class FlopBudgetWarning(UserWarning):
    """A budget that cannot be checked as written (e.g. a model counted in a test with no budget): public at the
    package root, so `-W error::pytest_flopbudget.FlopBudgetWarning` turns it into an error."""
