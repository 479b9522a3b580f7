"""`flopbudget mfu TARGET --input 1,seq:int64 --dim seq=LO..HI`: a training step's FLOPs per token as an exact
formula of the sequence length, and under each LLM stack's convention with the difference by reason; `--out PATH`
writes the JSON artifact a training loop reads (`_conventions/mfu.py`, docs/conventions-profiles.md).

The target and inputs are read as `flopbudget count` reads them (`count.resolve_target`), counted as a training
step whatever `--training` says.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TextIO

from pytest_flopbudget._cli.count import CountRequest, resolve_target, write_output
from pytest_flopbudget._cli.project import UsageError


@dataclasses.dataclass(frozen=True)
class MfuRequest:
    """What `flopbudget mfu` was asked."""

    target: str
    input: list[str] | None = None
    dtype: str | None = None
    dims: list[str] | None = None
    format: str = "table"
    out: str | None = None
    pyproject: str | None = None


def run_mfu(request: MfuRequest, out: TextIO) -> int:
    """Print the formulas (table or JSON) and write the artifact; errors are raised for `cli.main` to print."""
    from pytest_flopbudget._conventions.mfu import mfu_formulas

    counted = CountRequest(
        request.target, request.input, request.dtype, training=True, pyproject=request.pyproject, dims=request.dims
    )
    entry, root = resolve_target(counted)
    if not entry.curve:
        raise UsageError(
            "mfu gives formulas of the sequence length: give its range, e.g. --input 1,seq:int64 --dim seq=64..8192"
        )
    formulas = mfu_formulas(entry, root)
    document = json.dumps(formulas.to_dict(), indent=2) + "\n"
    if request.out is not None:
        write_output(request.out, document)
    out.write(document if request.format == "json" else mfu_text(formulas))
    return 0


def mfu_text(formulas: object) -> str:
    from pytest_flopbudget._conventions.mfu import EXACT, MfuFormulas

    assert isinstance(formulas, MfuFormulas)
    dims = ", ".join(f"{dim} in [{low}, {high}]" for dim, (low, high) in formulas.ranges.items())
    high = {dim: bounds[1] for dim, bounds in formulas.ranges.items()}
    at = ", ".join(f"{dim}={size}" for dim, size in high.items())
    exact = formulas.numerators[0]
    lines = [
        f"{formulas.model}: training FLOPs per token, {dims} (exact on the range: fitted on {formulas.samples} "
        f"counts and verified off them)",
        f"  tokens per step: {exact.tokens}",
        "",
    ]
    rows = [("convention", "FLOPs per token", f"at {at}", "exact - it")]
    for numerator in formulas.numerators:
        value = numerator.at(high)
        difference = "" if numerator.name == EXACT else f"{float(exact.at(high) - value):+,.1f}"
        rows.append((numerator.name, numerator.per_token_text(), f"{float(value):,.1f}", difference))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for index, row in enumerate(rows):
        lines.append(
            "  " + "  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3]])
        )
        if index == 0:
            lines.append("  " + "  ".join("-" * width for width in widths))
    lines.append("")
    lines.append("  exact - convention per step, by reason:")
    for numerator in formulas.numerators[1:]:
        for reason, poly in numerator.by_reason.items():
            lines.append(f"    {numerator.name:<16} {reason:<28} {poly}")
    return "\n".join(lines) + "\n"
