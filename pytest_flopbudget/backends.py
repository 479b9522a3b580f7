"""Write a backend: what a package outside this one needs to count another framework's models.

A backend is a class implementing `Backend` (subclass it to inherit the defaults of its optional members),
registered in the entry-point group `pytest_flopbudget.backends` under its `name`:

    [project.entry-points."pytest_flopbudget.backends"]
    toy = "toy_flopbudget:ToyBackend"

Its `load` receives the configured `ModelEntry` (read it; `dataclasses.replace` makes a changed copy, never change
it in place) and returns a `Loaded`; its `count` and `count_model` return a `Report` (built from `LayerCost`,
`OpCost` and `PhaseTotals`, all importable from `pytest_flopbudget`). A problem with the entry is raised as
`problem(entry.source_of("target"), "what is wrong")`: one line naming the file, line and key; a model that cannot
be counted raises `CountingError` (one line; the model's name is put in front of it). `OPTIONS` are the entry keys
a backend may honour (`Backend.honours`): configuration and the command line refuse the others for it, and its
`count_model` refuses them in `CountOptions`. A backend owning a formula table returns a `FormulaRegistry` from
`formula_table`. docs/architecture.md#backends walks through an example.

A backend that can count every size of a curve's dims at once adds the optional member `count_symbolic`
(`SymbolicCount`): its Report's figures are `Symbolic` polynomials in the dims (an `int` where constant), and it
raises `NotPolynomial` saying why where it cannot; without it, a curve interpolates point counts.
"""

from __future__ import annotations

from pytest_flopbudget._backends.protocol import Backend, CountOptions, Loaded, SymbolicCount, problem
from pytest_flopbudget._config.pyproject import InputSpec, ModelEntry
from pytest_flopbudget._config.target_kinds import OPTIONS
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._counting.symbolic import NotPolynomial, Symbolic
from pytest_flopbudget._errors import CountingError

__all__ = [
    "OPTIONS",
    "Backend",
    "CountOptions",
    "CountingError",
    "FormulaRegistry",
    "InputSpec",
    "Loaded",
    "ModelEntry",
    "NotPolynomial",
    "Symbolic",
    "SymbolicCount",
    "problem",
]
