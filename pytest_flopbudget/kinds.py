"""Strings that are really one of a few kinds: a metric, a finding's kind, a budget change.

They stay strings on the outside (JSON, baselines, reports and equality with plain strings are unchanged), and the
code names them once: a typo in `Metric.SKIPED` fails at import, a typo in `"skiped"` never did.
"""

from __future__ import annotations

from enum import Enum


class Kind(str, Enum):
    """A str enum that compares, hashes, prints and serialises as its value."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Metric(Kind):
    """What a budget can cap. `skipped` is the number of op calls that could not be counted."""

    FLOPS = "flops"
    MACS = "macs"
    PARAMS = "params"
    SKIPPED = "skipped"


class ChangeKind(Kind):
    """How a pull request changed a budget, as `--base-ref` reports it."""

    RAISED = "raised"
    REMOVED = "removed"
    #: `[tool.flopbudget]` at the base ref does not validate, so nothing could be compared.
    UNREADABLE = "unreadable"
    #: The change rewrote the model's baseline file: the comparison uses the base's, so growth stays visible.
    BASELINE_CHANGED = "baseline changed"
    #: The change deleted the model's baseline file.
    BASELINE_DELETED = "baseline deleted"
    #: The model is new in this change: there is nothing at the base to compare it with.
    MODEL_ADDED = "added"
