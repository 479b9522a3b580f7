"""One pull-request comment from the bodies of several runs: the action's `flopbudget check` and its pytest run.

The action gates the pyproject models with `flopbudget check` and the budgets declared in tests with a pytest run
of its own; each writes a comment body (`comment:PATH`), and the reviewer gets one comment holding both. With one
body there is nothing to merge and it is posted as written. With more, one marker line goes on top and each body
goes under a heading naming the run it is from, without its own marker line.

GitHub refuses a comment over 65,536 characters, and each body alone may already be close to it, so bodies are
shared the room fairly: a body that fits in its share is kept whole, and the larger ones are cut as the summary
is cut (`markdown.truncate`): whole lines and whole `<details>` blocks from the end, never inside one, then
`markdown.cut_note` saying how many table rows and failure details were left out (counting those an earlier cut
of the same body left out). The bodies are text by now (the posting step has the token and imports no project
code), so this works on the lines the summary writes, not on the run's result.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_flopbudget._reporters import markdown

#: What a cut comment's note says it stayed under (the summary's own note names its 1 MiB limit).
COMMENT_LIMIT = "GitHub's limit for a comment"
#: Kept free in a cut body for its note and the `… N more rows` row.
_NOTE_ROOM = 400
#: Below this much room a body keeps its headline and little else: no share is made smaller.
_MIN_SHARE = 1024

_EARLIER_NOTE = re.compile(r"^_Summary cut to stay under .*: (?P<what>.*) left out; the job log has them all\._$")
_ROWS = re.compile(r"\b(\d+) table rows?\b")
_BLOCKS = re.compile(r"\b(\d+) failure details?\b")
_MORE_ROWS = re.compile(r"^\|\s*\| … \d+ more rows? \|")
_SEPARATOR = re.compile(r"^\|(?: --- \|)+$")
_FENCE = re.compile(r"^(`{3,})")
_HEADER = "| " + " | ".join(markdown.HEADER) + " |"


@dataclass(frozen=True)
class Part:
    """One run's comment body and the heading it goes under when it shares the comment (`pyproject models
    (flopbudget check)`, `budgets in tests (pytest)`)."""

    title: str
    body: str


def merge(parts: Sequence[Part], *, marker: str, max_chars: int) -> str:
    """The one comment for `parts` (at least one), at most `max_chars` characters where the bodies' headlines fit.

    One part: its body unchanged. Several: `marker`, then each body under `## TITLE`, in order, separated by a
    blank line, the larger bodies cut to fit.
    """
    if not parts:
        raise ValueError("no comment body to merge")
    if len(parts) == 1:
        return parts[0].body
    headings = [f"## {markdown.inert(html.escape(' '.join(part.title.split()), quote=False))}\n\n" for part in parts]
    bodies = [_without_marker(part.body, marker) for part in parts]
    overhead = len(marker) + 1 + sum(len(heading) for heading in headings) + len(parts) - 1
    shares = fair_shares([len(body) for body in bodies], max_chars - overhead)
    sections = [heading + cut(body, share) for heading, body, share in zip(headings, bodies, shares)]
    return f"{marker}\n" + "\n".join(sections)


def fair_shares(sizes: Sequence[int], room: int) -> list[int]:
    """How many characters each of `sizes` may keep within `room`: the smallest first keep all they have while
    that is no more than an equal share of what is left, so only the larger ones are cut (none below
    `_MIN_SHARE`)."""
    shares = list(sizes)
    left, count = room, len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        shares[index] = min(sizes[index], max(left // count, _MIN_SHARE))
        left -= shares[index]
        count -= 1
    return shares


def cut(body: str, room: int) -> str:
    """`body` in at most `room` characters (where its first line fits): whole lines and whole `<details>`
    blocks kept in order while they fit, the rest left out and counted in the summary's note."""
    if len(body) <= room:
        return body
    lines = body.rstrip("\n").split("\n")
    earlier_rows, earlier_blocks = _earlier_cut(lines)
    kept: list[str] = []
    size = 0
    cutting = False
    dropped_rows = dropped_blocks = 0
    for unit in _units(lines):
        length = sum(len(line) + 1 for line in unit)
        cutting = cutting or (bool(kept) and size + length + _NOTE_ROOM > room)  # in order: nothing after a gap
        if not cutting:
            kept.extend(unit)
            size += length
        elif unit[0] == "<details>":
            dropped_blocks += 1
        elif _is_row(unit[0]):
            dropped_rows += 1
    rows, blocks = earlier_rows + dropped_rows, earlier_blocks + dropped_blocks
    while kept and not kept[-1].strip():
        kept.pop()
    table_ends = bool(kept) and kept[-1].startswith("|") and not _MORE_ROWS.match(kept[-1])
    if rows and table_ends:  # the table ends here: it says so itself, as the summary's does
        kept.append(_more_rows(rows))
    if rows or blocks:
        note = markdown.cut_note(rows, blocks, limit=COMMENT_LIMIT)
    else:
        note = f"_Comment cut to stay under {COMMENT_LIMIT}; the job log has it all._"
    return "\n".join([*kept, "", note]) + "\n"


# -- helpers ---------------------------------------------------------------------------------------------------------


def _without_marker(body: str, marker: str) -> str:
    """The body without its marker line (the merged comment has one, on top), ending in one newline."""
    first, _, rest = body.partition("\n")
    text = rest if first.strip() == marker else body
    return text.rstrip("\n") + "\n"


def _earlier_cut(lines: list[str]) -> tuple[int, int]:
    """Take off the note of a cut the body's writer already made (and the blank line above it), and return the
    table rows and failure details it counted, so that the note of this cut counts them too."""
    match = _EARLIER_NOTE.match(lines[-1]) if lines else None
    if match is None:
        return 0, 0
    lines.pop()
    while lines and not lines[-1].strip():
        lines.pop()
    rows, blocks = _ROWS.search(match["what"]), _BLOCKS.search(match["what"])
    return int(rows[1]) if rows else 0, int(blocks[1]) if blocks else 0


def _units(lines: list[str]) -> list[list[str]]:
    """The lines, with each `<details>` … `</details>` block as one unit (a fenced code block inside it may
    hold any line, `</details>` too: it ends nothing there)."""
    units: list[list[str]] = []
    block: list[str] | None = None
    fence = ""
    for line in lines:
        if block is None:
            if line == "<details>":
                block = [line]
            else:
                units.append([line])
            continue
        block.append(line)
        opening = _FENCE.match(line)
        if fence:
            fence = "" if line.strip() == fence else fence
        elif opening:
            fence = opening[1]
        elif line == "</details>":
            units.append(block)
            block = None
    if block is not None:
        units.append(block)
    return units


def _is_row(line: str) -> bool:
    """A row of the models table: a table line that is neither the header nor the separator below it, nor the
    `… N more rows` row of an earlier cut (whose rows that cut's note counts)."""
    if not line.startswith("|") or _SEPARATOR.match(line) or _MORE_ROWS.match(line):
        return False
    return line != _HEADER


def _more_rows(count: int) -> str:
    """The table's last row after a cut, as the summary writes it."""
    return "| " + " | ".join(("", f"… {count} more row{'' if count == 1 else 's'}", *[""] * 6)) + " |"
