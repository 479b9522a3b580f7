"""GitHub Actions workflow commands: `::error file=…,line=…,title=…::message` on the line declaring the budget.

The runner parses these lines from the step's output and shows them on the pull request's diff, so the reviewer
sees the overrun next to the `flops = "8.3G"` it breaks. Two details decide whether that works:

* Escaping exactly as the Actions toolkit (`@actions/core`) does: in the message `%`, CR and LF; in property
  values additionally `:` and `,`. Anything else lets a model name end the command early, or start a new one.
* GitHub keeps at most 10 annotations of each level (error, warning, notice) per step and drops the rest
  silently, so the ten most important of each level are emitted, then one notice says how many were left out,
  and the left-out findings are printed as plain (escaped, single) log lines so nothing is lost.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_flopbudget._render.formatting import plural
from pytest_flopbudget._reporters.annotations import Annotation, relative_path
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._safe_text import safe_line, visible

#: GitHub's per-step limit for each of error, warning and notice annotations.
MAX_PER_LEVEL = 10
LEVELS = ("error", "warning", "notice")


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF are percent-encoded (the toolkit's `escapeData`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (`file=`, `title=`): as the message, plus `:` and `,` (the toolkit's `escapeProperty`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, *, file: str | None = None, line: int | None = None, title: str = "") -> str:
    """One workflow command line; properties that are empty are left out, as the toolkit does."""
    properties = [
        f"{key}={escape_property(visible(str(value), keep=_ESCAPED))}"
        for key, value in (("file", file), ("line", line), ("title", title))
        if value not in (None, "")
    ]
    head = f"::{level} " + ",".join(properties) if properties else f"::{level}"
    # CR and LF are escaped by the toolkit's rules; other control characters (ESC, bidi) are shown, not sent;
    # `##[` anywhere in a line is a legacy runner command, so it is broken up as every other output line does
    return f"{head}::{escape_data(visible(message, keep=_ESCAPED))}".replace("##[", "#\\x23[")


_ESCAPED = "\r\n"


@dataclass(frozen=True)
class LogLine:
    """One line of the step's log: one of our own workflow commands (escaped by `command`), or a plain line."""

    text: str
    command: bool


def workflow_commands(
    annotations: Sequence[Annotation], *, workspace: str | os.PathLike[str], limit: int = MAX_PER_LEVEL
) -> list[str]:
    """The lines to print: up to `limit` commands per level, most important first, then the overflow.

    `annotations` must already be in order of importance (see `annotations.collect`). Paths become relative to
    `workspace` (`GITHUB_WORKSPACE`); a file outside it is left out, since GitHub could not show it on the diff.
    """
    return [line.text for line in workflow_lines(annotations, workspace=workspace, limit=limit)]


def workflow_lines(
    annotations: Sequence[Annotation], *, workspace: str | os.PathLike[str], limit: int = MAX_PER_LEVEL
) -> list[LogLine]:
    """`workflow_commands`, each line saying whether it is a command: the writer sends a command as one, and every
    other line through `safe_line`, by that field (never by how the line starts)."""
    shown: list[LogLine] = []
    left_out: list[Annotation] = []
    used = dict.fromkeys(LEVELS, 0)
    for annotation in annotations:
        level = annotation.level if annotation.level in LEVELS else "warning"
        if used[level] >= limit:
            left_out.append(annotation)
            continue
        used[level] += 1
        shown.append(LogLine(_annotation_command(level, annotation, workspace), command=True))
    if left_out:
        shown.append(LogLine(_overflow_notice(left_out, limit), command=True))
        shown.extend(LogLine(_plain_line(annotation, workspace), command=False) for annotation in left_out)
    return shown


def left_out(annotations: Sequence[Annotation], limit: int = MAX_PER_LEVEL) -> dict[str, int]:
    """How many annotations of each level `workflow_commands` leaves out (levels with none are absent), errors
    first: what the job summary and the step's log count for the reviewer, who sees only the first `limit`."""
    counts = dict.fromkeys(LEVELS, 0)
    for annotation in annotations:
        counts[annotation.level if annotation.level in LEVELS else "warning"] += 1
    return {level: n - limit for level, n in counts.items() if n > limit}


def left_out_text(counts: dict[str, int]) -> str:
    """`12 more errors and 1 more warning not annotated`, or "" when nothing was left out."""
    if not counts:
        return ""
    return " and ".join(plural(n, f"more {level}") for level, n in counts.items()) + " not annotated"


# -- helpers ---------------------------------------------------------------------------------------------------------


def _annotation_command(level: str, annotation: Annotation, workspace: str | os.PathLike[str]) -> str:
    file = relative_path(annotation.source_file, workspace)
    line = annotation.source_line if file is not None else None
    return command(level, annotation.text, file=file, line=line, title=annotation.title)


def _overflow_notice(left_out: Sequence[Annotation], limit: int) -> str:
    counts: dict[str, int] = {}
    for annotation in left_out:
        counts[annotation.level] = counts.get(annotation.level, 0) + 1
    parts = [f"{n} {level}{'s' if n != 1 else ''}" for level, n in sorted(counts.items())]
    total = len(left_out)
    message = (
        f"{plural(total, 'more flopbudget finding')} not annotated ({', '.join(parts)}): GitHub "
        f"shows at most {limit} annotations of each kind per step. They are listed in this step's log and the "
        f"job summary."
    )
    return command("notice", message, title="flopbudget: more findings")


def _plain_line(annotation: Annotation, workspace: str | os.PathLike[str]) -> str:
    """A log line that cannot be read as a workflow command: it starts with `flopbudget` and stays on one line
    (CR and LF shown as `\\r` and `\\n`), so a model name cannot start a command of its own."""
    file = relative_path(annotation.source_file, workspace)
    where = f"{file}:{annotation.source_line}: " if file and annotation.source_line else (f"{file}: " if file else "")
    one_line = annotation.text.replace("\r", "\\r").replace("\n", "\\n")
    return f"flopbudget: {annotation.level}: {where}{one_line}"


class GitHubOutput:
    """`github`: workflow commands on the step's output and the job summary in `$GITHUB_STEP_SUMMARY`."""

    workspace_variables = ("GITHUB_WORKSPACE",)

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        from pytest_flopbudget._reporters import markdown

        if findings.empty:
            return
        lines = workflow_lines(findings.annotations, workspace=context.root)
        if lines:
            # A command is only recognised at the start of a line, and the caller's output may end mid-line
            # (pytest's progress `[100%]` has no newline yet at session finish): start on a fresh line.
            stream = context.stream
            write_command = getattr(stream, "write_command", stream.write)
            stream.write("\n")
            for line in lines:
                # our own commands, escaped by `command`; every other line through `safe_line`
                if line.command:
                    write_command(line.text + "\n")
                else:
                    stream.write(safe_line(line.text) + "\n")
        summary_path = context.env.get("GITHUB_STEP_SUMMARY")
        not_annotated = left_out_text(left_out(findings.annotations))
        if not_annotated:  # the count the reviewer needs, after the left-out findings' plain lines
            where = "see the job summary" if summary_path else "listed above"
            stream.write(f"flopbudget: {not_annotated}: {where}\n")
        if not summary_path:
            return
        room = markdown.room_left(summary_path)
        if room < markdown.MIN_ROOM:  # this step's summary is already at GitHub's limit: leave it alone
            return
        cap = f"GitHub shows at most {MAX_PER_LEVEL} annotations of each kind per step; every model is in the table"
        notes = [f"_{not_annotated}: {cap}._", ""] if not_annotated else []
        text = markdown.summary_of(findings.result, workspace=context.root, max_bytes=room, notes=notes)
        markdown.append_step_summary(summary_path, text)
