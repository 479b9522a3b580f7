"""`flopbudget explain TARGET --vs PEER`: our count against another counter's, itemised by reason.

The target and its inputs are read exactly as `flopbudget count` reads them (`count.resolve_target`), so the
model explained is the model counted; a target `explain` cannot compare (an ONNX file, a JAX model against a
PyTorch peer) is one line naming what it takes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TextIO

from pytest_flopbudget._cli.count import CountRequest, resolve_target


@dataclasses.dataclass(frozen=True)
class ExplainRequest:
    """What `flopbudget explain` was asked."""

    target: str
    vs: str
    input: list[str] | None = None
    dtype: str | None = None
    dims: list[str] | None = None
    format: str = "table"
    per_layer: bool = False
    pyproject: str | None = None


def run_explain(request: ExplainRequest, out: TextIO) -> int:
    """Print the explanation (table or JSON); errors are raised for `cli.main` to print as one line."""
    from pytest_flopbudget._explain.run import check_peer, explain_entry
    from pytest_flopbudget._explain.text import explanation_text

    check_peer(request.vs)  # a typo or a missing package costs no count
    counted = CountRequest(request.target, request.input, request.dtype, pyproject=request.pyproject, dims=request.dims)
    entry, root = resolve_target(counted)
    explanation = explain_entry(entry, root, request.vs)
    if request.format == "json":
        out.write(json.dumps(explanation.to_dict(), indent=2) + "\n")
    else:
        out.write(explanation_text(explanation, entry.name, per_layer=request.per_layer))
    return 0
