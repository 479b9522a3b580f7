"""What a curve count yields: every metric as an exact polynomial in the named dims, per layer and in total, and
where that polynomial was found to hold.

Plain data with a JSON round trip (`to_dict` / `from_dict`), like `Report`, so that a baseline can keep it and a
reporter can print it. A count's JSON carries the totals under `"formula"` (`{"macs": "64*seq**2 + ..."}`) and the
rest under `"curve"`: the dims and their ranges, where the formulas hold, and the per-layer formulas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_flopbudget._curve.polynomial import Polynomial, parse
from pytest_flopbudget._display import html_of
from pytest_flopbudget._json_fields import a_bool, a_list, a_str, an_object
from pytest_flopbudget._metrics import METRICS, Metric, by_name

#: A dim's name, as pyproject's `dims` and `--dim` accept it.
_DIM = re.compile(r"[A-Za-z_]\w*")
#: Bumped when the `"curve"` layout changes incompatibly.
FORMULA_FORMAT = "pytest-flopbudget/formula/1"


@dataclass(frozen=True)
class Holds:
    """Where the formulas equal the point counts.

    `step[dim]`: they hold at the multiples of it (1: at every size), the lattice the fit was built on and every
    point checked off it say so (a strided convolution's cost is exact only at multiples of its total stride).
    `ranges[dim]`: the sizes they were found to hold on, the whole requested range unless the cost is piecewise.
    `piecewise`: the cost is not one polynomial over the range (a model that branches on a size); `broken_at` is
    the first point found where the formulas differ from the count. `inexact`: metrics whose formula missed a
    point it should hold at (a peak is a maximum, not always one polynomial) and must not be trusted.
    `samples`: how many point counts it took; `verified`: how many of them the fit was not built from.
    `symbolic`: the formulas come from one symbolic count of every size (JAX), proven at the entry's point, not
    from interpolation; `fallback`: why a backend that has a symbolic count interpolated instead ("" otherwise).
    """

    step: dict[str, int]
    ranges: dict[str, tuple[int, int]]
    piecewise: bool = False
    broken_at: dict[str, int] | None = None
    inexact: tuple[Metric, ...] = ()
    samples: int = 0
    verified: int = 0
    symbolic: bool = False
    fallback: str = ""

    @property
    def exact(self) -> bool:
        """The formulas hold on the whole requested range at every size (or at every multiple of `step`)."""
        return not self.piecewise and not self.inexact

    def describe(self) -> str:
        """`exact on seq in [64, 8192]`, `exact at height, width multiples of 32 in [64, 1024]`, ..."""
        dims = list(self.ranges)
        stepped = [dim for dim in dims if self.step.get(dim, 1) > 1]
        ranges = ", ".join(f"{dim} in [{low}, {high}]" for dim, (low, high) in self.ranges.items())
        if not stepped:
            where = f"on {ranges}"
        else:
            steps = {self.step[dim] for dim in stepped}
            if len(steps) == 1:
                multiples = f"{', '.join(stepped)} multiple{'s' if len(stepped) > 1 else ''} of {steps.pop()}"
            else:
                multiples = ", ".join(f"{dim} multiple of {self.step[dim]}" for dim in stepped)
            where = f"at {multiples}, {ranges}"
        text = f"exact {where}"
        if self.piecewise:
            broken = self.broken_at or {}
            point = ", ".join(f"{dim}={value}" for dim, value in broken.items())
            inside = all(low <= broken.get(dim, low) <= high for dim, (low, high) in self.ranges.items())
            if inside:  # several dims: where it stops holding is not narrowed down
                text = f"not one polynomial on {ranges}: the formula misses the count at {point}"
            else:
                text = f"piecewise: {text} only; the cost is not one polynomial beyond (it differs at {point})"
        if self.inexact:
            text += f"; not exact for {', '.join(m.label for m in self.inexact)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "step": dict(self.step),
            "ranges": {dim: list(bounds) for dim, bounds in self.ranges.items()},
            "piecewise": self.piecewise,
            "inexact": [str(m) for m in self.inexact],
            "samples": self.samples,
            "verified": self.verified,
            "text": self.describe(),
        }
        if self.broken_at is not None:
            data["broken_at"] = dict(self.broken_at)
        if self.symbolic:
            data["symbolic"] = True
        if self.fallback:
            data["fallback"] = self.fallback
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Holds:
        broken = data.get("broken_at")
        return cls(
            step={str(k): _size(v, f"step.{k}") for k, v in an_object(data.get("step"), "step").items()},
            ranges={str(k): _bounds(v, f"ranges.{k}") for k, v in an_object(data.get("ranges"), "ranges").items()},
            piecewise=a_bool(data.get("piecewise", False), "piecewise"),
            broken_at=None
            if broken is None
            else {str(k): _size(v, f"broken_at.{k}") for k, v in an_object(broken, "broken_at").items()},
            inexact=tuple(by_name(a_str(m, "inexact")) for m in a_list(data.get("inexact", []), "inexact")),
            samples=_size(data.get("samples", 0), "samples", minimum=0),
            verified=_size(data.get("verified", 0), "verified", minimum=0),
            symbolic=a_bool(data.get("symbolic", False), "symbolic"),
            fallback=a_str(data.get("fallback", ""), "fallback"),
        )


@dataclass
class Formula:
    """Every metric of one model as a polynomial in `dims`: `totals[metric]` and, for the metrics a report keeps per
    layer, `layers[path][metric]` (exclusive of the children, as `Report.layers`: they add up to the totals).

    `point` is the entry's point (where point budgets apply), `ranges` the range asked for each dim (`curve`);
    `holds` says where the formulas are exact (its `ranges` are narrower where the cost is piecewise).
    """

    dims: tuple[str, ...]
    totals: dict[Metric, Polynomial]
    layers: dict[str, dict[Metric, Polynomial]]
    holds: Holds
    point: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _repr_html_(self) -> str | None:
        """What Jupyter shows: the formulas, total and per layer, and the log-log picture (`curve/notebook.py`,
        plugged in by the package root: `display.use_html`)."""
        return html_of(self)

    def total(self, metric: Metric | str) -> Polynomial:
        """The model's formula for `metric` (zero where it has none)."""
        return self.totals.get(by_name(metric), Polynomial(self.dims))

    def layer(self, path: str, metric: Metric | str) -> Polynomial:
        """One layer's own (exclusive) formula for `metric` (zero where it has none)."""
        return self.layers.get(path, {}).get(by_name(metric), Polynomial(self.dims))

    def inclusive(self, path: str, metric: Metric | str) -> Polynomial:
        """The formula of `path` and everything below it (`""` is the whole model)."""
        total = Polynomial(self.dims)
        for layer, polys in self.layers.items():
            if not path or layer == path or layer.startswith(path + "."):
                total = total + polys.get(by_name(metric), Polynomial(self.dims))
        return total

    def layers_above(self, metric: Metric | str, dim: str, degree: int) -> dict[str, Polynomial]:
        """The layers whose own formula for `metric` grows faster than `dim**degree`, each with the terms that do
        (`{"h.0.attn": 128*seq**2}`), in the model's order: what a `max-degree` budget names."""
        found = {path: self.layer(path, metric).above(dim, degree) for path in self.layers}
        return {path: poly for path, poly in found.items() if poly.terms}

    def to_dict(self) -> dict[str, Any]:
        """`{"formula": {metric: text}, "curve": {...}}`: the two keys a count's JSON adds to the Report's."""
        return {
            "formula": {str(m): str(p) for m, p in self.totals.items()},
            "curve": {
                "format": FORMULA_FORMAT,
                "dims": list(self.dims),
                "point": dict(self.point),
                "ranges": {dim: list(bounds) for dim, bounds in self.ranges.items()},
                "holds": self.holds.to_dict(),
                "layers": {path: {str(m): str(p) for m, p in polys.items()} for path, polys in self.layers.items()},
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Formula:
        """Inverse of `to_dict` (also reads a count's whole JSON); raises `ValueError` saying what is wrong."""
        curve = an_object(data.get("curve"), "curve")
        if curve.get("format") != FORMULA_FORMAT:
            raise ValueError(f"curve.format is {curve.get('format')!r}, expected {FORMULA_FORMAT!r}")
        dims = tuple(a_str(d, "curve.dims") for d in a_list(curve.get("dims"), "curve.dims"))
        if len(set(dims)) != len(dims) or not all(_DIM.fullmatch(d) for d in dims):
            raise ValueError("curve.dims must be distinct names such as seq or height")

        def polys(value: object, where: str) -> dict[Metric, Polynomial]:
            known = an_object(value, where)
            unknown = [name for name in known if name not in METRICS]
            if unknown:
                raise ValueError(f"{where} has an unknown metric {unknown[0]!r}")
            return {by_name(m): parse(a_str(t, f"{where}.{m}"), dims) for m, t in known.items()}

        return cls(
            dims=dims,
            totals=polys(data.get("formula"), "formula"),
            layers={
                str(path): polys(value, f"curve.layers[{path!r}]")
                for path, value in an_object(curve.get("layers"), "curve.layers").items()
            },
            holds=Holds.from_dict(an_object(curve.get("holds"), "curve.holds")),
            point={str(k): _size(v, f"point.{k}") for k, v in an_object(curve.get("point", {}), "point").items()},
            ranges={
                str(k): _bounds(v, f"curve.ranges.{k}")
                for k, v in an_object(curve.get("ranges", {}), "curve.ranges").items()
            },
        )


def _size(value: object, where: str, minimum: int = 1) -> int:
    if type(value) is not int or value < minimum:
        raise ValueError(f"{where} must be an integer of at least {minimum}")
    return value


def _bounds(value: object, where: str) -> tuple[int, int]:
    items = a_list(value, where)
    if len(items) != 2:
        raise ValueError(f"{where} must be [low, high]")
    return _size(items[0], where), _size(items[1], where)
