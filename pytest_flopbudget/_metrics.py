"""What a budget can cap, each metric defined once: the seam every count, budget, baseline and output goes through.

A `Metric` is its own name (`"flops"`): it equals, hashes, prints and serialises as that plain string, so JSON,
baselines and the xdist transport hold plain strings. The definition carries everything else the package needs to
know about it: the key a pyproject budget sets it with and the marker argument, its label in outputs (`FLOPs`), the unit
words a budget may be written with (and which slot takes which: a MAC unit in the `flops` slot makes a MAC budget),
its prefix system, whether `max-increase` applies, and where its figure lives in a `Report`.

Adding a metric is one `define(...)` below plus the formulas that count it; the config, the judge, the cache and
every reporter iterate over `METRICS`. A package outside this one adds a metric through the entry-point group
`pytest_flopbudget.metrics` (`define_metric`, re-exported by the public `pytest_flopbudget.metrics`): each is loaded
when this module is imported, before anything reads the registry, and one that cannot be loaded is left out and
described by one line in `PLUGIN_PROBLEMS`, which the front ends report as a configuration error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._units import BINARY, SI, PrefixSystem


# What a metric reads its figures from: the shape of `report.Report` and `report.LayerCost`, which sit above this
# module (a definition knows where its figure lives, not the types that hold it).
class PhaseFigures(Protocol):
    def get(self, metric: Metric) -> int: ...


class OpFigures(PhaseFigures, Protocol):
    """One op's figures within one layer (`report.OpCost`): what a third-party metric's `of_op` reads. The per-op
    metrics are summed over the op's `calls` in that layer, over every phase of the count."""

    @property
    def calls(self) -> int: ...

    @property
    def flops(self) -> int: ...

    @property
    def macs(self) -> int: ...

    @property
    def int_ops(self) -> int: ...


class LayerFigures(PhaseFigures, Protocol):
    @property
    def skipped(self) -> Mapping[str, int]: ...

    @property
    def ops(self) -> Mapping[str, OpFigures]: ...


class ReportFigures(Protocol):
    @property
    def forward(self) -> PhaseFigures: ...

    @property
    def backward(self) -> PhaseFigures: ...

    @property
    def layers(self) -> Mapping[str, LayerFigures]: ...

    @property
    def skipped_calls(self) -> int: ...

    @property
    def peak_memory(self) -> int: ...

    @property
    def peak_layer(self) -> str: ...


#: Counted per op call, per phase (forward, backward): held by every `OpCost`, `LayerCost` and `PhaseTotals`.
PER_OP = "op"
#: A property of each module (its own parameters): held by each `LayerCost`; the total is the sum of the layers.
PER_LAYER = "layer"
#: Derived from something else a `Report` holds (the skipped ops): read through the definition's own readers.
DERIVED = "derived"


class Metric(str):
    """One metric: a `str` equal to its name, with its definition as attributes. Build one with `define`."""

    key: str
    argument: str
    label: str
    column: str
    units: tuple[str, ...]
    slot_units: tuple[str, ...]
    prefixes: PrefixSystem
    symbol: str
    word: str
    whole: bool
    growth: bool
    scope: str
    optional: bool
    omit_zero: bool
    conventions: Mapping[str, str]
    _of_report: Callable[[ReportFigures], int] | None
    _of_layer: Callable[[LayerFigures], int] | None
    _where: Callable[[ReportFigures], str | None] | None
    #: Added by another package (`define_metric`, entry-point group `pytest_flopbudget.metrics`), and from where.
    plugin: bool = False
    origin: str = "pytest-flopbudget"

    def __repr__(self) -> str:
        return str.__repr__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[Callable[[str], Metric], tuple[str]]:
        """Unpickles (deepcopy, multiprocessing) to the registered definition of the same name."""
        return by_name, (str(self),)

    @property
    def counted(self) -> bool:
        """Stored in a Report's layers and JSON (per op or per layer), not derived from something else."""
        return self.scope != DERIVED

    def of_report(self, report: ReportFigures) -> int:
        """The model's total."""
        if self._of_report is not None:
            return self._of_report(report)
        if self.scope == PER_OP:
            return report.forward.get(self) + report.backward.get(self)
        return sum(layer.get(self) for layer in report.layers.values())

    def of_layer(self, layer: LayerFigures) -> int:
        """One layer's figure, exclusive of its children."""
        return self._of_layer(layer) if self._of_layer is not None else layer.get(self)

    def where(self, report: ReportFigures) -> str | None:
        """The module path the model's figure is reached in, for a metric that is a maximum rather than a sum
        (peak memory): a ceiling's reason names it. None for a summed metric."""
        return self._where(report) if self._where is not None else None

    def format_value(self, value: int, digits: int = 3) -> str:
        """`8.52 GFLOPs`, `2.05 GMACs`, `25.6M params`, `3 skipped op calls`."""
        if self.whole:
            return f"{value} {self.word if value == 1 else self.word + 's'}"
        if self.symbol:
            return self.prefixes.format(value, self.symbol, digits=digits)
        return f"{self.prefixes.format(value, digits=digits)} {self.word}"


def define(
    name: str,
    *,
    label: str,
    key: str | None = None,
    argument: str | None = None,
    column: str | None = None,
    units: tuple[str, ...] = (),
    slot_units: tuple[str, ...] | None = None,
    prefixes: PrefixSystem = SI,
    symbol: str = "",
    word: str = "",
    whole: bool = False,
    growth: bool = True,
    scope: str = PER_OP,
    optional: bool = False,
    omit_zero: bool = False,
    of_report: Callable[[ReportFigures], int] | None = None,
    of_layer: Callable[[LayerFigures], int] | None = None,
    where: Callable[[ReportFigures], str | None] | None = None,
    conventions: Mapping[str, str] | None = None,
) -> Metric:
    """A metric named `name` (also its pyproject key and marker argument unless given), shown as `label` (also
    its table column's heading unless `column` is given).

    `units` are the words a budget may end with (`GFLOPs`); `slot_units` the metrics whose units its slot accepts
    (itself unless given); `symbol` is printed after the prefix (`GFLOPs`), `word` after the figure (`25.6M
    params`), and a `whole` count prints exactly with a plural (`3 skipped op calls`). A `DERIVED` metric gives
    `of_report` and `of_layer`. An `optional` metric is drawn in the summary tables and judged for growth only
    where a budget sets it, and a report (an older baseline, an ONNX count) may lack its figure: "not measured",
    never zero (`Report.measures`). An `omit_zero` metric is measured by every backend but rare (integer ops): a
    report writes it to its JSON only where it is not zero, a report without it holds zero, and the check's outputs
    show it only for a model that budgets it or has a figure for it. A metric that is a maximum, not a sum, gives
    `where`: the layer it is reached in. `conventions` are what every report says about how it is counted (its
    JSON's `conventions`, keyed as there).
    """
    metric = Metric.__new__(Metric, name)
    metric.key = key or name
    metric.argument = argument or name
    metric.label = label
    metric.column = column or label
    metric.units = units
    metric.slot_units = slot_units if slot_units is not None else ((name,) if units else ())
    metric.prefixes = prefixes
    metric.symbol = symbol
    metric.word = word
    metric.whole = whole
    metric.growth = growth
    metric.scope = scope
    metric.optional = optional
    metric.omit_zero = omit_zero
    metric._of_report = of_report
    metric._of_layer = of_layer
    metric._where = where
    metric.conventions = dict(conventions or {})
    return metric


class Registry:
    """The metrics in the order every output lists them, with lookups by name, pyproject key and marker argument."""

    def __init__(self, *metrics: Metric) -> None:
        self._metrics: list[Metric] = list(metrics)

    def __iter__(self) -> Iterator[Metric]:
        return iter(list(self._metrics))

    def __len__(self) -> int:
        return len(self._metrics)

    def __contains__(self, name: object) -> bool:
        return any(metric == name for metric in self._metrics)

    def add(self, metric: Metric) -> None:
        """Register `metric` after the others (a test's toy metric; a new metric is defined below instead)."""
        if metric in self:
            raise ValueError(f"metric {str(metric)!r} is already defined")
        self._metrics.append(metric)

    def remove(self, metric: Metric) -> None:
        self._metrics.remove(metric)

    def get(self, name: str) -> Metric | None:
        """The metric named `name` (as JSON and baselines write it), None when there is none."""
        return next((metric for metric in self._metrics if metric == name), None)

    def by_key(self, key: str) -> Metric | None:
        """The metric a pyproject key sets (`max-skipped-ops` -> skipped)."""
        return next((metric for metric in self._metrics if metric.key == key), None)

    def by_argument(self, argument: str) -> Metric | None:
        """The metric a `flop_budget` marker argument sets (`max_skipped_ops` -> skipped)."""
        return next((metric for metric in self._metrics if metric.argument == argument), None)

    def by_unit(self, word: str) -> Metric | None:
        """The metric a unit word names, in any case (`GFLOPs` without its prefix: `flops`)."""
        lowered = word.lower()
        return next((metric for metric in self._metrics if lowered in metric.units), None)

    @property
    def counted(self) -> tuple[Metric, ...]:
        """The metrics a Report stores (per op or per layer), in order: the JSON's totals and layers."""
        return tuple(metric for metric in self._metrics if metric.counted)

    @property
    def per_op(self) -> tuple[Metric, ...]:
        """The metrics each op call adds, per phase."""
        return tuple(metric for metric in self._metrics if metric.scope == PER_OP)

    @property
    def optional(self) -> tuple[Metric, ...]:
        """The metrics a report may lack (not measured) and outputs show only where a budget sets them."""
        return tuple(metric for metric in self._metrics if metric.optional)

    @property
    def omit_zero(self) -> tuple[Metric, ...]:
        """The metrics a report writes and outputs show only where they are not zero (integer ops)."""
        return tuple(metric for metric in self._metrics if metric.omit_zero)

    @property
    def plugins(self) -> tuple[Metric, ...]:
        """The metrics other packages added (entry-point group `pytest_flopbudget.metrics`), in order."""
        return tuple(metric for metric in self._metrics if metric.plugin)

    @property
    def growth(self) -> tuple[Metric, ...]:
        """The metrics `max-increase` applies to."""
        return tuple(metric for metric in self._metrics if metric.growth)


def _skipped_calls(report: ReportFigures) -> int:
    return report.skipped_calls


def _skipped_in_layer(layer: LayerFigures) -> int:
    return sum(layer.skipped.values())


FLOPS = define(
    "flops",
    label="FLOPs",
    units=("flop", "flops"),
    slot_units=("flops", "macs"),
    symbol="FLOPs",
    conventions={
        "flops": "2 per MAC plus bias adds, elementwise ops, activations, norms, softmax, pooling and reductions"
    },
)
MACS = define(
    "macs",
    label="MACs",
    units=("mac", "macs"),
    symbol="MACs",
    conventions={"mac": "1 multiply-accumulate of conv, transposed conv, linear, matmul, einsum or attention"},
)
#: Integer arithmetic, apart from FLOPs (floating point): the work of matmuls and convolutions on integer tensors
#: (quantized models), 2 per integer multiply-accumulate like FLOPs. Rare, so outputs show it only where it is there.
INT_OPS = define(
    "int-ops",
    label="integer ops",
    argument="int_ops",
    column="int ops",
    units=("op", "ops", "int-op", "int-ops"),
    word="int ops",
    omit_zero=True,
    conventions={
        "int-ops": (
            "ops that multiply-accumulate on integer tensors (MatMulInteger, ConvInteger, the product of "
            "QLinearMatMul and QLinearConv, torch._int_mm, a matmul or conv whose output is an integer tensor): 2 "
            "per MAC plus their integer adds, counted here and not in flops or macs; requantising to or scaling "
            "into floating point stays in flops; elementwise integer ops stay in flops"
        )
    },
)
PARAMS = define(
    "params",
    label="params",
    units=("param", "params", "parameters"),
    word="params",
    scope=PER_LAYER,
    conventions={"params": "unique parameters (tied weights counted once), buffers excluded"},
)
#: The op calls that could not be counted; its own ceiling, no growth rule.
SKIPPED = define(
    "skipped",
    label="skipped op calls",
    key="max-skipped-ops",
    argument="max_skipped_ops",
    column="skipped",
    word="skipped op call",
    whole=True,
    growth=False,
    scope=DERIVED,
    of_report=_skipped_calls,
    of_layer=_skipped_in_layer,
    conventions={"skipped": "ops with compute but no formula count as zero and are listed in skipped"},
)


def define_in_bytes(name: str, **spec: Any) -> Metric:
    """A memory metric: written in bytes (`B`), with binary and decimal prefixes (`512MiB`, `0.5 GB`), and optional
    (a backend that does not measure it leaves it not measured)."""
    return define(name, units=("b", "byte", "bytes"), prefixes=BINARY | SI, symbol="B", optional=True, **spec)


#: Memory traffic of every counted op: each distinct tensor it reads and each it writes, in its own dtype's bytes.
BYTES = define_in_bytes(
    "bytes",
    label="bytes moved",
    conventions={
        "bytes": (
            "per op: every distinct tensor input read once and every output written once, each at its "
            "dtype's element size; views and metadata-only ops move 0; ops free of FLOPs that copy, gather, pad "
            "or fill move bytes too, a gather (embedding, index_select) reading its indices and the rows it "
            "gathers, a copy_ or fill_ not reading what it overwrites; an in-place op reads and writes its tensor "
            "once each; an out= tensor is written, not read"
        )
    },
)
#: The bytes of each module's own unique parameters, in their own dtypes (tied weights once, like params).
PARAM_BYTES = define_in_bytes(
    "param-bytes",
    label="param bytes",
    argument="param_bytes",
    slot_units=("param-bytes",),
    scope=PER_LAYER,
    conventions={"param-bytes": "bytes of the unique parameters in their own dtypes, buffers excluded"},
)

#: The bytes of each module's own unique buffers (running statistics, rotary tables, masks), in their own dtypes:
#: held apart from param-bytes, which a deployment's weights are measured by.
BUFFER_BYTES = define_in_bytes(
    "buffer-bytes",
    label="buffer bytes",
    argument="buffer_bytes",
    slot_units=("buffer-bytes",),
    scope=PER_LAYER,
    conventions={
        "buffer-bytes": (
            "bytes of the unique buffers in their own dtypes (shared buffers once), non-persistent ones included"
        )
    },
)


def _peak_memory(report: ReportFigures) -> int:
    return report.peak_memory


def _no_layer_share(layer: LayerFigures) -> int:
    return 0  # a peak is reached once, in one layer: it is not a sum over the layers


def _peak_layer(report: ReportFigures) -> str | None:
    return report.peak_layer


#: The peak of live tensor bytes during the counted call (counting/torch/peak_memory.py says what is in and out). A
#: training count's step is the loop that backpropagates a loss and keeps no output: `model(x).loss.backward()` for
#: a model that returns its loss (Hugging Face, given labels), else `loss_fn(model(x))` or `model(x).sum()`; the
#: output is let go of before the backward, so only what the backward saves of it stays (a loop that keeps the
#: logits through the backward peaks higher by their bytes).
PEAK_MEMORY = define_in_bytes(
    "peak-memory",
    label="peak memory",
    argument="peak_memory",
    slot_units=("peak-memory",),
    scope=DERIVED,
    of_report=_peak_memory,
    of_layer=_no_layer_share,
    where=_peak_layer,
    conventions={
        "peak-memory": (
            "the peak of live tensor bytes during the counted call: parameters, buffers, inputs and activations, "
            "and in a training count the saved activations and gradients of one step, which backpropagates the "
            "model's own loss (its output's loss) or else loss_fn's or the outputs' sum, the output let go of "
            "before the backward; optimizer state, allocator rounding and caching, workspaces and the CUDA context "
            "are not included"
        )
    },
)

#: Every metric, in the order outputs list them.
METRICS = Registry(FLOPS, MACS, INT_OPS, PARAMS, SKIPPED, BYTES, PARAM_BYTES, BUFFER_BYTES, PEAK_MEMORY)


def by_name(name: str) -> Metric:
    """The registered metric named `name`; raises `ValueError` naming the known ones."""
    metric = METRICS.get(name)
    if metric is None:
        # a metric plugin that could not be added (count() in Python: no front end has reported it) says why
        left_out = "".join(f"; {problem}" for problem in PLUGIN_PROBLEMS)
        raise ValueError(f"unknown metric {name!r}; expected one of {', '.join(METRICS)}{left_out}")
    return metric


# -- metrics from other packages ---------------------------------------------------------------------------------

#: The entry-point group a package adds a metric in: `[project.entry-points."pytest_flopbudget.metrics"]`, each entry
#: `name = "module:attribute"` naming a metric made by `define_metric` whose name is the entry's.
ENTRY_POINT_GROUP = "pytest_flopbudget.metrics"

#: A third-party metric's name: lowercase words joined by hyphens (`matmul-flops`), its pyproject key as written and
#: its marker argument with underscores (`matmul_flops`).
METRIC_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")

#: The keys of a model's pyproject table and the `flop_budget` marker's arguments that are not metrics
#: (`config/pyproject.py`'s `MODEL_KEYS`, `plugin/marker.py`'s signature; `tests/unit/test_metric_plugins.py` checks
#: that this list covers them): a metric may not be named like one, in either spelling.
RESERVED_NAMES = frozenset(
    {
        "target", "inputs", "method", "training", "execution", "max-increase", "warn-increase", "dims", "curve",
        "max-degree", "at", "generate", "decode-inputs", "phases", "name", "convention",
    }
)  # fmt: skip

#: One line per entry point of `ENTRY_POINT_GROUP` that could not be added (it failed to import, is not a metric, or
#: clashes with another): the front ends refuse to run with them (`flopbudget: error: ...`, pytest's usage error).
PLUGIN_PROBLEMS: list[str] = []


def define_metric(
    name: str,
    *,
    label: str,
    unit: str,
    convention: str,
    of_op: Callable[[str, OpFigures], int],
    growth: bool = True,
) -> Metric:
    """A metric computed per op from what every count records (`OpFigures`: an op's name in a layer, its calls and
    its FLOPs, MACs and integer ops there): its figure in a layer is the sum of `of_op(op, figures)` over the layer's
    ops, the model's the sum over its layers, the same for a count and for a baseline read back (so nothing new is
    stored, and a baseline written before the metric was installed is compared too).

    `name` (`matmul-flops`) is its pyproject key, `--metric`/JSON name and, with underscores, its marker argument;
    `label` its title in outputs (`matmul FLOPs`); `unit` the word printed after a figure and its SI prefix
    (`240 FLOPs`, `1.2 MFLOPs`), which a budget may also end with; `convention` says how it is counted (a report's
    `conventions` keeps it under `name`); `growth` whether `max-increase` applies. `of_op` must return a whole
    number >= 0 for every op (0 for the ops the metric leaves out).
    """
    problems = []
    if not isinstance(name, str) or not METRIC_NAME.match(name):
        problems.append(f"its name {name!r} is not lowercase words joined by hyphens (like 'matmul-flops')")
    for what, text in (("label", label), ("unit", unit), ("convention", convention)):
        if not isinstance(text, str) or not text.strip() or not text.isprintable():
            problems.append(f"its {what} must be printable, non-empty text, got {text!r}")
    if isinstance(unit, str) and not re.fullmatch(r"[A-Za-z]+", unit):
        problems.append(f"its unit {unit!r} must be one word of letters (like 'FLOPs')")
    if not callable(of_op):
        problems.append(f"its of_op must be a function of an op's name and figures, got {type(of_op).__name__}")
    if problems:
        raise ValueError(f"metric {name!r}: " + "; ".join(problems))

    def of_layer(layer: LayerFigures) -> int:
        return sum(_op_figure(metric, of_op, op, figures) for op, figures in layer.ops.items())

    def of_report(report: ReportFigures) -> int:
        return sum(of_layer(layer) for layer in report.layers.values())

    metric = define(
        name,
        label=label,
        argument=name.replace("-", "_"),
        units=(unit.lower(),),
        symbol=unit,
        growth=growth,
        scope=DERIVED,
        of_report=of_report,
        of_layer=of_layer,
        conventions={name: convention},
    )
    metric.plugin = True
    return metric


def _op_figure(metric: Metric, of_op: Callable[[str, OpFigures], int], op: str, figures: OpFigures) -> int:
    """`of_op(op, figures)`, checked: a metric's own error is one line naming it and the op, never a traceback."""
    try:
        value = of_op(op, figures)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200]
        raise FlopBudgetError(
            f"metric {str(metric)!r} ({metric.origin}) failed on op {op!r}: {type(exc).__name__}: {detail}"
        ) from None
    if type(value) is not int or value < 0:
        raise FlopBudgetError(
            f"metric {str(metric)!r} ({metric.origin}) gave {value!r} for op {op!r}; of_op must return a whole "
            f"number >= 0"
        )
    return value


def _entry_points() -> list[Any]:
    from importlib import metadata

    found = metadata.entry_points()
    if hasattr(found, "select"):  # Python 3.10+
        return list(found.select(group=ENTRY_POINT_GROUP))
    return list(found.get(ENTRY_POINT_GROUP, []))  # pragma: no cover - Python 3.9


def _entry_origin(entry: Any) -> str:
    """`entry point 'matmul-flops' of flopbudget-matmul 0.1`: where a plugin metric comes from, for messages."""
    dist = getattr(entry, "dist", None)
    distribution = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown distribution"
    return f"entry point {entry.name!r} ({entry.value}) of {distribution}"


def _clash(metric: Metric) -> str | None:
    """Why `metric` cannot join the registry, or None."""
    for other in METRICS:
        spellings = {str(other), other.key, other.argument}
        if {str(metric), metric.key, metric.argument} & spellings:
            owner = getattr(other, "origin", "a built-in metric")
            return f"its name {str(metric)!r} is taken by {owner if other.plugin else 'a built-in metric'}"
    if {str(metric), metric.argument} & (RESERVED_NAMES | {n.replace("-", "_") for n in RESERVED_NAMES}):
        return f"its name {str(metric)!r} is a budget setting, not free for a metric"
    return None


def load_plugins(entries: list[Any] | None = None) -> list[str]:
    """Add the metric of each entry point of `ENTRY_POINT_GROUP` (by name, in order) to `METRICS`; return one line
    for each that could not be added, naming its entry point and distribution."""
    problems = []
    for entry in sorted(_entry_points() if entries is None else entries, key=lambda e: (e.name, e.value)):
        origin = _entry_origin(entry)
        try:
            metric = entry.load()
        except Exception as exc:
            detail = " ".join(str(exc).split())[:200]
            problems.append(f"metric plugin {origin} cannot be loaded: {type(exc).__name__}: {detail}")
            continue
        if not isinstance(metric, Metric) or not metric.plugin:
            problems.append(
                f"metric plugin {origin} is a {type(metric).__name__}, not a metric made by "
                f"pytest_flopbudget.metrics.define_metric"
            )
            continue
        if str(metric) != entry.name:
            problems.append(f"metric plugin {origin} names the metric {str(metric)!r}: name the entry point after it")
            continue
        why = _clash(metric)
        if why is not None:
            problems.append(f"metric plugin {origin} cannot be added: {why}")
            continue
        metric.origin = origin
        METRICS.add(metric)
    return problems


PLUGIN_PROBLEMS.extend(load_plugins())
