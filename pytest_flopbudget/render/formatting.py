"""Every figure and phrase the outputs share, in one place: counts with decimal prefixes (k, M, G, T, P) as budgets
are written, metric values and titles, percentages and plurals, so the terminal, the CLI and every CI output print
the same figures. Phrasing a verdict is the judge's (`judge.reason`): this module knows nothing of verdicts."""

from __future__ import annotations

from pytest_flopbudget.config.budget import UNIT_NAMES
from pytest_flopbudget.kinds import Metric

PREFIXES = (("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_count(value: float, unit: str = "", digits: int = 3) -> str:
    """`8178368512` -> `8.18G`; `format_count(8.18e9, "FLOPs")` -> `8.18 GFLOPs`. Keeps `digits` significant digits."""
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    for prefix, scale in PREFIXES:
        if magnitude >= scale:
            text = _significant(magnitude / scale, digits)
            return f"{sign}{text} {prefix}{unit}" if unit else f"{sign}{text}{prefix}"
    text = _significant(magnitude, digits) if magnitude != int(magnitude) else str(int(magnitude))
    return f"{sign}{text} {unit}" if unit else f"{sign}{text}"


def _significant(number: float, digits: int) -> str:
    whole = len(str(int(number))) if number >= 1 else 1
    return f"{number:.{max(digits - whole, 0)}f}"


def format_value(value: int, metric: str, digits: int = 3) -> str:
    """`8.52 GFLOPs`, `2.05 GMACs`, `25.6M params`, `3 skipped op calls`."""
    if metric == "params":
        return f"{format_count(value, digits=digits)} params"
    if metric == Metric.SKIPPED:
        return f"{plural(value, 'skipped op call')}"
    return format_count(value, "FLOPs" if metric == "flops" else "MACs", digits=digits)


def format_pair(a: int, b: int, metric: str) -> tuple[str, str]:
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


#: How each metric is named in tables and annotations (the unit names budgets are written with).
METRIC_TITLES = UNIT_NAMES


def metric_title(metric: str | None) -> str:
    return METRIC_TITLES.get(metric or "", metric or "")


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 model`, `3 models`, `2 issues`."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


#: How the model's own forward (ops outside any submodule) is labelled among its layers.
ROOT_LABEL = "(model)"


def layer_label(path: str) -> str:
    """A layer path as tables show it: the root (the empty path) is `(model)`."""
    return path or ROOT_LABEL


def ceiling_above(value: int, digits: int = 3) -> str:
    """A budget string just above `value`: the count rounded *up* to `digits` significant digits, in the budget
    grammar (`8523456789` -> `8.53G`, `240` -> `240`), so a suggested ceiling never fails the count it came from."""
    from decimal import ROUND_CEILING, Context, Decimal

    from pytest_flopbudget.config.budget import PREFIXES

    if value < 1000:
        return str(value)
    exact = Context(prec=len(str(value)) + 1)  # the default 28 digits would round a longer count, maybe down
    bigger = ""
    for prefix, scale in sorted(PREFIXES.items(), key=lambda item: -item[1]):
        if prefix == "K":
            continue
        if value >= scale:
            mantissa = exact.divide(Decimal(value), Decimal(scale))
            whole = len(str(int(mantissa)))
            step = Decimal(1).scaleb(-max(digits - whole, 0))
            rounded = mantissa.quantize(step, rounding=ROUND_CEILING)
            if rounded >= 1000 and bigger:
                return f"1{bigger}"  # 999.9996k rounds up to 1000k: that is 1M
            return f"{rounded.normalize():f}{prefix}"
        bigger = prefix
    return str(value)
