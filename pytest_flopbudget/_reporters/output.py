"""The interface every CI and file output implements, and what it is given.

One run gives one `RunResult`; every output reads it through this interface, the terminal text as much as the CI
files, and `reporters/ci.py` dispatches them. The annotations (what to say about which model, in order of
importance) are derived from it once and shared, so the GitHub lines, the GitLab issues and the Markdown summary
never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_flopbudget._reporters.annotations import Annotation
    from pytest_flopbudget._run import RunResult


class SupportsWrite(Protocol):
    def write(self, text: str, /) -> object: ...


@dataclass(frozen=True)
class Findings:
    """One run's result and the annotations derived from it."""

    result: RunResult
    annotations: Sequence[Annotation] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not (self.result.verdicts or self.result.changes or self.result.unchecked)


@dataclass(frozen=True)
class OutputContext:
    """Where an output writes: `root` is the directory paths are made relative to, `stream` where text goes
    (stdout), `errors` where a front end's error lines go (stderr). Who started the run, and so how a hint names
    the update command, is the result's `front_end`."""

    root: str
    env: Mapping[str, str]
    stream: SupportsWrite
    errors: SupportsWrite


class Output(Protocol):
    """One output kind (`github`, `gitlab:PATH`, the terminal text, ...): writes `findings`, raises OSError when it
    cannot write."""

    @property
    def workspace_variables(self) -> Sequence[str]:
        """Environment variables naming the CI checkout that paths in this output are relative to, in order."""
        ...

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None: ...
