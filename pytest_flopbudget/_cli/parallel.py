"""`flopbudget check -j N`: how many models are counted at once, read from the command line.

The counting itself is the count cache's forked processes (`cache/counter.py`, `IsolatedCounter.count_ahead`): a
pool of N, no scheduler. This module only reads `-j` (a positive whole number, or `auto`: the cores this process
may run on) and starts the counting ahead of the check's loop, which then judges and prints the models in the
pyproject's order exactly as with `-j 1`.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the parser imports this module for `-j`: it stays light
    from pytest_flopbudget._cli.progress import Progress
    from pytest_flopbudget._run import Counter

JOBS_HELP = (
    "count up to N models at once, each in a process forked from one that imported torch once (default 1; auto: "
    "the cores this process may use); the results, outputs and baselines are the same as with -j 1"
)


def parse_jobs(text: str) -> int:
    """`-j`'s value: a whole number of at least 1, or `auto` (`available_cores()`); otherwise argparse's one-line
    usage error names the value and what is accepted."""
    if text.strip().lower() == "auto":
        return available_cores()
    try:
        jobs = int(text.strip())
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of processes; expected a whole number of at least 1, or auto"
        )
    return jobs


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which `taskset` and container limits narrow), else
    the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def count_ahead(counter: Counter, jobs: int, progress: Progress, err: TextIO | None) -> None:
    """With `jobs` > 1, count every model the counter has planned now, `jobs` at a time; the check's loop then
    takes their answers in order. Where a counter cannot fork, says once that the models are counted one by one."""
    if jobs < 2:
        return
    from pytest_flopbudget._cache.counter import can_fork

    if not can_fork():
        if err is not None:
            err.write(f"flopbudget: -j {jobs}: this platform has no fork; the models are counted one at a time\n")
        return
    progress.start(f"in {jobs} processes")
    counter.count_ahead(jobs)
