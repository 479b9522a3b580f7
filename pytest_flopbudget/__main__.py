"""`python -m pytest_flopbudget`: the `flopbudget` command, for environments where its script is not on PATH."""

from __future__ import annotations

from pytest_flopbudget._cli import console_main

if __name__ == "__main__":
    console_main()
