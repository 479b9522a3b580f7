"""Every figure and phrase the outputs share, in one place: counts with prefixes as budgets are written (the
`units` prefix systems), metric values and titles (from the `metrics` definitions), percentages and plurals, so the
terminal, the CLI and every CI output print the same figures. Phrasing a verdict is the judge's (`judge.reason`):
this module knows nothing of verdicts."""

from __future__ import annotations

from pytest_flopbudget._metrics import METRICS, Metric, by_name
from pytest_flopbudget._units import SI, PrefixSystem


def format_count(value: float, unit: str = "", digits: int = 3, prefixes: PrefixSystem = SI) -> str:
    """`8178368512` -> `8.18G`; `format_count(8.18e9, "FLOPs")` -> `8.18 GFLOPs`. Keeps `digits` significant digits."""
    return prefixes.format(value, unit, digits)


def format_value(value: int, metric: Metric, digits: int = 3) -> str:
    """`8.52 GFLOPs`, `2.05 GMACs`, `25.6M params`, `3 skipped op calls`: as the metric's definition prints it."""
    return by_name(metric).format_value(value, digits)


def format_figure(value: int, metric: Metric) -> str:
    """A figure in a table column headed by the metric: `8.18G`, `25.6M`; an exact count (`3`) for whole ones."""
    return str(value) if metric.whole else format_count(value, prefixes=metric.prefixes)


def format_pair(a: int, b: int, metric: Metric) -> tuple[str, str]:
    """Format two values with enough digits that different values never print the same (8.301G vs 8.300G)."""
    digits = 3
    while True:
        first, second = format_value(a, metric, digits), format_value(b, metric, digits)
        if a == b or first != second or digits >= 20:
            return first, second
        digits += 1


def format_percent(delta: int, base: int) -> str:
    """`+2.7%`; small changes keep two significant digits (`+0.012%`) so they never read as `+0.0%`."""
    if base == 0:
        return "new" if delta else "+0.0%"
    percent = 100.0 * delta / base
    if percent == 0 or abs(percent) >= 0.1:
        return f"{percent:+.1f}%"
    return f"{percent:+.2g}%"


def metric_title(metric: Metric | None) -> str:
    """How a metric is named in tables and annotations (`FLOPs`, `skipped op calls`); an unknown name as given."""
    definition = METRICS.get(metric or "")
    return definition.label if definition is not None else metric or ""


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 model`, `3 models`, `2 issues`."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


#: How the model's own forward (ops outside any submodule) is labelled among its layers.
ROOT_LABEL = "(model)"


def layer_label(path: str) -> str:
    """A layer path as tables show it: the root (the empty path) is `(model)`."""
    return path or ROOT_LABEL


def ceiling_above(value: int, digits: int = 3, prefixes: PrefixSystem = SI) -> str:
    """A budget string just above `value`: the count rounded *up* to `digits` significant digits, in the budget
    grammar (`8523456789` -> `8.53G`, `240` -> `240`), so a suggested ceiling never fails the count it came from."""
    return prefixes.ceiling_above(value, digits)
