"""The `flop_budget` marker: its signature (for `--markers` and for errors) and the budget a test's marker sets.

The marker's arguments are bound to a real signature, so a typo (`flop=`) fails with the signature users write,
and every limit keeps the line of the decorator (or `pytest.param`) that set it, for the "to accept" hint.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping

import pytest

from pytest_flopbudget._config.budget import Budget, parse_budget
from pytest_flopbudget._config.curve_budget import parse_at, parse_max_degree
from pytest_flopbudget._config.location import Location, Origin
from pytest_flopbudget._config.phase_budget import parse_phase_budgets
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._plugin.failures import Failure
from pytest_flopbudget._plugin.marker_source import closest_marker, marker_line
from pytest_flopbudget._plugin.names import default_name

#: What the marker does, for `pytest --markers`.
_MARKER_DOC = (
    "fail the test when the model it counts with the `flopbudget` fixture exceeds these inclusive ceilings "
    "('4.1G', '300 MMACs', '25.6M', max_increase='2%'); name= reuses [tool.flopbudget.models.NAME]."
)


def _marker_signature() -> inspect.Signature:
    """`(flops=None, *, macs=None, ..., max_increase=None, phases=None, name=None)`: one argument per metric (the
    first may be positional), built from the metric definitions so a new metric is a marker argument without an edit
    here; `phases` holds the ceilings per phase (config/phase_budget.py)."""
    keyword, positional = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    arguments = [metric.argument for metric in METRICS] + ["max_increase", "warn_increase", *_CURVE_ARGUMENTS]
    arguments += ["phases", "name"]
    return inspect.Signature(
        [
            inspect.Parameter(name, positional if index == 0 else keyword, default=None)
            for index, name in enumerate(arguments)
        ]
    )


#: The budgets on the curve (config/curve_budget.py): judged on the formula of a model counted over a curve.
_CURVE_ARGUMENTS = ("max_degree", "at")

#: What users write, for the help line and for errors.
_MARKER_SIGNATURE = _marker_signature()
#: marker argument -> budget slot (see `budget.parse_budget`): each metric's `argument`, then max_increase.
_MARKER_SLOTS = {
    **{metric.argument: str(metric) for metric in METRICS},
    "max_increase": "max_increase",
    "warn_increase": "warn_increase",
}
MARKER_HELP = f"flop_budget{_MARKER_SIGNATURE}: {_MARKER_DOC}"


def marker_budget(
    item: pytest.Item, marker: pytest.Mark, origin: Location, models: Mapping[str, ModelEntry]
) -> tuple[str, Budget]:
    """The model name and budget `marker` sets on `item` (a `name=` of `models` lends its pyproject budget, which
    the marker's own limits override); raises `Failure` for a marker that cannot be checked as written."""
    try:
        bound = _MARKER_SIGNATURE.bind(*marker.args, **marker.kwargs)
    except TypeError as exc:
        takes = f"the marker takes flop_budget{_MARKER_SIGNATURE}"
        raise Failure(f"{origin.where()}: flop_budget: {exc}; {takes}") from None
    arguments = dict(bound.arguments)
    name = arguments.pop("name", None)
    phases = arguments.pop("phases", None)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise Failure(f"{origin.where()}: flop_budget(name={name!r}): expected a non-empty model name")
    curve = {key: arguments.pop(key) for key in _CURVE_ARGUMENTS if arguments.get(key) is not None}
    values = {_MARKER_SLOTS[key]: value for key, value in arguments.items()}
    line = marker_line(origin.file, origin.line, marker) or origin.line  # the decorator or pytest.param to edit
    sources = {
        _MARKER_SLOTS[key]: Location(origin.file, line, f"{item.name}: flop_budget({key}=...)", (key,), marker=True)
        for key in arguments
    }
    in_marker = Location(origin.file, line, origin.key, origin=Origin.MARKER)  # the marker's line
    try:
        budget = parse_budget(values, sources, in_marker)
        budget = _with_curve(budget, curve, dataclasses.replace(in_marker, key=f"{item.name}: flop_budget"))
        if phases is not None:
            where = Location(origin.file, line, f"{item.name}: flop_budget(phases=...)", ("phases",), marker=True)

            def source_of(phase: str, key: str | None) -> Location:
                slot = ("phases", phase) if key is None else ("phases", phase, str(key))
                return dataclasses.replace(where, slot=slot)

            budget = dataclasses.replace(budget, phases=parse_phase_budgets(phases, where, source_of))
    except FlopBudgetError as exc:
        raise Failure(str(exc)) from None
    entry = models.get(name) if name else None
    if entry is not None:
        budget = entry.budget.override(budget)
    if budget.is_empty:
        known = ", ".join(sorted(models)) or "none"
        hint = f"; name={name!r} is not in [tool.flopbudget.models] (known: {known})" if name else ""
        raise Failure(
            f"{origin.where()}: flop_budget sets no limit{hint}; give "
            f"{', '.join(metric.argument for metric in METRICS)} "
            f"or max_increase, or name= a model of [tool.flopbudget.models]"
        )
    return name or default_name(item.nodeid), budget


def _with_curve(budget: Budget, arguments: Mapping[str, object], where: Location) -> Budget:
    """`budget` with the marker's `max_degree={"seq": 1}` and `at=[{"seq": 8192, "flops": "2T"}]`; raises
    `LocatedError` naming the argument. The test's count must carry a formula for them to be judged."""
    if not arguments:
        return budget

    def locate(key: str) -> Callable[[tuple[str | int, ...]], Location]:
        return lambda sub: Location(
            where.file,
            where.line,
            f"{where.key}({key}=...)" + "".join(f"[{s!r}]" for s in sub),
            (key, *sub),
            marker=True,
        )

    degrees = parse_max_degree(arguments["max_degree"], locate("max_degree"), None) if "max_degree" in arguments else ()
    points = parse_at(arguments["at"], locate("at"), None, what="formula") if "at" in arguments else ()
    return dataclasses.replace(budget, degrees=degrees, at=points)


def owned_model(item: pytest.Item) -> str | None:
    """The model a collected test owns (its marker's `name=`, else the name from its node id) when it has the
    marker or uses the fixture, whether or not it then counts: a skipped test still owns its baseline."""
    marker = closest_marker(item)
    if marker is None and "flopbudget" not in getattr(item, "fixturenames", ()):
        return None
    name = marker.kwargs.get("name") if marker is not None else None
    return name if isinstance(name, str) and name.strip() else default_name(item.nodeid)
