"""The one result type shared by both backends, the budgets, the baselines and every reporter.

A `Report` is plain data so that it can be written to a baseline file, sent from an xdist worker and read back
without loss. Costs are stored per layer *exclusive* of children (what ran in the module's own forward); totals
and the module-tree view are derived, so the per-layer numbers always add up to the totals.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from pytest_flopbudget._display import html_of
from pytest_flopbudget._json_fields import a_bool, a_list, a_str, an_object, field_of, joined, show
from pytest_flopbudget._metrics import (
    BUFFER_BYTES,
    BYTES,
    FLOPS,
    INT_OPS,
    MACS,
    METRICS,
    PARAM_BYTES,
    PARAMS,
    PEAK_MEMORY,
    Metric,
    by_name,
)

#: Bumped when the JSON layout changes incompatibly; baselines carry it so a foreign file is recognised.
#: 2: each layer's and op's figures sit under `metrics`, keyed by metric name.
REPORT_FORMAT = "pytest-flopbudget/report/2"
#: The first layout (one field per metric in each layer and op): still read, so committed baselines stay valid.
REPORT_FORMAT_1 = "pytest-flopbudget/report/1"
#: A generation count (`generate = N`) adds `phases` to a `report/2` file: an addition older readers never see,
#: since only a generating model's file has it (the format string stays, so every other file is byte-identical).

#: The name of a generation's first phase (the prompt's forward, which yields the first token) and of decode step k.
PREFILL = "prefill"


def decode_step_name(step: int) -> str:
    """`decode 1` .. `decode N-1`: the cached forward that yields token step + 1."""
    return f"decode {step}"


#: The root module (ops that ran directly in the model's own forward, or outside any module).
ROOT = ""

#: Draws a Report as the text `str(report)` returns (see `use_text_renderer`).
_text_renderer: Callable[[Report, int | None, str | None], str] | None = None


def use_text_renderer(renderer: Callable[[Report, int | None, str | None], str]) -> None:
    """Make `report.table(depth, title)` (and `str(report)`) return `renderer(report, depth, title)`. The data
    type imports no presentation (render/ draws Reports, so it sits above this module): the package root, which
    every import of this module runs first, plugs in `render.table.report_text`."""
    global _text_renderer
    _text_renderer = renderer


#: Finds a convention profile by name for `Report.under` (see `use_conventions`).
_convention_lookup: Callable[[str], Any] | None = None


def use_conventions(lookup: Callable[[str], Any]) -> None:
    """Make `report.under(name)` apply `lookup(name)`, a convention profile (`_conventions/registry.py`): the data
    type imports no profile (they read Reports, so they sit above this module); the package root plugs it in."""
    global _convention_lookup
    _convention_lookup = lookup


#: How a report counts: each metric's own conventions (`metrics.py`), then those of the counting as a whole. An
#: `omit_zero` metric's (integer ops) are added where a report has a figure for it (`Report.to_dict`). A metric
#: another package adds (`Metric.plugin`) is read off the ops a report holds and says how in its own definition, so
#: installing one changes no report or baseline.
CONVENTIONS: dict[str, str] = {
    **{
        key: text
        for metric in METRICS
        if not (metric.optional or metric.omit_zero or metric.plugin)
        for key, text in metric.conventions.items()
    },
    "causal_attention": "dense: a causal mask does not reduce the QK^T and AV matmuls",
    "data_dependent": (
        "fake mode: routing indices are invented balanced round-robin (exact for top-k routing without token "
        "dropping); other data-dependent sizes count at their upper bound; both listed in estimated"
    ),
}


class Figures:
    """Counts keyed by metric (`values`), zeros left out so that equal costs compare equal however they were built.

    `flops`, `macs` and `params` read the usual metrics; `get` and `add` work for any metric in `metrics.METRICS`.
    """

    values: dict[Metric, int]

    def __init__(self, values: Mapping[Metric, int] | Mapping[str, int] | None = None, **counts: int) -> None:
        self.values = {}
        for name, amount in (*(values or {}).items(), *counts.items()):
            self.add(name if isinstance(name, Metric) else by_name(name), amount)

    def get(self, metric: Metric) -> int:
        return self.values.get(metric, 0)

    def add(self, metric: Metric, amount: int) -> None:
        if amount:
            self.values[metric] = self.values.get(metric, 0) + amount

    def add_all(self, values: Mapping[Metric, int], times: int = 1) -> None:
        own = self.values  # `add` inlined: a count adds every op's figures to its layer, its op and its phase
        for metric, amount in values.items():
            if amount := amount * times:
                own[metric] = own.get(metric, 0) + amount

    @property
    def flops(self) -> int:
        return self.get(FLOPS)

    @property
    def macs(self) -> int:
        return self.get(MACS)

    @property
    def int_ops(self) -> int:
        return self.get(INT_OPS)


class OpCost(Figures):
    """How often one op ran inside a layer and what it cost (its per-op metrics)."""

    def __init__(
        self, calls: int = 0, values: Mapping[Metric, int] | Mapping[str, int] | None = None, **counts: int
    ) -> None:
        super().__init__(values, **counts)
        self.calls = calls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpCost) and (self.calls, self.values) == (other.calls, other.values)

    def __repr__(self) -> str:
        return f"OpCost(calls={self.calls}, values={self.values})"

    def add_cost(self, other: OpCost, times: int = 1) -> None:
        self.calls += other.calls * times
        self.add_all(other.values, times)


class LayerCost(Figures):
    """Cost of one module, exclusive of its children: its per-op metrics summed over its ops, and its per-layer
    metrics (`params` are the module's own, recurse=False)."""

    def __init__(
        self,
        values: Mapping[Metric, int] | Mapping[str, int] | None = None,
        ops: dict[str, OpCost] | None = None,
        skipped: dict[str, int] | None = None,
        **counts: int,
    ) -> None:
        super().__init__(values, **counts)
        self.ops: dict[str, OpCost] = ops if ops is not None else {}
        self.skipped: dict[str, int] = skipped if skipped is not None else {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerCost) and (self.values, self.ops, self.skipped) == (
            other.values,
            other.ops,
            other.skipped,
        )

    def __repr__(self) -> str:
        return f"LayerCost(values={self.values}, ops={self.ops}, skipped={self.skipped})"

    @property
    def params(self) -> int:
        return self.get(PARAMS)

    def add_op(self, op: str, values: Mapping[Metric, int], calls: int = 1) -> None:
        """`calls` runs of `op` that cost `values` together (per-op metrics, keyed by metric)."""
        self.add_all(values)
        known = self.ops.get(op)
        if known is None:
            self.ops[op] = OpCost(calls, values)
        else:
            known.calls += calls
            known.add_all(values)

    def add_skipped(self, op: str, calls: int = 1) -> None:
        self.skipped[op] = self.skipped.get(op, 0) + calls

    def merge(self, other: LayerCost) -> None:
        self.add_all(other.values)
        for name, cost in other.ops.items():
            self.ops.setdefault(name, OpCost()).add_cost(cost)
        for name, calls in other.skipped.items():
            self.add_skipped(name, calls)


class PhaseTotals(Figures):
    """The per-op metrics of one phase of a training step (forward or backward)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PhaseTotals) and self.values == other.values

    def __repr__(self) -> str:
        return f"PhaseTotals(values={self.values})"


class BothPhases:
    """Totals over a `forward` and a `backward` phase: what a Report says, and what a count adds up as it goes."""

    forward: PhaseTotals
    backward: PhaseTotals

    def phases_total(self, metric: Metric) -> int:
        return self.forward.get(metric) + self.backward.get(metric)

    def totals(self) -> dict[Metric, int]:
        """Every per-op metric over both phases, in the registry's order."""
        return {metric: self.phases_total(metric) for metric in METRICS.per_op}

    @property
    def flops(self) -> int:
        return self.phases_total(FLOPS)

    @property
    def macs(self) -> int:
        return self.phases_total(MACS)

    @property
    def int_ops(self) -> int:
        """Integer operations (quantized matmuls and convolutions), which `flops` and `macs` leave out."""
        return self.phases_total(INT_OPS)


class Phase(Figures):
    """One phase of a count: a generation's prefill or one decode step, or a training step's forward or backward.

    Every per-op metric of the phase (`values`) and, where the count measured it, the peak of live tensor bytes
    during the phase (`peak_memory`, None when not measured).
    """

    def __init__(
        self, name: str, values: Mapping[Metric, int] | Mapping[str, int] | None = None, peak_memory: int | None = None
    ) -> None:
        super().__init__(values)
        self.name = name
        self.peak_memory = peak_memory

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Phase) and (self.name, self.values, self.peak_memory) == (
            other.name,
            other.values,
            other.peak_memory,
        )

    def __repr__(self) -> str:
        return f"Phase({self.name!r}, values={self.values}, peak_memory={self.peak_memory})"


@dataclass
class SkippedOp:
    """An op that has compute but no formula: it counts as zero, and says so."""

    calls: int = 0
    layers: list[str] = field(default_factory=list)
    reason: str = "no formula"


@dataclass
class EstimatedOp:
    """An op whose output size depended on values fake tensors do not have: its figures rest on `rule`."""

    calls: int = 0
    layers: list[str] = field(default_factory=list)
    rule: str = ""


@dataclass(frozen=True)
class MemoryTimeline:
    """Live tensor bytes over a counted call, for the picture of `count --metric peak-memory`: `live[0]` before the
    first op, `live[i]` after op i; `layers` the (index, module path) at which each run of ops in one layer begins;
    `backward` the index of the first op of the backward (None for inference). Kept in memory only, never in the
    JSON: a baseline or a report read back has none."""

    live: Sequence[int]
    layers: Sequence[tuple[int, str]]
    backward: int | None = None

    def layer_at(self, index: int) -> str:
        """The module running at sample `index` (the model itself before the first op)."""
        where = bisect_right([start for start, _ in self.layers], index) - 1
        return self.layers[where][1] if where >= 0 else ROOT


@dataclass
class Report(BothPhases):
    """What a model costs, per layer and in total, and how that was counted.

    Each metric's total is read through its definition (`metric(...)`): per-op metrics from the phases, per-layer
    ones (params) as the sum of the layers.
    """

    layers: dict[str, LayerCost] = field(default_factory=dict)
    forward: PhaseTotals = field(default_factory=PhaseTotals)
    backward: PhaseTotals = field(default_factory=PhaseTotals)
    skipped_ops: dict[str, SkippedOp] = field(default_factory=dict)
    estimated_ops: dict[str, EstimatedOp] = field(default_factory=dict)
    training: bool = False
    #: An inference count (`training=False`) of a model in train mode: forgot `.eval()`, or meant it.
    train_mode: bool = False
    backend: str = "torch"
    model: str = ""
    inputs: list[Any] = field(default_factory=list)
    conventions: dict[str, str] = field(default_factory=lambda: dict(CONVENTIONS))
    versions: dict[str, str] = field(default_factory=dict)
    #: The optional metrics (`Metric.optional`: bytes) this report has figures for. One it lacks (a baseline written
    #: before the metric existed, a backend that does not count it) reads 0 but is "not measured": never judged,
    #: never written to its JSON.
    optional_metrics: frozenset[Metric] = frozenset()
    #: The peak of live tensor bytes during the counted call and the module path it was reached in (`peak-memory`,
    #: measured when `PEAK_MEMORY` is in `optional_metrics`).
    peak_memory: int = 0
    peak_layer: str = ROOT
    #: Live bytes op by op, where the count kept them (a PyTorch count that measured peak memory): not compared,
    #: not written to JSON.
    memory_timeline: MemoryTimeline | None = field(default=None, compare=False)
    #: A generation count's phases: the prefill, then one entry per decode step (`generate = N`: N - 1 of them);
    #: empty otherwise. Their per-op metrics add up to the report's totals.
    phases: list[Phase] = field(default_factory=list)

    def __str__(self) -> str:
        """The per-layer table `flopbudget count` prints (depth 2), so `print(count(model, x))` shows where the
        compute goes: drawn by the renderer the package root plugs in (`use_text_renderer`), the repr without one."""
        return repr(self) if _text_renderer is None else self.table()

    def table(self, depth: int | None = 2, title: str | None = None) -> str:
        """The per-layer table: a row per module to `depth` (None: every layer), under `title` (by default the
        model, its backend and mode), with the totals, bytes and skipped ops, as `flopbudget count` prints it."""
        if _text_renderer is None:
            raise RuntimeError("import pytest_flopbudget to draw a Report's table")
        return _text_renderer(self, depth, title)

    def _repr_html_(self) -> str | None:
        """What Jupyter shows for a Report: the layer table and the icicle inline, self-contained (no script,
        nothing loaded); None (Jupyter then shows the repr) without the renderer the package root plugs in."""
        return html_of(self)

    def under(self, convention: str) -> Any:
        """This count's FLOPs under a stack's convention (`megatron`, `palm`, ...: docs/conventions-profiles.md):
        an Explanation with `ours` (the exact FLOPs), `theirs` (the figure under the convention) and the `items`
        that sum exactly to the difference. An unknown name raises FlopBudgetError listing the accepted ones."""
        if _convention_lookup is None:
            raise RuntimeError("import pytest_flopbudget to apply a convention")
        return _convention_lookup(convention).apply(self)

    def __repr__(self) -> str:
        """One line: a Report holds every layer, and a repr of thousands of layers helps nobody in a debugger."""
        from pytest_flopbudget._safe_text import safe_line

        skipped = f", skipped={self.skipped_calls}" if self.skipped_ops else ""
        int_ops = f", int_ops={self.int_ops}" if self.int_ops else ""
        return safe_line(
            f"Report(model={self.model!r}, backend={self.backend!r}, training={self.training}, flops={self.flops}, "
            f"macs={self.macs}{int_ops}, params={self.params}, layers={len(self.layers)}{skipped})"
        )

    @property
    def flops(self) -> int:
        return FLOPS.of_report(self)

    @property
    def macs(self) -> int:
        return MACS.of_report(self)

    @property
    def params(self) -> int:
        return PARAMS.of_report(self)

    # Every metric reads as an attribute named by its marker argument (`report.bytes`, `report.param_bytes`; the
    # count of ops not counted is `skipped_calls`, as `skipped` names them); an optional metric the count did not
    # measure reads 0 (`report.measures(metric)` says which). `tests/unit/test_report.py` checks every metric of
    # METRICS has one. `int_ops` comes from `BothPhases`, `peak_memory` is a field.

    @property
    def bytes(self) -> int:
        """Bytes moved: every op's inputs read and outputs written (docs: "Memory")."""
        return BYTES.of_report(self)

    @property
    def param_bytes(self) -> int:
        """Bytes of the parameters (unique storages, at their dtypes)."""
        return PARAM_BYTES.of_report(self)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the buffers (running statistics, rotary tables, masks)."""
        return BUFFER_BYTES.of_report(self)

    @property
    def skipped(self) -> dict[str, int]:
        """Op name -> calls for every op that was not counted; empty means the count is exact."""
        return {name: op.calls for name, op in sorted(self.skipped_ops.items())}

    @property
    def estimated(self) -> dict[str, int]:
        """Op name -> calls for every op whose sizes rest on a data-dependent rule; empty in real execution."""
        return {name: op.calls for name, op in sorted(self.estimated_ops.items())}

    @property
    def ops(self) -> dict[str, OpCost]:
        """Per-op totals over all layers: which kernels the compute went to."""
        totals: dict[str, OpCost] = {}
        for cost in self.layers.values():
            for name, op in cost.ops.items():
                totals.setdefault(name, OpCost()).add_cost(op)
        return dict(sorted(totals.items()))

    @property
    def skipped_calls(self) -> int:
        return sum(op.calls for op in self.skipped_ops.values())

    @property
    def generated(self) -> int:
        """How many tokens the counted generation produced (the prefill's and one per decode step); 0 if none."""
        return len(self.phases)

    def phase_list(self) -> list[Phase]:
        """The phases a budget or an output can name: a generation's (prefill, decode 1, ...), a training step's
        `forward` and `backward` (the existing split), else none."""
        if self.phases:
            return self.phases
        if self.training:
            return [Phase("forward", self.forward.values), Phase("backward", self.backward.values)]
        return []

    def measures(self, metric: Metric) -> bool:
        """Whether this report has a figure for `metric` (an optional metric may be not measured)."""
        return not by_name(metric).optional or metric in self.optional_metrics

    def metric(self, metric: Metric) -> int:
        """The total of one budget metric (`flops`, `macs`, `params`, `skipped`: op calls not counted, ...)."""
        return by_name(metric).of_report(self)

    def layer_metric(self, metric: Metric) -> dict[str, int]:
        """One metric per layer (exclusive of children); `skipped` counts op calls."""
        definition = by_name(metric)
        return {path: definition.of_layer(cost) for path, cost in self.layers.items()}

    def tree(self, depth: int | None = None) -> dict[str, LayerCost]:
        """Costs rolled up to module paths at most `depth` components deep (inclusive of children).

        `depth=None` keeps every layer; `depth=0` folds everything into the root.
        """
        rolled: dict[str, LayerCost] = {}
        for path, cost in self.layers.items():
            key = path if depth is None else truncate_path(path, depth)
            rolled.setdefault(key, LayerCost()).merge(cost)
        return rolled

    def inclusive(self) -> dict[str, LayerCost]:
        """Every module path (and each of its ancestors) with the cost of its whole subtree."""
        totals: dict[str, LayerCost] = {}
        for path, cost in self.layers.items():
            for ancestor in ancestors(path):
                total = totals.get(ancestor)
                if total is None:
                    total = totals[ancestor] = LayerCost()
                total.merge(cost)
        return totals

    def to_dict(self) -> dict[str, Any]:
        # an omit_zero metric (integer ops) is written only where there is some, so other reports stay as they were
        counted = tuple(
            metric
            for metric in METRICS.counted
            if self.measures(metric) and not (metric.omit_zero and not metric.of_report(self))
        )
        conventions = {**self.conventions}
        for metric in METRICS.omit_zero:
            if metric in counted:
                conventions.update(metric.conventions)
        data = {
            "format": REPORT_FORMAT,
            "backend": self.backend,
            "model": self.model,
            "training": self.training,
            "inputs": self.inputs,
            "totals": {metric: metric.of_report(self) for metric in counted},
            "forward": _phase_dict(self.forward, counted),
            "backward": _phase_dict(self.backward, counted),
            "layers": {path: _layer_dict(cost, counted) for path, cost in sorted(self.layers.items())},
            "skipped": {
                name: {"calls": op.calls, "layers": sorted(op.layers), "reason": op.reason}
                for name, op in sorted(self.skipped_ops.items())
            },
            "conventions": dict(sorted(conventions.items())),
            "versions": dict(sorted(self.versions.items())),
        }
        if PEAK_MEMORY in self.optional_metrics:  # only when measured: an ONNX count or an older file has none
            data["peak_memory"] = {"bytes": self.peak_memory, "layer": self.peak_layer}
        if self.phases:  # only for a generation count, so every other file stays as it was
            data["phases"] = [_phase_entry(phase, counted) for phase in self.phases]
        if self.train_mode:  # only when set, so baselines of models counted in eval mode do not change
            data["train_mode"] = True
        if self.estimated_ops:  # only when a rule was used, so baselines of ordinary models do not change
            data["estimated"] = {
                name: {"calls": op.calls, "layers": sorted(op.layers), "rule": op.rule}
                for name, op in sorted(self.estimated_ops.items())
            }
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """Inverse of `to_dict`; raises `ValueError` naming the first missing or malformed field.

        Nothing is coerced: every count is an `int` (not a bool, a float, NaN or Infinity) in 0..MAX_COUNT, every
        name and text a `str`, every flag a `bool`, so that a hand-edited or hostile file is refused with one line
        saying where, and never reaches the budgets and reporters as something they cannot handle.
        """
        if not isinstance(data, Mapping):
            raise ValueError("a report must be a JSON object")
        fmt = data.get("format")
        if fmt not in (REPORT_FORMAT, REPORT_FORMAT_1):
            raise ValueError(f"format is {show(fmt)}, expected {REPORT_FORMAT!r}")
        data = an_object(data, "the report")
        # The first layout knew flops, macs and params; the current one holds every counted metric.
        counted: tuple[Metric, ...] = METRICS.counted if fmt == REPORT_FORMAT else _FORMAT_1_METRICS
        # An optional metric a file lacks (written before it existed, or by a backend that does not count it) is
        # not measured: neither zero nor a reason to refuse the file.
        totals_data = an_object(field_of(data, "totals", ""), "totals")
        optional = frozenset(m for m in counted if m.optional and m in totals_data)
        # An omit_zero metric (integer ops) a file lacks is zero: it is written only where there is some.
        counted = tuple(
            m for m in counted if (not m.optional or m in optional) and (not m.omit_zero or m in totals_data)
        )
        per_op = tuple(m for m in counted if m in METRICS.per_op)
        layer_from = _layer_from if fmt == REPORT_FORMAT else _layer_from_1
        totals = _counts(field_of(data, "totals", ""), "totals", counted)
        forward = _counts(field_of(data, "forward", ""), "forward", per_op)
        backward = _counts(field_of(data, "backward", ""), "backward", per_op)
        report = cls(
            layers={
                key: layer_from(value, f"layers[{show(key)}]", counted, per_op) for key, value in _items(data, "layers")
            },
            forward=PhaseTotals(forward),
            backward=PhaseTotals(backward),
            skipped_ops={
                key: SkippedOp(*_listed_op(value, f"skipped[{show(key)}]", "reason"))
                for key, value in _items(data, "skipped")
            },
            estimated_ops={
                key: EstimatedOp(*_listed_op(value, f"estimated[{show(key)}]", "rule"))
                for key, value in _items(data, "estimated", required=False)
            },
            training=a_bool(field_of(data, "training", ""), "training"),
            train_mode=a_bool(field_of(data, "train_mode", "", False), "train_mode"),
            backend=a_str(field_of(data, "backend", ""), "backend"),
            model=a_str(field_of(data, "model", "", ""), "model"),
            inputs=list(a_list(field_of(data, "inputs", "", []), "inputs")),
            conventions={
                key: a_str(value, f"conventions[{show(key)}]")
                for key, value in _items(data, "conventions", required=False)
                if key not in _DERIVED_CONVENTIONS  # `to_dict` writes them again where the metric is written
            },
            versions={
                key: a_str(value, f"versions[{show(key)}]") for key, value in _items(data, "versions", required=False)
            },
            optional_metrics=optional,
        )
        peak = field_of(data, "peak_memory", "", None)
        if peak is not None:
            peak = an_object(peak, "peak_memory")
            report.peak_memory = _count(field_of(peak, "bytes", "peak_memory"), "peak_memory.bytes")
            report.peak_layer = a_str(field_of(peak, "layer", "peak_memory"), "peak_memory.layer")
            report.optional_metrics = report.optional_metrics | {PEAK_MEMORY}
        report.phases = [
            _phase_from(value, f"phases[{index}]", per_op)
            for index, value in enumerate(a_list(field_of(data, "phases", "", []), "phases"))
        ]
        if report.phases and any(
            sum(phase.get(metric) for phase in report.phases) != totals[metric] for metric in per_op
        ):
            raise ValueError("totals are not the sum of the phases")
        if any(totals[metric] != report.phases_total(metric) for metric in per_op):
            raise ValueError("totals do not match the forward and backward phases")
        # A hand-edited total that no longer equals the sum of its layers would judge a model by a number that was
        # never counted: such a file is unreadable, not a baseline.
        for metric in counted:
            layers = sum(cost.get(metric) for cost in report.layers.values())
            if layers != totals[metric]:
                raise ValueError(f"total {metric} {totals[metric]} is not the sum of its layers ({layers})")
        return report


def conventions_with(metrics: Iterable[Metric]) -> dict[str, str]:
    """The conventions of a report that also measured the optional `metrics` (bytes): theirs added to the rest."""
    return {**CONVENTIONS, **{key: text for metric in metrics for key, text in metric.conventions.items()}}


def truncate_path(path: str, depth: int) -> str:
    if depth <= 0 or not path:
        return ROOT
    return ".".join(path.split(".")[:depth])


#: The layer tree (inclusive costs, the table's rows, the picture's boxes) has at most this many levels of
#: intermediate modules, each named by at most `MAX_TREE_NAME` characters. A deeper path (a 700 KB dotted ONNX
#: node name: 350,000 levels) is attached, under its full name, to its deepest ancestor within both limits:
#: building every prefix of such a name would take memory quadratic in its length. No real module tree is near.
MAX_TREE_DEPTH = 64
MAX_TREE_NAME = 1024


def ancestors(path: str) -> Iterable[str]:
    """`a.b.c` -> ``, `a`, `a.b`, `a.b.c` (the root first).

    Intermediate ancestors stop after `MAX_TREE_DEPTH` levels or `MAX_TREE_NAME` characters, whichever comes
    first; `path` itself always ends the list. So the total length yielded is linear in `len(path)`, and the
    ancestors of an ancestor are the same list cut short (a tree, however odd the names).
    """
    yield ROOT
    if path:
        end = path.find(".")
        depth = 0
        while end != -1 and depth < MAX_TREE_DEPTH and end <= MAX_TREE_NAME:
            if end:  # `.a` (a leading dot) must not yield the root a second time and count its cost twice
                yield path[:end]  # slices of `path`, not joins of its parts
                depth += 1
            end = path.find(".", end + 1)
        yield path


#: The conventions of the omit_zero metrics (integer ops): not held by a Report but written by `to_dict` wherever
#: the metric is, so a report read back equals the one written.
_DERIVED_CONVENTIONS = frozenset(key for metric in METRICS.omit_zero for key in metric.conventions)

#: The metrics of the `report/1` layout, each a field of every layer (and, per op, flops and macs).
_FORMAT_1_METRICS = (FLOPS, MACS, PARAMS)


def _phase_dict(phase: PhaseTotals, counted: tuple[Metric, ...]) -> dict[str, int]:
    return {metric: phase.get(metric) for metric in METRICS.per_op if metric in counted}


def _phase_entry(phase: Phase, counted: tuple[Metric, ...]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": phase.name, "metrics": _phase_dict(PhaseTotals(phase.values), counted)}
    if phase.peak_memory is not None:
        entry["peak_memory"] = phase.peak_memory
    return entry


def _phase_from(data: object, where: str, per_op: tuple[Metric, ...]) -> Phase:
    """A phase of a generation: `{"name": "decode 3", "metrics": {...}, "peak_memory": n}` (peak optional)."""
    phase = an_object(data, where)
    peak = field_of(phase, "peak_memory", where, None)
    return Phase(
        a_str(field_of(phase, "name", where), f"{where}.name"),
        _counts(field_of(phase, "metrics", where), f"{where}.metrics", per_op),
        None if peak is None else _count(peak, f"{where}.peak_memory"),
    )


def _layer_dict(cost: LayerCost, counted: tuple[Metric, ...]) -> dict[str, Any]:
    per_op = tuple(metric for metric in METRICS.per_op if metric in counted)
    return {
        "metrics": {metric: cost.get(metric) for metric in counted},
        "ops": {
            name: {"calls": op.calls, "metrics": {metric: op.get(metric) for metric in per_op}}
            for name, op in sorted(cost.ops.items())
        },
        "skipped": dict(sorted(cost.skipped.items())),
    }


def _layer_from(data: object, where: str, counted: tuple[str, ...], per_op: tuple[str, ...]) -> LayerCost:
    """A layer of the current layout: `{"metrics": {...}, "ops": {op: {"calls": n, "metrics": {...}}}, ...}`."""
    layer = an_object(data, where)
    ops: dict[str, OpCost] = {}
    for key, value in _items(layer, "ops", where):
        at = f"{where}.ops[{show(key)}]"
        op = an_object(value, at)
        ops[key] = OpCost(
            _count(field_of(op, "calls", at), f"{at}.calls"),
            _known_counts(field_of(op, "metrics", at), f"{at}.metrics", per_op),
        )
    return LayerCost(
        _known_counts(field_of(layer, "metrics", where), f"{where}.metrics", counted),
        ops=ops,
        skipped=_skipped_from(layer, where),
    )


def _layer_from_1(data: object, where: str, counted: tuple[str, ...], per_op: tuple[str, ...]) -> LayerCost:
    """A layer of the `report/1` layout: `{"flops": n, "macs": n, "params": n, "ops": {op: {"calls": n, ...}}}`."""
    layer = an_object(data, where)
    ops: dict[str, OpCost] = {}
    for key, value in _items(layer, "ops", where):
        figures = _counts(value, f"{where}.ops[{show(key)}]", ("calls", *per_op))
        ops[key] = OpCost(figures.pop("calls"), figures)
    return LayerCost(
        {metric: _count(field_of(layer, metric, where), f"{where}.{metric}") for metric in counted},
        ops=ops,
        skipped=_skipped_from(layer, where),
    )


def _skipped_from(layer: Mapping[str, Any], where: str) -> dict[str, int]:
    return {
        key: _count(value, f"{where}.skipped[{show(key)}]")
        for key, value in _items(layer, "skipped", where, required=False)
    }


def _known_counts(value: object, where: str, names: tuple[str, ...]) -> dict[str, int]:
    """The counts `names` of the object `value`, every one required; a metric this version does not know is an
    error, not ignored, so that a file from a later version is never judged on part of its figures."""
    data = an_object(value, where)
    for name in data:
        if name not in names:
            raise ValueError(f"{where} has an unknown metric {show(name)}")
    return _counts(data, where, names)


#: The largest count a report may hold: far beyond any model (10^30 FLOPs is a million years of an exaflop machine),
#: small enough for every reporter and budget comparison.
MAX_COUNT = 10**30


def _count(value: object, where: str) -> int:
    # bool is an int subclass, and a float (1e400 is inf, NaN) must not pass for a count
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{where} must be an integer from 0 to 10^30, got {show(value)}")
    return value


def _items(data: Mapping[str, Any], key: str, where: str = "", *, required: bool = True) -> list[tuple[str, Any]]:
    """The entries of the object `data[key]`; an optional one that is absent has none."""
    if key not in data and not required:
        return []
    return list(an_object(field_of(data, key, where), joined(where, key)).items())


def _counts(value: object, where: str, names: tuple[str, ...]) -> dict[str, int]:
    """The counts `names` of the object `value` found at `where`."""
    data = an_object(value, where)
    return {name: _count(field_of(data, name, where), joined(where, name)) for name in names}


def _listed_op(value: object, where: str, text: str) -> tuple[int, list[str], str]:
    """`calls`, `layers` and the `reason` or `rule` text of a skipped or estimated op."""
    data = an_object(value, where)
    calls = _count(field_of(data, "calls", where), f"{where}.calls")
    layers = a_list(field_of(data, "layers", where), f"{where}.layers")
    names = [a_str(x, f"{where}.layers[{i}]") for i, x in enumerate(layers)]
    return calls, names, a_str(field_of(data, text, where), f"{where}.{text}")
