"""Human-readable figures: decimal prefixes (k, M, G, T, P), as budgets are written."""

from __future__ import annotations

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
