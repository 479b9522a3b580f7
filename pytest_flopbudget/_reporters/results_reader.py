"""The JSON results document read back into the run it describes: what `flopbudget merge` judges shards from.

The inverse of `json_report`: every verdict is rebuilt from its fields (the Report, the baseline, the budget, each
finding with its place), never re-judged and never parsed out of a message, so the outputs a merge writes (job
summary, comment, pictures, exports) are the ones the whole run would have written. Nothing is read but the
document: no pyproject.toml, no baseline, no model. Places were written relative to the checkout; they are made
absolute against `root` (the merge's checkout), so that every output makes them relative again to the same path.

A shard's document was written by a job that ran the project's code, so it is read as untrusted input: a field
of the wrong type is one `ValueError` naming its path, never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._curve.formula import Formula
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._json_fields import a_bool, a_list, a_str, an_object, field_of, show
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.baseline import MAX_DIGITS
from pytest_flopbudget._judge.verdict import Finding, FindingKind, Measurement, Severity, Verdict
from pytest_flopbudget._report import Report
from pytest_flopbudget._reporters.json_report import RESULTS_FORMAT
from pytest_flopbudget._run import Project, RunResult, Unchecked
from pytest_flopbudget._shard import Shard

E = TypeVar("E", bound=Enum)


@dataclass
class Results:
    """One document read back: the run, and the shard record where a shard wrote it."""

    result: RunResult
    shard: Shard | None
    #: The tool's version that wrote it.
    version: str


def parse_results(text: str, root: str | os.PathLike[str]) -> Results:
    """The run `text` (a results document) describes; raises ValueError (one line naming the field) otherwise."""
    try:
        data = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError("not a results document: nested too deeply") from None
    try:
        return _results(an_object(data, "the document"), os.fspath(root))
    except RecursionError:
        raise ValueError("not a results document: nested too deeply") from None
    except (KeyError, TypeError, AttributeError, ArithmeticError) as exc:  # a from_dict that trusted its input
        raise ValueError(f"not a results document this version can read: {type(exc).__name__}: {show(exc)}") from None


def _results(data: Mapping[str, Any], root: str) -> Results:
    fmt = data.get("format")
    if fmt != RESULTS_FORMAT:
        raise ValueError(f"format is {show(fmt)}, expected {RESULTS_FORMAT!r} (written by this version)")
    tool = an_object(field_of(data, "tool", ""), "tool")
    version = a_str(field_of(tool, "version", "tool"), "tool.version")
    run = an_object(field_of(data, "run", ""), "run")
    base_ref = run.get("base_ref")
    verdicts = [_verdict(an_object(entry, f"models[{i}]"), root, f"models[{i}]")
                for i, entry in enumerate(a_list(field_of(data, "models", ""), "models"))]  # fmt: skip
    unchecked = [_unchecked(an_object(entry, f"unchecked[{i}]"), root, f"unchecked[{i}]")
                 for i, entry in enumerate(a_list(field_of(data, "unchecked", ""), "unchecked"))]  # fmt: skip
    changes = [_change(an_object(entry, f"budget_changes[{i}]"), root, f"budget_changes[{i}]")
               for i, entry in enumerate(a_list(field_of(data, "budget_changes", ""), "budget_changes"))]  # fmt: skip
    result = RunResult(
        verdicts=verdicts,
        unchecked=unchecked,
        changes=changes,
        baseline_dir=a_str(field_of(run, "baseline_dir", "run"), "run.baseline_dir"),
        base_ref=None if base_ref is None else a_str(base_ref, "run.base_ref"),
        front_end=CLI,  # the merge is `flopbudget merge`: its text is the CLI's, whichever front end counted
        projects=[
            _project(an_object(item, f"run.projects[{i}]"), root, f"run.projects[{i}]")
            for i, item in enumerate(a_list(run.get("projects", []), "run.projects"))
        ],
    )
    shard = Shard.from_dict(an_object(data["shard"], "shard")) if data.get("shard") is not None else None
    result.shard = shard
    return Results(result, shard, version)


def _verdict(entry: Mapping[str, Any], root: str, where: str) -> Verdict:
    nodeid = entry.get("nodeid")
    mismatch = entry.get("cache_mismatch")
    report = _report(field_of(entry, "report", where), f"{where}.report")
    order = [
        a_str(path, f"{where}.layer_order[]") for path in a_list(entry.get("layer_order", []), f"{where}.layer_order")
    ]
    if order:
        if sorted(order) != sorted(report.layers):
            raise ValueError(f"{where}.layer_order does not name each layer of {where}.report once")
        report.layers = {path: report.layers[path] for path in order}
    measurement = Measurement(
        name=a_str(field_of(entry, "name", where), f"{where}.name"),
        report=report,
        budget=Budget.from_dict(_absolute(an_object(field_of(entry, "budget", where), f"{where}.budget"), root)),
        origin=_location(field_of(entry, "origin", where), root, f"{where}.origin"),
        nodeid=None if nodeid is None else a_str(nodeid, f"{where}.nodeid"),
        test_failed=a_bool(entry.get("test_failed", False), f"{where}.test_failed"),
        cache_mismatch=None if mismatch is None else a_str(mismatch, f"{where}.cache_mismatch"),
        pyproject=None if entry.get("pyproject") is None else a_str(entry["pyproject"], f"{where}.pyproject"),
        formula=_formula_of(entry.get("formula"), f"{where}.formula"),
    )
    baseline = entry.get("baseline")
    baseline_file = entry.get("baseline_file")
    findings = [_finding(an_object(item, f"{where}.findings[{i}]"), root, f"{where}.findings[{i}]")
                for i, item in enumerate(a_list(field_of(entry, "findings", where), f"{where}.findings"))]  # fmt: skip
    return Verdict(
        measurement,
        findings,
        None if baseline is None else _report(baseline, f"{where}.baseline"),
        None if baseline_file is None else a_str(baseline_file, f"{where}.baseline_file"),
        _formula_of(entry.get("baseline_formula"), f"{where}.baseline_formula"),
    )


def _project(item: Mapping[str, Any], root: str, where: str) -> Project:
    pyproject = a_str(field_of(item, "pyproject", where), f"{where}.pyproject")
    return Project(
        pyproject if os.path.isabs(pyproject) else os.path.join(root, pyproject),
        a_str(field_of(item, "baseline_dir", where), f"{where}.baseline_dir"),
    )


def _report(data: object, where: str) -> Report:
    try:
        return Report.from_dict(an_object(data, where))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _formula_of(data: object, where: str) -> Formula | None:
    if data is None:
        return None
    try:
        return Formula.from_dict(an_object(data, where))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _finding(item: Mapping[str, Any], root: str, where: str) -> Finding:
    source = item.get("source")
    metric, dim = item.get("metric"), item.get("dim")
    return Finding(
        _member(Severity, field_of(item, "severity", where), f"{where}.severity"),
        _member(FindingKind, field_of(item, "kind", where), f"{where}.kind"),
        a_str(field_of(item, "message", where), f"{where}.message"),
        None if metric is None else a_str(metric, f"{where}.metric"),  # type: ignore[arg-type]  # by name
        _count(item.get("actual"), f"{where}.actual"),
        _count(item.get("limit"), f"{where}.limit"),
        _count(item.get("baseline"), f"{where}.baseline"),
        None if source is None else _location(source, root, f"{where}.source"),
        None if dim is None else a_str(dim, f"{where}.dim"),
    )


def _unchecked(item: Mapping[str, Any], root: str, where: str) -> Unchecked:
    source, nodeid = item.get("source"), item.get("nodeid")
    return Unchecked(
        a_str(field_of(item, "name", where), f"{where}.name"),
        a_str(field_of(item, "message", where), f"{where}.message"),
        None if source is None else _location(source, root, f"{where}.source"),
        None if nodeid is None else a_str(nodeid, f"{where}.nodeid"),
    )


def _change(item: Mapping[str, Any], root: str, where: str) -> BudgetChange:
    def text(key: str) -> str | None:
        value = item.get(key)
        return None if value is None else a_str(value, f"{where}.{key}")

    return BudgetChange(
        a_str(field_of(item, "model", where), f"{where}.model"),
        a_str(field_of(item, "setting", where), f"{where}.setting"),
        a_str(field_of(item, "kind", where), f"{where}.kind"),
        text("before"),
        text("after"),
        a_str(field_of(item, "ref", where), f"{where}.ref"),
        _location(field_of(item, "source", where), root, f"{where}.source"),
        text("percent"),
    )


def _member(kind: type[E], value: object, where: str) -> E:
    known = [member.value for member in kind]
    if value not in known:
        raise ValueError(f"{where} is {show(value)}, expected one of {', '.join(map(repr, known))}")
    return kind(value)


def _count(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} must be a whole number or null, got {show(value)}")
    return value


def _location(data: object, root: str, where: str) -> Location:
    return Location.from_dict(_absolute(an_object(data, where), root))


def _absolute(data: Any, root: str) -> Any:
    """`data` with every place's relative `file` joined to `root`: the inverse of `json_report._relative`."""
    if isinstance(data, Mapping):
        out = {key: _absolute(value, root) for key, value in data.items()}
        if {"file", "line", "key"} <= set(out) and isinstance(out["file"], str) and not os.path.isabs(out["file"]):
            out["file"] = os.path.join(root, out["file"])
        return out
    if isinstance(data, list):
        return [_absolute(item, root) for item in data]
    return data


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits, at most {MAX_DIGITS} allowed")
    return int(digits)
