"""The full results as JSON (`json:PATH`): for dashboards, trend charts and pull-request comment bots.

Everything a consumer needs to render its own view without re-running anything: each model's Report (per-layer
costs included), its budget, the baseline it was compared with, the per-metric figures the summary table shows,
and every finding with the file and line it concerns. Paths are made relative to the repository so a file
produced on a CI runner means the same on a laptop. The layout is versioned by `format`.

The document is also what `flopbudget merge` rebuilds a run from (`reporters/results_reader.py`), so it holds every
field an output reads, as a field: each place keeps which kind of place it is (`origin`: pyproject, marker, test),
each finding its `dim`, each model `test_failed` and `cache_mismatch`, and `run` what the outputs read of the run
(`--base-ref`, the baseline directory, the projects of a run over several), the same from either front end. A
shard's results (`--shard K/N`) add `shard` (`_shard.Shard`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_flopbudget._atomic_file import write_atomic
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._judge.reason import reason
from pytest_flopbudget._judge.verdict import Finding, Verdict
from pytest_flopbudget._metrics import METRICS, Metric
from pytest_flopbudget._reporters.annotations import relative_path
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult, Unchecked
from pytest_flopbudget._version import __version__

RESULTS_FORMAT = "pytest-flopbudget/results/2"


def results(
    verdicts: Sequence[Verdict],
    changes: Sequence[BudgetChange] = (),
    unchecked: Sequence[Unchecked] = (),
    *,
    root: str | os.PathLike[str],
    run: RunResult | None = None,
) -> dict[str, Any]:
    """The whole document as plain data (strict JSON: no NaN or infinity); with `run`, its `run` object (and
    `shard`, for a shard's run) too."""
    ordered = sorted(verdicts, key=lambda v: (v.name, v.measurement.nodeid or ""))
    document = {
        "format": RESULTS_FORMAT,
        "tool": {"name": "pytest-flopbudget", "version": __version__},
        "passed": all(v.passed for v in verdicts) and not unchecked,
        "counts": {
            "models": len(verdicts),
            "failed": sum(1 for v in verdicts if not v.passed),
            "unchecked": len(unchecked),
            "errors": sum(len(v.violations) for v in verdicts) + len(unchecked),
            "warnings": sum(len(v.warnings) for v in verdicts) + len(changes),
        },
        "models": [model_entry(v, root=root) for v in ordered],
        "unchecked": [
            {
                "name": u.name, "message": u.message, "source": _source(u.origin, root) if u.origin else None,
                "nodeid": u.nodeid,
            }
            for u in unchecked
        ],
        "budget_changes": [_change(c, root) for c in changes],
    }  # fmt: skip
    if run is not None:
        # what the outputs read of the run besides its models; the same from either front end, as the whole file is
        document["run"] = {
            "base_ref": run.base_ref,
            "baseline_dir": run.baseline_dir,
            "projects": [
                {"pyproject": relative_path(p.pyproject, root) or p.pyproject, "baseline_dir": p.baseline_dir}
                for p in run.projects
            ],
        }
        if run.shard is not None:
            document["shard"] = run.shard.to_dict()
    return document


def write_results(
    verdicts: Sequence[Verdict],
    path: str | os.PathLike[str],
    changes: Sequence[BudgetChange] = (),
    unchecked: Sequence[Unchecked] = (),
    *,
    root: str | os.PathLike[str],
) -> None:
    """Write the document to `path` atomically (sorted keys, 2-space indent, trailing newline)."""
    write_atomic(Path(path), _text(results(verdicts, changes, unchecked, root=root)))


def dumps_results(result: RunResult, *, root: str | os.PathLike[str]) -> str:
    """The text `JsonOutput` writes for one run (what `flopbudget check --format json` prints)."""
    return _text(results(result.verdicts, result.changes, result.unchecked, root=root, run=result))


def _text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def model_entry(verdict: Verdict, *, root: str | os.PathLike[str]) -> dict[str, Any]:
    """One model: identity, verdict, figures per metric, findings, budget, report and baseline."""
    measurement = verdict.measurement
    entry = {
        "name": verdict.name,
        "nodeid": measurement.nodeid,
        "origin": _source(measurement.origin, root),
        "passed": verdict.passed,
        "test_failed": measurement.test_failed,
        "pyproject": measurement.pyproject,
        "cache_mismatch": measurement.cache_mismatch,
        "reason": reason(verdict) if not verdict.passed else None,
        # integer ops only where the model has or budgets some: a model without them reads as it always did
        "metrics": {
            metric: _figures(verdict, metric) for metric in METRICS if not metric.omit_zero or verdict.judges(metric)
        },
        "findings": [_finding(f, root) for f in verdict.findings],
        "budget": _relative(verdict.budget.to_dict(), root),
        "baseline_file": verdict.baseline_file,
        "report": verdict.report.to_dict(),
        # the order the count met the layers in (a Report's JSON sorts them): the pictures draw them in it
        "layer_order": list(verdict.report.layers),
        "baseline": verdict.baseline.to_dict() if verdict.baseline is not None else None,
    }
    if measurement.formula is not None:  # a model with a curve: its formula and the baseline's, as a count's JSON
        entry["formula"] = measurement.formula.to_dict()
        formula = verdict.baseline_formula
        entry["baseline_formula"] = formula.to_dict() if formula is not None else None
    return entry


# -- helpers ---------------------------------------------------------------------------------------------------------


def _figures(verdict: Verdict, metric: Metric) -> dict[str, Any]:
    limit = verdict.budget.limit(metric)
    usage = verdict.usage(metric)
    if not verdict.report.measures(metric):  # bytes of an ONNX model: no figure, not a zero
        return {"now": None, "limit": limit.value if limit is not None else None, "baseline": None, "delta": None,
                "usage": None, "over": False}  # fmt: skip
    return {
        "now": verdict.value(metric),
        "limit": limit.value if limit is not None else None,
        "baseline": verdict.baseline_value(metric),
        "delta": verdict.delta(metric),
        "usage": usage if usage is not None and math.isfinite(usage) else None,
        "over": limit is not None and verdict.value(metric) > limit.value,
    }


def _finding(finding: Finding, root: str | os.PathLike[str]) -> dict[str, Any]:
    return {
        "severity": finding.severity,
        "kind": finding.kind,
        "metric": finding.metric,
        "message": finding.message,
        "actual": finding.actual,
        "limit": finding.limit,
        "baseline": finding.baseline,
        "source": _source(finding.source, root) if finding.source is not None else None,
        "dim": finding.dim,
    }


def _change(change: BudgetChange, root: str | os.PathLike[str]) -> dict[str, Any]:
    return {
        "model": change.model,
        "setting": change.setting,
        "kind": change.kind,
        "before": change.before,
        "after": change.after,
        "ref": change.ref,
        "message": change.message,
        "source": _source(change.source, root),
        "percent": change.percent,
    }


def _source(source: Location, root: str | os.PathLike[str]) -> dict[str, Any]:
    return _relative(source.to_dict(), root)


def _relative(data: Any, root: str | os.PathLike[str]) -> Any:
    """`data` with every Location's absolute `file` made relative to `root` (kept as is when outside it); its
    `origin` (which kind of place: pyproject, marker, test) stays, for the outputs a merge writes from the file."""
    if isinstance(data, Mapping):
        out = {key: _relative(value, root) for key, value in data.items()}
        if {"file", "line", "key"} <= set(out) and isinstance(out["file"], str):
            out["file"] = relative_path(out["file"], root) or out["file"]
        return out
    if isinstance(data, list):
        return [_relative(item, root) for item in data]
    return data


class JsonOutput:
    """`json:PATH`: every model's Report, budget, verdict and finding, and the models not checked."""

    workspace_variables = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")

    def write(self, findings: Findings, path: str | None, context: OutputContext) -> None:
        assert path is not None
        write_atomic(Path(path), dumps_results(findings.result, root=context.root))
