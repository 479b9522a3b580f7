"""The front ends that start a run (`pytest` and the `flopbudget` CLI), named once, with what outputs say of them.

An output needs to know who started the run in exactly two ways: which command records new baselines (the words
of its "to accept" and "no baseline" hints), and whether each failure was already shown with its test (pytest) or
belongs in the run's terminal text (the CLI). That is a `FrontEnd`, carried by the run and its `RunResult` and
handed to the renderers as it is, so no reporter takes a hint's words and compares them to tell the front ends
apart, or asks which program it runs in.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The command that records new baselines, as each front end tells it.
CLI_UPDATE_HINT = "`flopbudget check --update`"
PYTEST_UPDATE_HINT = "`pytest --flopbudget-update`"
#: What outputs read outside either front end say (CI files, the job summary, a missing baseline): both commands,
#: so that the same run gives the same files from either front end.
ANY_UPDATE_HINT = f"{CLI_UPDATE_HINT} or {PYTEST_UPDATE_HINT}"


@dataclass(frozen=True)
class FrontEnd:
    """Who started a run, as far as its outputs need to know."""

    name: str
    #: The command that records new baselines, in this front end's words.
    update_hint: str
    #: True where each failure is shown with the test that failed (pytest): the run's terminal text is then the
    #: summary alone; the CLI prints every failure, with its per-layer diff, in its terminal text.
    shows_failures: bool


CLI = FrontEnd("flopbudget", CLI_UPDATE_HINT, shows_failures=False)
PYTEST = FrontEnd("pytest", PYTEST_UPDATE_HINT, shows_failures=True)
#: The words of an output read outside either front end (the job summary, the pull-request comment): both commands,
#: so that the same run gives the same file from either front end. It starts no run.
EITHER = FrontEnd("flopbudget or pytest", ANY_UPDATE_HINT, shows_failures=False)
