"""Prefix systems: how a count is scaled in text, both when a person writes a budget and when an output prints one.

A metric names its `PrefixSystem` (metrics.py): FLOPs, MACs and parameters are written with the decimal prefixes
(`4.1G`, `25.6M`), byte counts may also use the binary ones (`512MiB`). Parsing and printing read the same table,
so a ceiling the tools suggest is always one the budget grammar accepts. A leaf module: it imports nothing from
the package, so the config, the judge and every output can share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal


@dataclass(frozen=True)
class PrefixSystem:
    """The prefixes a budget may be written with (`scales`), those an output prints (`shown`, largest first) and
    the words that describe them in the budget grammar."""

    scales: Mapping[str, int]
    shown: tuple[str, ...]
    description: str

    def scale(self, prefix: str) -> int | None:
        """10^9 for `G` in the decimal system, 2^30 for `Gi` in the binary one; None when not a prefix here."""
        return self.scales.get(prefix)

    def split(self, text: str) -> list[tuple[int, str]]:
        """Every way `text` starts with a prefix of this system: (scale, the rest), the longest prefix first."""
        return [
            (self.scales[prefix], text[len(prefix) :])
            for prefix in sorted(self.scales, key=len, reverse=True)
            if text.startswith(prefix)
        ]

    def __or__(self, other: PrefixSystem) -> PrefixSystem:
        """A system accepting both prefix sets; it prints with this one's prefixes (`BINARY | SI` prints `GiB`)."""
        return PrefixSystem({**self.scales, **other.scales}, self.shown, f"{self.description} or {other.description}")

    def format(self, value: float, unit: str = "", digits: int = 3) -> str:
        """`8178368512` -> `8.18G`; with `unit="FLOPs"` -> `8.18 GFLOPs`. Keeps `digits` significant digits."""
        sign = "-" if value < 0 else ""
        magnitude = abs(value)
        for prefix in self.shown:
            scale = self.scales[prefix]
            if magnitude >= scale:
                text = _significant(magnitude / scale, digits)
                return f"{sign}{text} {prefix}{unit}" if unit else f"{sign}{text}{prefix}"
        text = _significant(magnitude, digits) if magnitude != int(magnitude) else str(int(magnitude))
        return f"{sign}{text} {unit}" if unit else f"{sign}{text}"

    def ceiling_above(self, value: int, digits: int = 3) -> str:
        """A budget string just above `value`: the count rounded *up* to `digits` significant digits with this
        system's prefixes (`8523456789` -> `8.53G`, `240` -> `240`), so a suggested ceiling never fails the count
        it came from."""
        smallest = min(self.scales[prefix] for prefix in self.shown)
        if value < smallest:
            return str(value)
        exact = Context(prec=len(str(value)) + 1)  # the default 28 digits would round a longer count, maybe down
        bigger = ""
        for prefix in self.shown:
            scale = self.scales[prefix]
            if value >= scale:
                mantissa = exact.divide(Decimal(value), Decimal(scale))
                whole = len(str(int(mantissa)))
                step = Decimal(1).scaleb(-max(digits - whole, 0))
                rounded = mantissa.quantize(step, rounding=ROUND_CEILING)
                if bigger and rounded * scale >= self.scales[bigger]:
                    return f"1{bigger}"  # 999.9996k rounds up to 1000k: that is 1M
                return f"{rounded.normalize():f}{prefix}"
            bigger = prefix
        return str(value)


def _significant(number: float, digits: int) -> str:
    whole = len(str(int(number))) if number >= 1 else 1
    return f"{number:.{max(digits - whole, 0)}f}"


#: Decimal prefixes; `k` and `K` both mean 10^3 because both are common and neither is ambiguous (`k` is printed).
SI = PrefixSystem(
    {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15},
    ("P", "T", "G", "M", "k"),
    "decimal prefix k/K, M, G, T, P (10^3..10^15)",
)

#: Binary prefixes (IEC): `Ki` is 2^10, `Gi` 2^30. For byte counts, where memory sizes are written this way.
BINARY = PrefixSystem(
    {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50},
    ("Pi", "Ti", "Gi", "Mi", "Ki"),
    "binary prefix Ki, Mi, Gi, Ti, Pi (2^10..2^50)",
)
