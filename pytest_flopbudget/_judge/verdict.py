"""Verdicts: a counted model judged against its budget and baseline, with its violations and warnings.

This is the one place that decides pass or fail, shared by the pytest plugin and the `flopbudget check` CLI, so
both agree to the FLOP. `evaluate` is pure (no I/O, no pytest, no torch); `judge` adds the baseline lookup.
Findings carry the `Location` of the limit they concern so CI reporters can annotate the exact line declaring it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._errors import BaselineError, FlopBudgetError
from pytest_flopbudget._front_ends import ANY_UPDATE_HINT
from pytest_flopbudget._judge.baseline import BaselineSource, baseline_formula
from pytest_flopbudget._judge.diff import LayerDiff, diff_layers
from pytest_flopbudget._judge.phase_figures import phase_usages
from pytest_flopbudget._judge.phase_growth import phase_growth
from pytest_flopbudget._metrics import FLOPS, METRICS, SKIPPED, Metric, by_name
from pytest_flopbudget._render.formatting import format_pair, format_percent, layer_label
from pytest_flopbudget._report import Report

if TYPE_CHECKING:
    from pytest_flopbudget._curve.formula import Formula


class Kind(str, Enum):
    """A str enum that compares, hashes, prints and serialises as its value: code names each kind once (a typo in
    `FindingKind.SKIPED` fails at import), while JSON and equality with plain strings are unchanged."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Severity(Kind):
    ERROR = "error"
    WARNING = "warning"


class FindingKind(Kind):
    """What a finding is about: over a ceiling, grew more than max-increase, grew within budget, ops not counted,
    or the baseline file is unusable."""

    CEILING = "ceiling"
    INCREASE = "increase"
    GROWTH = "growth"
    SKIPPED = "skipped"
    BASELINE = "baseline"
    NO_BASELINE = "no baseline"
    CACHE_MISMATCH = "cache mismatch"
    #: A budget on an optional metric the count has no figure for (bytes of an ONNX model), or a max-increase on
    #: one the baseline predates: said, never judged as zero.
    NOT_MEASURED = "not measured"
    #: The formula grows faster in a dim than `max-degree` allows (judge/curve_verdict.py).
    DEGREE = "degree"
    #: Over a ceiling at a point of the curve (`at`), read off the formula.
    POINT_CEILING = "point ceiling"
    #: A budget on the curve the formula cannot answer (none counted, not exact, not holding at the point).
    NO_FORMULA = "no formula"
    #: Terms of the formula changed since the baseline's (`seq**2 term of h.{0..1}.attn +100%`).
    FORMULA = "formula"


ERROR = Severity.ERROR
WARNING = Severity.WARNING


@dataclass(frozen=True)
class Finding:
    """One judgement about a model, phrased as a clause without the model name.

    `kind` is `ceiling` (over a limit), `increase` (grew more than max-increase), `growth` (grew, still within
    budget), `skipped` (some ops could not be counted), `baseline` (the baseline file is unusable), `no baseline`
    or `cache mismatch` (`--cache=verify`: the model's cached count would have answered differently), or one about
    a budget on the curve (`degree`, `point ceiling`, `no formula`, `formula`). What a renderer needs is a field:
    the message is for people and is never read back.
    """

    severity: Severity
    kind: FindingKind
    message: str
    metric: Metric | None = None
    actual: int | None = None
    limit: int | None = None
    baseline: int | None = None
    source: Location | None = None
    #: The dim a `max-degree` budget caps (`seq`), for a finding about one: its degree over the budget, or the
    #: formula that cannot answer it; None for any other finding.
    dim: str | None = None

    def __post_init__(self) -> None:
        if self.metric is not None:  # a plain name becomes its definition (a Finding may come from JSON or a test)
            object.__setattr__(self, "metric", by_name(self.metric))

    @property
    def rank(self) -> tuple[int, float]:
        """Order within a severity, most important first: a ceiling before max-increase before the baseline
        file (an unreadable baseline before all); growth before skipped ops; then by size (the relative excess),
        so the worst overrun comes first."""
        if self.kind == FindingKind.BASELINE:
            return -1, 0.0  # nothing else about the model can be trusted until its baseline can be read
        if self.kind == FindingKind.DEGREE:
            return 0, -math.inf  # how the cost grows outweighs by how much it is over at one size
        if self.kind in (FindingKind.CEILING, FindingKind.POINT_CEILING):
            return 0, -_ratio(self.actual, self.limit)
        if self.kind == FindingKind.NO_FORMULA:
            return 0, 0.0
        if self.kind in (FindingKind.INCREASE, FindingKind.GROWTH):
            return 1, -_ratio(self.actual, self.baseline)
        if self.kind == FindingKind.SKIPPED:
            return 2, -float(self.actual or 0)
        if self.kind in (FindingKind.NO_BASELINE, FindingKind.CACHE_MISMATCH):
            return 3, 0.0
        return 4, 0.0


def _ratio(actual: int | None, reference: int | None) -> float:
    """(actual - reference) / reference; infinite from a zero reference, zero when either is unknown."""
    if actual is None or reference is None:
        return 0.0
    if reference == 0:
        return math.inf if actual > 0 else 0.0
    return (actual - reference) / reference


@dataclass
class Measurement:
    """A counted model and what it is held to: the unit that workers send and reporters list.

    `name` keys the baseline file. `origin` is where the model is declared (its pyproject table or the test
    function); `nodeid` is the pytest item that counted it, if any.
    """

    name: str
    report: Report
    budget: Budget = field(default_factory=Budget)
    origin: Location = field(default_factory=Location)
    nodeid: str | None = None
    #: The test that counted it failed for another reason (an assertion after the count): never shown as "ok".
    test_failed: bool = False
    #: `--cache=verify`: how the model's cached count differs from this (fresh) count (`flops 356 cached, 712
    #: counted`); a violation in every output, since a cache that answers wrongly lets a gate pass blind.
    cache_mismatch: str | None = None
    #: Every metric as a formula of the model's named dims, where its entry sets a `curve` (docs/curves.md).
    formula: Formula | None = None
    #: In a run over several projects (`flopbudget check --pyproject A --pyproject B`), this model's `--pyproject`
    #: as given: the command that records its baseline names it. None in a run of one project.
    pyproject: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "report": self.report.to_dict(),
            "budget": self.budget.to_dict(),
            "origin": self.origin.to_dict(),
            "nodeid": self.nodeid,
            "test_failed": self.test_failed,
            "cache_mismatch": self.cache_mismatch,
        }
        if self.formula is not None:
            data["formula"] = self.formula.to_dict()
        if self.pyproject is not None:
            data["pyproject"] = self.pyproject
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(
            name=str(data["name"]),
            report=Report.from_dict(data["report"]),
            budget=Budget.from_dict(data["budget"]),
            origin=Location.from_dict(data["origin"]),
            nodeid=data.get("nodeid"),
            test_failed=bool(data.get("test_failed", False)),
            cache_mismatch=data.get("cache_mismatch"),
            formula=_formula(data.get("formula")),
            pyproject=data.get("pyproject"),
        )


def _formula(data: Any) -> Formula | None:
    if data is None:
        return None
    from pytest_flopbudget._curve.formula import Formula

    return Formula.from_dict(data)


@dataclass
class Verdict:
    """The outcome for one model: every finding, and the baseline it was compared with (if any)."""

    measurement: Measurement
    findings: list[Finding]
    baseline: Report | None = None
    baseline_file: str | None = None
    #: The baseline's formula, where the baseline keeps one (a curve model's baseline written since it had a curve).
    baseline_formula: Formula | None = None

    @property
    def name(self) -> str:
        return self.measurement.name

    @property
    def report(self) -> Report:
        return self.measurement.report

    @property
    def budget(self) -> Budget:
        return self.measurement.budget

    @property
    def violations(self) -> list[Finding]:
        """The findings that fail the model, worst first."""
        return sorted((f for f in self.findings if f.severity == ERROR), key=lambda f: f.rank)

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def passed(self) -> bool:
        return not self.violations

    def value(self, metric: Metric) -> int:
        """The figure judged: under the budget's convention for FLOPs where it names one (`judged_figure`)."""
        return judged_figure(self.report, self.budget, metric)

    def judges(self, metric: Metric) -> bool:
        """Whether outputs show `metric` for this model: every metric, except an optional one its budget does not
        set (a project without memory budgets sees what it always saw) and an omit_zero one (integer ops) that is
        neither budgeted nor there, now or in the baseline (a model without integer work shows what it always did;
        one whose integer work moved out of FLOPs shows where it went)."""
        definition = by_name(metric)
        if self.budget.limit(metric) is not None:
            return True
        if definition.omit_zero:
            return bool(self.value(metric) or self.baseline_value(metric))
        return not definition.optional

    def baseline_value(self, metric: Metric) -> int | None:
        """The baseline's figure; None without a baseline, or when the baseline did not measure `metric`."""
        if self.baseline is None or not self.baseline.measures(metric):
            return None
        return judged_figure(self.baseline, self.budget, metric)

    def delta(self, metric: Metric) -> int | None:
        """Change against the baseline; None without a baseline figure (or without a figure now)."""
        old = self.baseline_value(metric)
        return None if old is None or not self.report.measures(metric) else self.value(metric) - old

    def usage(self, metric: Metric) -> float | None:
        """Share of the ceiling used (1.0 = exactly at the limit); None when the metric has no ceiling."""
        limit = self.budget.limit(metric)
        if limit is None or not self.report.measures(metric):
            return None
        now = self.value(metric)
        if limit.value == 0:
            return 0.0 if now == 0 else float("inf")
        return now / limit.value

    def highest_usage(self) -> tuple[str, float] | None:
        """The metric (or phase: `decode-mean flops`) closest to (or furthest over) its ceiling, for one-number
        summaries."""
        used = [(m, u) for m in METRICS if (u := self.usage(m)) is not None] + phase_usages(self.report, self.budget)
        return max(used, key=lambda item: item[1]) if used else None

    def diff(self, metric: Metric) -> LayerDiff | None:
        if self.delta(metric) is None:  # no baseline, or a figure missing on either side
            return None
        assert self.baseline is not None
        return diff_layers(self.baseline, self.report, metric)

    def failed_metrics(self) -> list[Metric]:
        """Metrics with a violation, in budget order, for choosing which per-layer tables to show."""
        failed = {f.metric for f in self.violations if f.metric}
        return [m for m in METRICS if m in failed]


def judged_figure(report: Report, budget: Budget, metric: Metric) -> int:
    """The figure a budget judges: the report's own, but FLOPs under the budget's `convention` where it names one
    (the figure a team's papers report: docs/conventions-profiles.md). A convention that cannot price the report
    leaves the exact figure, and `evaluate` fails the model with the reason (`_convention_problem`)."""
    if budget.convention is not None and metric == FLOPS:
        try:
            return int(report.under(budget.convention).theirs)
        except FlopBudgetError:
            pass
    return report.metric(metric)


def _convention_problem(report: Report, budget: Budget) -> str | None:
    """Why the budget's convention cannot price this report (no token ids for a per-token one), None if it can."""
    if budget.convention is None:
        return None
    try:
        report.under(budget.convention)
    except FlopBudgetError as exc:
        return f"convention = {budget.convention!r} cannot be judged: {exc}"
    return None


def evaluate(
    measurement: Measurement,
    baseline: Report | None = None,
    *,
    baseline_file: str | None = None,
    baseline_error: str | None = None,
    baseline_formula: Formula | None = None,
) -> Verdict:
    """Check `measurement` against its budget and `baseline`. Limits are inclusive: equal to the limit passes.

    `baseline_error` (an unreadable baseline file) is itself a violation: it must be fixed, not ignored; so is a
    cached count that differs from the fresh one (`measurement.cache_mismatch`), on the line declaring the model.
    """
    report, budget = measurement.report, measurement.budget
    findings: list[Finding] = []
    if baseline_error:
        origin = budget.source or measurement.origin
        findings.append(Finding(ERROR, FindingKind.BASELINE, baseline_error, source=origin))
    if measurement.cache_mismatch:
        message = f"its cached count differs from a fresh count: {measurement.cache_mismatch}"
        findings.append(Finding(ERROR, FindingKind.CACHE_MISMATCH, message, source=measurement.origin))
    problem = _convention_problem(report, budget)
    if problem is not None:
        findings.append(Finding(ERROR, FindingKind.NOT_MEASURED, problem, FLOPS, source=budget.source))
        budget = replace(budget, convention=None)  # judged on the exact figure below, and said so above
    for metric in METRICS:
        limit = budget.limit(metric)
        now = judged_figure(report, budget, metric)
        if limit is not None and not report.measures(metric):
            # a budget that cannot be checked fails: passing it would say the model is within it
            why = f"{metric.label}: not measured for this model ({report.backend})"
            note = report.conventions.get(metric, "")
            if note.startswith("not measured: "):  # why the backend could not (the ONNX backend's convention text)
                why += f": {note[len('not measured: ') :]}"
            message = f"{why}, so its {metric.key} budget cannot be checked"
            findings.append(
                Finding(ERROR, FindingKind.NOT_MEASURED, message, metric, limit=limit.value, source=limit.source)
            )
        elif limit is not None and now > limit.value:
            old = (
                judged_figure(baseline, budget, metric) if baseline is not None and baseline.measures(metric) else None
            )
            message = _ceiling_message(metric, now, limit.value, _under(budget, metric))
            reached = metric.where(report)
            if reached is not None:  # a maximum (peak memory) is reached in one layer: say which
                message += f" at {layer_label(reached)}"
            findings.append(
                Finding(
                    ERROR,
                    FindingKind.CEILING,
                    message,
                    metric,
                    actual=now,
                    limit=limit.value,
                    baseline=old,
                    source=limit.source,
                )
            )
    findings.extend(_phase_findings(report, budget))
    for grown in phase_growth(report, baseline, budget):  # max-increase per budgeted phase
        findings.append(Finding(ERROR, FindingKind.INCREASE, grown.message, grown.metric, grown.now, grown.allowed,
                                grown.baseline, grown.source))  # fmt: skip
    findings.extend(_growth_findings(measurement, baseline))
    findings.extend(_curve_findings(measurement, baseline_formula))
    limit = budget.limit(SKIPPED)
    if report.skipped_calls and (limit is None or report.skipped_calls <= limit.value):
        ops = ", ".join(f"{op} x{calls}" for op, calls in report.skipped.items())
        message = f"{report.skipped_calls} op calls were not counted ({ops})"
        findings.append(
            Finding(
                WARNING,
                FindingKind.SKIPPED,
                message,
                SKIPPED,
                actual=report.skipped_calls,
                limit=limit.value if limit else None,
                source=budget.source or measurement.origin,
            )
        )
    return Verdict(measurement, findings, baseline, baseline_file, baseline_formula)


def judge(measurement: Measurement, store: BaselineSource) -> Verdict:
    """Evaluate against the stored baseline; an unreadable baseline file is a violation, never ignored."""
    shown = store.display(measurement.name)
    formula = None
    try:
        baseline, error = store.load(measurement.name), None
        if baseline is not None and measurement.formula is not None:
            formula = baseline_formula(store, measurement.name)
    except BaselineError as exc:
        baseline, error = None, str(exc)
    return evaluate(measurement, baseline, baseline_file=shown, baseline_error=error, baseline_formula=formula)


def _curve_findings(measurement: Measurement, baseline: Formula | None) -> list[Finding]:
    """The budgets on the curve judged on the measurement's formula, and its terms changed since the baseline's
    (judge/curve_verdict.py); nothing for a model without either."""
    budget, formula = measurement.budget, measurement.formula
    if not budget.on_curve and formula is None:
        return []
    from pytest_flopbudget._judge import curve_verdict

    findings: list[Finding] = []
    if formula is None:
        first = budget.degrees[0].source if budget.degrees else budget.at[0].source
        message = (
            "max-degree and at are judged on the model's formula, and this count has none: set curve = "
            "{ dim = [low, high] } on its [tool.flopbudget.models] entry, or count it with flopbudget.count_curve"
        )
        return [Finding(ERROR, FindingKind.NO_FORMULA, message, source=first)]
    for degree in budget.degrees:
        why = curve_verdict.not_exact(degree.metric, formula)
        if why is not None:
            message = f"{why}, so max-degree {degree.dim} = {degree.degree} cannot be checked"
            findings.append(
                Finding(ERROR, FindingKind.NO_FORMULA, message, degree.metric, source=degree.source, dim=degree.dim)
            )
        problem = curve_verdict.degree_problem(degree, formula)
        if problem is not None:
            actual = formula.total(degree.metric).degree(degree.dim)
            findings.append(
                Finding(
                    ERROR, FindingKind.DEGREE, problem, degree.metric, actual=actual, limit=degree.degree,
                    source=degree.source, dim=degree.dim,
                )
            )  # fmt: skip
    for point in budget.at:
        for metric, message, now, ceiling, source in curve_verdict.at_problems(point, formula):
            kind = FindingKind.NO_FORMULA if now is None else FindingKind.POINT_CEILING
            findings.append(Finding(ERROR, kind, message, metric, actual=now, limit=ceiling, source=source))
    if baseline is not None:
        origin = budget.source or measurement.origin
        for metric, message in curve_verdict.formula_changes(baseline, formula, budget):
            findings.append(Finding(WARNING, FindingKind.FORMULA, message, metric, source=origin))
    return findings


def missing_baseline(measurement: Measurement, shown: str, *, required: bool) -> Finding:
    """A budgeted model with no committed baseline: nothing to diff against and no growth gate, so it is said on
    every output, and fails when baselines are required (`require-baseline`, on in CI by default)."""
    message = f"no baseline ({shown}): run {ANY_UPDATE_HINT} and commit the baseline directory"
    origin = measurement.budget.source or measurement.origin
    return Finding(ERROR if required else WARNING, FindingKind.NO_BASELINE, message, source=origin)


def _growth_findings(measurement: Measurement, baseline: Report | None) -> list[Finding]:
    """Growth over max-increase is an error; other growth within the ceilings is a warning worth a look, or, with a
    warn-increase, only growth over it (warn-then-fail: the warning comes before the failure)."""
    if baseline is None:
        return []
    budget = measurement.budget
    if _convention_problem(measurement.report, budget) is not None:  # `evaluate` failed the model for it
        budget = replace(budget, convention=None)
    increase, warn = budget.max_increase, budget.warn_increase
    findings = []
    for metric in METRICS.growth:
        limit = budget.limit(metric)
        if (metric.optional and limit is None) or not measurement.report.measures(metric):
            continue  # an optional metric grows only where it is budgeted; one not measured now cannot grow
        if not baseline.measures(metric):
            if increase is not None:
                message = (
                    f"no baseline figure for {metric.label} (the baseline predates it): max-increase is not checked"
                )
                findings.append(Finding(WARNING, FindingKind.NOT_MEASURED, message, metric, source=increase.source))
            continue
        old = judged_figure(baseline, budget, metric)
        now = judged_figure(measurement.report, budget, metric)
        if now <= old:
            continue
        shown_now, shown_old = format_pair(now, old, metric)
        message = (
            f"{_named(metric, shown_now)}{_under(budget, metric)} is {format_percent(now - old, old)} over baseline "
            f"{shown_old}"
        )
        if increase is not None and not increase.allows(old, now):
            allowed = int(old + old * increase.fraction)
            message += f", more than max-increase {increase.text}"
            findings.append(
                Finding(
                    ERROR,
                    FindingKind.INCREASE,
                    message,
                    metric,
                    actual=now,
                    limit=allowed,
                    baseline=old,
                    source=increase.source,
                )
            )
        elif limit is None or now <= limit.value:
            if warn is not None and warn.allows(old, now):
                continue  # within warn-increase: growth the project accepts without a word
            if warn is not None:
                message += f", more than warn-increase {warn.text}"
            source = increase.source if increase else (limit.source if limit else budget.source)
            source = warn.source if warn else source
            ceiling = limit.value if limit else None
            findings.append(
                Finding(
                    WARNING, FindingKind.GROWTH, message, metric, actual=now, limit=ceiling, baseline=old,
                    source=source or measurement.origin,
                )
            )  # fmt: skip
    return findings


def _phase_findings(report: Report, budget: Budget) -> list[Finding]:
    """Ceilings per phase (`phases = { decode-mean = { flops = "15G" } }`): the reason names the phase. A phase the
    count does not have (a decode step of a model counted without `generate`) fails: its budget cannot be checked."""
    from pytest_flopbudget._config.phase_budget import PHASES
    from pytest_flopbudget._judge.phase_figures import phase_figure

    findings: list[Finding] = []
    for phase, limits in budget.phases.items():
        for metric, limit in limits.items():
            figure = phase_figure(report, phase, metric)
            if figure is None or not report.measures(metric):
                why = (
                    f"{PHASES[phase]}: no such phase in this count (generate = N makes one, training = true the other)"
                )
                findings.append(
                    Finding(ERROR, FindingKind.NOT_MEASURED, why, metric, limit=limit.value, source=limit.source)
                )
            elif figure > limit.value:
                now = math.ceil(figure)
                message = f"{PHASES[phase]}: {_ceiling_message(metric, now, limit.value)}"
                findings.append(
                    Finding(ERROR, FindingKind.CEILING, message, metric, now, limit.value, source=limit.source)
                )
    return findings


def _ceiling_message(metric: Metric, now: int, limit: int, under: str = "") -> str:
    shown_now, shown_limit = format_pair(now, limit, metric)
    shown_now = _named(metric, shown_now) + under
    if limit == 0:
        return f"{shown_now} > budget {shown_limit}"
    return f"{shown_now} > budget {shown_limit} ({format_percent(now - limit, limit)})"


def _under(budget: Budget, metric: Metric) -> str:
    """` under the megatron convention`, after a FLOPs figure a convention budget judges."""
    return f" under the {budget.convention} convention" if budget.convention is not None and metric == FLOPS else ""


def _named(metric: Metric, shown: str) -> str:
    """`param bytes 12.6 GiB`: an optional metric's figures share their unit (bytes), so its label says which."""
    return f"{metric.label} {shown}" if metric.optional else shown
