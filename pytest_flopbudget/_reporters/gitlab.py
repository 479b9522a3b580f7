"""GitLab Code Quality report (`artifacts: reports: codequality:`): one issue per flopbudget finding.

GitLab reads a JSON array of objects with `description`, `check_name`, `fingerprint`, `severity` (`info`,
`minor`, `major`, `critical` or `blocker`) and `location` (`path` relative to the repository, `lines.begin`), a
subset of the Code Climate issue format; `type` and `categories` are added so the file is a valid Code Climate
report too. The merge request widget compares the fingerprints of the source and target branches to say which
issues are new and which were fixed, so a fingerprint depends only on what the finding is about (model, metric,
kind), never on the figures or the line, which change from run to run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._reporters.annotations import Annotation, relative_path
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._safe_text import visible

#: Finding kind -> Code Quality severity. A broken budget fails the pipeline: critical, as a failing check.
SEVERITY = {
    "unchecked": "critical",
    "ceiling": "critical",
    "increase": "critical",
    "degree": "critical",
    "point ceiling": "critical",
    "baseline": "major",
    "raised": "major",
    "removed": "major",
    "unreadable": "major",
    "growth": "minor",
    "skipped": "info",
}
#: Where an issue points (line 1) when nothing inside the repository declares it: GitLab requires a location.
FALLBACK_PATH = "pyproject.toml"


def code_quality(annotations: Sequence[Annotation], *, root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The report's issues, in the order given; paths relative to `root` (the repository, `CI_PROJECT_DIR`).

    Fingerprints are unique within the report: when two findings are about the same model, metric and kind
    (two tests counting one model), the test id is mixed in, then a counter.
    """
    issues = []
    seen: set[str] = set()
    for annotation in annotations:
        fingerprint = _unique(fingerprint_of(annotation), annotation, seen)
        path = relative_path(annotation.source_file, root)
        line = annotation.source_line if path is not None else None
        issues.append(
            {
                "type": "issue",
                "check_name": check_name(annotation),
                "description": _description(annotation),
                "categories": ["Performance"],
                "severity": SEVERITY.get(annotation.kind, "major" if annotation.level == "error" else "minor"),
                "fingerprint": fingerprint,
                "location": {"path": path or FALLBACK_PATH, "lines": {"begin": max(line or 1, 1)}},
            }
        )
    return issues


def write_code_quality(
    annotations: Sequence[Annotation], path: str | os.PathLike[str], *, root: str | os.PathLike[str]
) -> int:
    """Write the report to `path` (atomically, parents created); returns the number of issues.

    An empty array is written when there is nothing to report, so GitLab marks earlier issues as fixed.
    """
    issues = code_quality(annotations, root=root)
    write_atomic(Path(path), json.dumps(issues, indent=2, ensure_ascii=False) + "\n")
    return len(issues)


def check_name(annotation: Annotation) -> str:
    """`flopbudget/ceiling/flops`: what was checked, stable across runs."""
    parts = ["flopbudget", annotation.kind]
    if annotation.subject:
        parts.append(annotation.subject)
    return "/".join(parts)


def fingerprint_of(annotation: Annotation) -> str:
    """sha256 of (model, metric, kind): the same finding has the same fingerprint in every run and branch."""
    key = "\0".join(("flopbudget", annotation.model, annotation.subject or "", annotation.kind))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _unique(fingerprint: str, annotation: Annotation, seen: set[str]) -> str:
    candidate = fingerprint
    if candidate in seen and annotation.nodeid:
        candidate = hashlib.sha256(f"{fingerprint}\0{annotation.nodeid}".encode()).hexdigest()
    counter = 1
    while candidate in seen:
        counter += 1
        candidate = hashlib.sha256(f"{fingerprint}\0{counter}".encode()).hexdigest()
    seen.add(candidate)
    return candidate


def _description(annotation: Annotation) -> str:
    """The one-line message, then the layer hint after `; ` (the widget shows one line per issue), through the
    safe-text filter: a reviewer reads it in the merge request, where a bidi override would reorder it."""
    return visible("; ".join((annotation.message, *annotation.details)))


class GitLabOutput:
    """`gitlab:PATH`: a Code Quality report, one issue per model and kind."""

    workspace_variables = ("CI_PROJECT_DIR",)

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_code_quality(findings.annotations, path, root=context.root)
