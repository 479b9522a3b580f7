"""What a convention profile is: a name, a one-line title, a citation, and `apply(report) -> Explanation`.

Profiles are written against this protocol in more than one place (the LLM stacks' here, the peer counters' in
`_explain`), and found by name through `registry.py`. A profile is structural: any object with these attributes
is one, so a module that defines profiles need not import this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pytest_flopbudget._errors import FlopBudgetError

if TYPE_CHECKING:
    from pytest_flopbudget._explain.items import Explanation
    from pytest_flopbudget._report import Report


class Profile(Protocol):
    name: str  # "megatron"
    title: str  # one line
    source: str  # citation: file URL in the stack's repo, or paper

    def apply(self, report: Report) -> Explanation:
        """Explanation(peer=name, unit="flops", ours=exact FLOPs of the report, theirs=figure under this
        convention, items summing exactly to ours - theirs)."""
        ...


class ConventionError(FlopBudgetError):
    """A profile cannot read what its formula needs off a report (no token input, no attention): one line."""
