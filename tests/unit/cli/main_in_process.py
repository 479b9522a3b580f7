"""`main(argv)` run in this process the way a fresh `flopbudget` process would see the project's modules."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_flopbudget._cli import main


def run_main(argv: Sequence[str], root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); the modules imported from `root` and `sys.path` are put back afterwards, so the
    next call imports the project's (possibly edited) files again."""
    modules, path = set(sys.modules), sys.path[:]
    try:
        code = main(list(argv))
    finally:
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(root)):
                del sys.modules[name]
        sys.path[:] = path
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The one `flopbudget: error:` line a usage or configuration error prints, and nothing else."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("flopbudget: error: ")
    assert "Traceback" not in err
    return lines[0]
