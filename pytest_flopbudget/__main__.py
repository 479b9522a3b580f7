"""`python -m pytest_flopbudget`: the `flopbudget` command, for environments where its script is not on PATH."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
