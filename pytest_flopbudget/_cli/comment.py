"""`flopbudget comment`: post the bodies `--report comment:PATH` wrote as the pull request's one comment.

The action's last step runs it, with the job's token, as `python -I -m pytest_flopbudget comment ...` from a
directory of its own (docs/ci.md): the steps before it ran the project's code, which could write to the checkout and
to RUNNER_TEMP, so nothing is imported from there. This module reads the bodies and hands them to
`reporters.pr_comment`, which merges them and talks to the API. The exit status is 0 whether or not the comment
could be posted (a notice says why not: the comment is a courtesy, the runs' status is the job's), 1 when something
was refused (a redirect on a write or to another origin, a malformed `GITHUB_API_URL`), 2 for a usage error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from pytest_flopbudget._atomic_file import read_regular_file
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._reporters import pr_comment
from pytest_flopbudget._reporters.comment_merge import Part

#: The most a body file may hold: `comment:PATH` writes at most a comment's 65,536 characters.
MAX_BODY_BYTES = 1024 * 1024


def run_comment(
    *,
    bodies: Sequence[str],
    titles: Sequence[str],
    footer: str,
    out: TextIO,
    timeout_s: float = pr_comment.TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> int:
    """Post `bodies` (files `comment:PATH` wrote; one that was never written is left out) as one comment, the
    i-th under `titles[i]` when several are merged (default: the file's name), `footer` last, all within
    `timeout_s` seconds. 0, or 1 when something the API asked for was refused (a redirect on a write, or to another
    origin; `GITHUB_API_URL` not an http(s) URL)."""
    if titles and len(titles) != len(bodies):
        raise UsageError(
            f"--title given {len(titles)} times for {len(bodies)} BODY_FILEs: give one --title per BODY_FILE, "
            "in the same order, or none"
        )
    parts = []
    unreadable = False
    for index, path in enumerate(bodies):
        title = titles[index] if titles else Path(path).name
        try:
            # a regular file only: a FIFO or a device left at PATH would hang the read
            parts.append(Part(title, read_regular_file(path, MAX_BODY_BYTES).decode("utf-8")))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            unreadable = True
            why = getattr(exc, "strerror", "") or exc
            pr_comment.notice(out, f"no comment body from {path}: cannot read it: {why}.")
    if not parts:
        if not unreadable:  # that one notice said why already
            why = f"no comment body was written ({', '.join(bodies)}: the runs stopped first)"
            pr_comment.notice(out, f"no pull-request comment: {why}.")
        return 0
    body = pr_comment.with_footer(parts, footer)
    done = pr_comment.post(body, os.environ if env is None else env, out, timeout_s=timeout_s)
    return 1 if done == "error" else 0
