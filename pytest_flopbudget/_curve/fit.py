"""Exact polynomials from point counts: tensor-product interpolation on a lattice, verified off it.

A model's cost at integer sizes of its named dims is a polynomial (matmuls, attention), or a quasi-polynomial (a
strided convolution's output is `floor((n + 2p - k) / s) + 1`: one polynomial per residue of n modulo the total
stride), or piecewise (a model that branches on a size). So the fit is built on a lattice, multiples of a step `G`
as large as the range's low end allows (a multiple of any stride up to it), where every such cost is one
polynomial:

1. per dim, the degree: counts along the dim at consecutive lattice points until the finite difference one order
   above vanishes for every series (every metric of every layer);
2. the tensor grid of (degree + 1) points per dim, and each series interpolated exactly (integer arithmetic);
3. verification at lattice points the fit was not built from (the degree probes and the far corner): a miss is a
   piecewise cost, and in one dim the break is found by bisection; a lattice of `3 x 2**k`, `5 x 2**k`, `7 x 2**k`
   is tried before concluding so, for strides such as 14 or 320;
4. off the lattice, per dim: at a prime, an odd size and an odd multiple of `G/2` (holding there: every size),
   else at odd multiples of `G/2`, `G/4`, ..., to find the smallest step the formula holds at.

A stride larger than the range's low end cannot be told from a branch on the size: it is reported as not one
polynomial, never as a formula that holds.

Everything here is arithmetic on what `sample(point)` returns; `engine.py` turns counts into samples.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from math import lcm, prod

from pytest_flopbudget._curve.polynomial import Exponents, Polynomial

#: A point: one size per dim, in the dims' order.
Point = tuple[int, ...]
#: One counted figure's values at a point, by series key (a layer's metric, a total).
Sample = Mapping[Hashable, int]

#: A lattice leaves at least this many multiples in the range (a degree-2 cost needs 4 to be found, 2 more to verify).
MIN_LATTICE_POINTS = 6
#: The fit is checked at no fewer lattice points it was not built from.
MIN_VERIFIED = 2
#: The highest degree looked for: beyond it the cost is taken as no polynomial at all.
MAX_DEGREE = 6
#: The odd parts of the lattice steps tried in turn (strides of 14, 48 or 320 need a 7, a 3 or a 5).
ODD_PARTS = (1, 3, 5, 7)


class FitError(ValueError):
    """The counts are no polynomial that can be found on the range (too few sizes, or no degree found)."""


@dataclass
class Fit:
    """The polynomial of every series, and where it was found to hold (see `formula.Holds` for the fields)."""

    polys: dict[Hashable, Polynomial]
    step: dict[str, int]
    ranges: dict[str, tuple[int, int]]
    piecewise: bool
    broken_at: dict[str, int] | None
    failing: set[Hashable]
    samples: int
    verified: int
    #: The polynomials come from one symbolic count, not from interpolation (`curve/symbolic.py`).
    symbolic: bool = False
    #: Why the backend's symbolic count was not used, where it has one ("" otherwise).
    fallback: str = ""


class Sampler:
    """Counts each point once: the fit, its verification and the step search ask for points again."""

    def __init__(self, sample: Callable[[Point], Sample]) -> None:
        self._sample = sample
        self.cache: dict[Point, Sample] = {}

    def __call__(self, point: Point) -> Sample:
        if point not in self.cache:
            self.cache[point] = self._sample(point)
        return self.cache[point]


def fit(
    sample: Callable[[Point], Sample],
    dims: Sequence[str],
    ranges: Sequence[tuple[int, int]],
    core: Callable[[Hashable], bool] = lambda key: True,
) -> Fit:
    """The exact polynomial of every series `sample` returns, over `ranges` (inclusive) of `dims`.

    `core(key)` tells the series that decide the lattice and the step (sums of per-op costs); the others (a peak,
    a maximum) are fitted on the same points and reported in `failing` where they miss.
    """
    for dim, (low, high) in zip(dims, ranges):
        if high - low + 1 < MIN_LATTICE_POINTS:
            raise FitError(f"{dim} in [{low}, {high}] has fewer than {MIN_LATTICE_POINTS} sizes to find a formula on")
    sampler = Sampler(sample)
    first: _Attempt | None = None
    for odd in ODD_PARTS:
        steps = [_lattice_step(low, high, odd) for low, high in ranges]
        if any(step is None for step in steps) or (odd > 1 and all(s == 1 for s in steps)):
            continue
        attempt = _Attempt(sampler, dims, ranges, [s for s in steps if s is not None], core)
        if not attempt.run():
            continue
        if not attempt.missed:
            return _finish(attempt, sampler)
        first = first or attempt
    if first is None:
        raise FitError(f"the cost has no polynomial of degree {MAX_DEGREE} or less in {', '.join(dims)} on the range")
    return _finish(first, sampler)


class _Attempt:
    """One lattice: its degrees, grid, fit and the lattice points it missed at."""

    def __init__(
        self,
        sampler: Sampler,
        dims: Sequence[str],
        ranges: Sequence[tuple[int, int]],
        steps: list[int],
        core: Callable[[Hashable], bool],
    ) -> None:
        self.sampler = sampler
        self.dims = list(dims)
        self.ranges = list(ranges)
        self.steps = steps
        self.core = core
        self.axes = [_multiples(low, high, step) for (low, high), step in zip(ranges, steps)]
        self.base: Point = tuple(axis[0] for axis in self.axes)
        self.degrees: list[int] = []
        self.polys: dict[Hashable, Polynomial] = {}
        self.checked: list[Point] = []
        self.missed: list[Point] = []
        self.failing: set[Hashable] = set()
        #: Core series with no polynomial of degree MAX_DEGREE or less along some dim (a sort's `n*ceil(log2(n))`):
        #: fitted like a peak, reported in `failing`, so the other series keep their exact formulas.
        self.demoted: set[Hashable] = set()

    def is_core(self, key: Hashable) -> bool:
        return self.core(key) and key not in self.demoted

    def along(self, axis: int, index: int) -> Point:
        point = list(self.base)
        point[axis] = self.axes[axis][index]
        return tuple(point)

    def run(self) -> bool:
        """Fit and verify on the lattice; False when no degree is found."""
        for axis in range(len(self.dims)):
            degree = self._degree(axis)
            if degree is None:
                return False
            self.degrees.append(degree)
        grid = [list(axis[: degree + 1]) for axis, degree in zip(self.axes, self.degrees)]
        samples = {point: self.sampler(point) for point in product(*grid)}
        keys = list(dict.fromkeys(key for sample in samples.values() for key in sample))
        self.polys = interpolate(self.dims, grid, samples, keys)
        for point in self._verification_points():
            self.check(point)
        return True

    def _degree(self, axis: int) -> int | None:
        """The lowest degree along `axis` at which every core series' next finite difference vanishes. A series
        whose differences vanish at no degree up to MAX_DEGREE while others' do is demoted (not core): one metric
        that is no polynomial must not cost the others their formulas. None when no core series has one, or the
        lattice has too few sizes to tell."""
        settled: dict[Hashable, int] = {}
        for degree in range(MAX_DEGREE + 1):
            if degree + 2 > len(self.axes[axis]):
                return None  # too few sizes to tell: another lattice, or no formula
            values = [self.sampler(self.along(axis, i)) for i in range(degree + 2)]
            keys = {key for sample in values for key in sample if self.is_core(key)}
            for key in keys - set(settled):
                if _difference([sample.get(key, 0) for sample in values]) == 0:
                    settled[key] = degree
            if keys <= set(settled):
                return degree
        if not settled:
            return None
        self.demoted |= {key for key in keys if key not in settled}
        return max(settled.values())

    def _verification_points(self) -> list[Point]:
        """The degree probes (one lattice point past the grid per dim) and the far corner; a point between them
        where that makes fewer than `MIN_VERIFIED`."""
        points = [self.along(axis, degree + 1) for axis, degree in enumerate(self.degrees)]
        points.append(tuple(axis[-1] for axis in self.axes))
        points = list(dict.fromkeys(points))
        if len(points) < MIN_VERIFIED:
            points.append(tuple(axis[(len(axis) + degree) // 2] for axis, degree in zip(self.axes, self.degrees)))
        return list(dict.fromkeys(points))

    def check(self, point: Point) -> bool:
        """Whether every core series equals its formula at `point`; misses of other series are noted."""
        sample = self.sampler(point)
        values = dict(zip(self.dims, point))
        keys = set(sample) | set(self.polys)
        missed = {key for key in keys if self.polys.get(key, Polynomial(self.dims)).at(values) != sample.get(key, 0)}
        self.checked.append(point)
        core_missed = any(self.is_core(key) for key in missed)
        if core_missed:
            self.missed.append(point)
        else:
            self.failing |= missed
        return not core_missed


def _finish(attempt: _Attempt, sampler: Sampler) -> Fit:
    ranges = {dim: bounds for dim, bounds in zip(attempt.dims, attempt.ranges)}
    broken_at: dict[str, int] | None = None
    piecewise = bool(attempt.missed)
    if piecewise:
        broken = attempt.missed[0]
        if len(attempt.dims) == 1:
            good, broken = _first_miss(attempt)
            ranges[attempt.dims[0]] = (attempt.ranges[0][0], good)
        broken_at = dict(zip(attempt.dims, broken))
    step = {dim: s for dim, s in zip(attempt.dims, attempt.steps)}
    if not piecewise or len(attempt.dims) == 1:
        step = dict(zip(attempt.dims, _smallest_steps(attempt, [ranges[dim] for dim in attempt.dims])))
    return Fit(
        polys=attempt.polys,
        step=step,
        ranges=ranges,
        piecewise=piecewise,
        broken_at=broken_at,
        failing=attempt.failing | attempt.demoted,
        samples=len(sampler.cache),
        verified=len(set(attempt.checked)),
    )


def _first_miss(attempt: _Attempt) -> tuple[int, Point]:
    """One dim: the largest lattice size the fit holds at below the first it misses (bisection; one break)."""
    axis = attempt.axes[0]
    good = attempt.degrees[0]  # the grid's last point: the fit holds there by construction
    bad = len(axis) - 1
    missed = min(axis.index(point[0]) for point in attempt.missed)
    bad = min(bad, missed)
    while bad - good > 1:
        middle = (good + bad) // 2
        if attempt.check((axis[middle],)):
            good = middle
        else:
            bad = middle
    return axis[good], (axis[bad],)


def _smallest_steps(attempt: _Attempt, bounds: list[tuple[int, int]]) -> list[int]:
    """The smallest step the fit holds at along each dim: every size when it holds at a prime near the top, an odd
    size near the bottom and an odd multiple of `G/2`; else the first of `G/2`, `G/4`, ..., the odd part of `G`,
    at whose odd multiples it misses, doubled. The dims are moved off the lattice together: whether each holds at
    every size is then asked one at a time, but the scan stops for all at the first level where they miss
    together (strided dims share their stride; a coarser step is never a wrong one)."""
    steps = list(attempt.steps)
    everywhere: dict[int, list[int]] = {}
    for axis, step in enumerate(steps):
        if step > 1:
            low, high = bounds[axis]
            sizes = [*_primes_in(low, high, 1), *_off_lattice(low, high, 1, 2)[-1:]]  # odd: near each end
            if step % 2 == 0:
                sizes += _off_lattice(low, high, step // 2, step)[:1]
            everywhere[axis] = list(dict.fromkeys(sizes))
    holding = _holding(attempt, {axis: sizes for axis, sizes in everywhere.items() if sizes})
    for axis in holding:
        steps[axis] = 1
    active = [axis for axis in everywhere if axis not in holding]
    while active:
        finer = {axis: steps[axis] // 2 if steps[axis] % 2 == 0 else 1 for axis in active}
        candidates = {axis: _off_lattice(*bounds[axis], finer[axis], steps[axis]) for axis in active}
        holding = _holding(attempt, {axis: sizes for axis, sizes in candidates.items() if sizes}, one_by_one=False)
        for axis in holding:
            steps[axis] = finer[axis]
        active = [axis for axis in holding if steps[axis] > 1]
    return steps


def _holding(attempt: _Attempt, candidates: dict[int, list[int]], one_by_one: bool = True) -> set[int]:
    """The dims at whose `candidates` sizes the fit holds (the others at the lattice's first point): checked with
    every dim moved at once, then dim by dim where that misses (with `one_by_one`; else none is taken to hold,
    which keeps each dim's step sound, if perhaps coarser than it could be)."""
    if not candidates:
        return set()
    joint = []
    for i in range(max(len(sizes) for sizes in candidates.values())):
        point = list(attempt.base)
        for axis, sizes in candidates.items():
            point[axis] = sizes[min(i, len(sizes) - 1)]
        joint.append(tuple(point))
    if all(attempt.check(point) for point in joint):
        return set(candidates)
    if len(candidates) == 1 or not one_by_one:
        return set()
    return {
        axis for axis, sizes in candidates.items() if all(attempt.check(_moved(attempt.base, axis, x)) for x in sizes)
    }


def _moved(point: Point, axis: int, value: int) -> Point:
    moved = list(point)
    moved[axis] = value
    return tuple(moved)


def _off_lattice(low: int, high: int, finer: int, step: int) -> list[int]:
    """Two sizes in [low, high] that are multiples of `finer` but not of `step`: the largest and the smallest."""
    top = [x for x in range(high - high % finer, max(low - 1, high - 4 * step), -finer) if x % step][:1]
    start = -(-low // finer) * finer
    bottom = [x for x in range(start, min(high + 1, start + 4 * step), finer) if x % step][:1]
    return list(dict.fromkeys(top + bottom))


def _primes_in(low: int, high: int, count: int) -> list[int]:
    found: list[int] = []
    x = high
    if high > 10**9:  # trial division would take long; an odd size tests the same residues
        return found
    while x >= max(low, 2) and len(found) < count:
        if all(x % d for d in range(2, int(x**0.5) + 1)):
            found.append(x)
        x -= 1
    return found


def _lattice_step(low: int, high: int, odd: int) -> int | None:
    """The largest `odd x 2**k`, at most `low` (so the lattice starts within the range's low end: a branch on the
    size is not mistaken for a stride), that leaves at least `MIN_LATTICE_POINTS` multiples in [low, high]; None
    when there is none."""
    step = None
    candidate = odd
    while candidate <= max(low, 1) and len(_multiples(low, high, candidate)) >= MIN_LATTICE_POINTS:
        step = candidate
        candidate *= 2
    return step


def _multiples(low: int, high: int, step: int) -> range:
    """The multiples of `step` in [low, high], lazily: a range of 10**18 sizes is never listed."""
    return range(-(-low // step) * step, high + 1, step)


def _difference(values: Sequence[int]) -> int:
    """The finite difference of the highest order of equally spaced values."""
    row = list(values)
    while len(row) > 1:
        row = [b - a for a, b in zip(row, row[1:])]
    return row[0]


def interpolate(
    dims: Sequence[str], grid: Sequence[Sequence[int]], samples: Mapping[Point, Sample], keys: Iterable[Hashable]
) -> dict[Hashable, Polynomial]:
    """The polynomial through the tensor `grid` of each series `key` (absent: 0), in exact integer arithmetic:
    Lagrange bases over a common denominator per dim, contracted one dim at a time."""
    bases = [_lagrange_basis(nodes) for nodes in grid]
    denominator = prod(d for _, d in bases)
    polys: dict[Hashable, Polynomial] = {}
    points = list(product(*(range(len(nodes)) for nodes in grid)))
    done: dict[tuple[int, ...], Polynomial] = {}
    for key in keys:
        values = tuple(samples[tuple(nodes[i] for nodes, i in zip(grid, index))].get(key, 0) for index in points)
        known = done.get(values)
        if known is None:
            known = done[values] = _contract(dims, bases, points, values, denominator)
        polys[key] = known
    return polys


def _contract(
    dims: Sequence[str],
    bases: list[tuple[list[list[int]], int]],
    points: list[tuple[int, ...]],
    values: tuple[int, ...],
    denominator: int,
) -> Polynomial:
    if not any(values):
        return Polynomial(dims)
    table: dict[tuple[int, ...], int] = dict(zip(points, values))
    for axis, (matrix, _) in enumerate(bases):
        contracted: dict[tuple[int, ...], int] = {}
        for index, value in table.items():
            if not value:
                continue
            row = matrix[index[axis]]
            for exponent, weight in enumerate(row):
                if weight:
                    key = (*index[:axis], exponent, *index[axis + 1 :])
                    contracted[key] = contracted.get(key, 0) + value * weight
        table = contracted
    terms: dict[Exponents, Fraction] = {key: Fraction(value, denominator) for key, value in table.items() if value}
    return Polynomial(dims, terms)


def _lagrange_basis(nodes: Sequence[int]) -> tuple[list[list[int]], int]:
    """Integer coefficients `M[i][e]` and a denominator `D`: the i-th Lagrange basis polynomial is
    `sum(M[i][e] * x**e) / D`."""
    numerators: list[list[int]] = []
    scales: list[int] = []
    for i, node in enumerate(nodes):
        coefficients = [1]
        scale = 1
        for j, other in enumerate(nodes):
            if j == i:
                continue
            coefficients = [
                (coefficients[e - 1] if e > 0 else 0) - other * (coefficients[e] if e < len(coefficients) else 0)
                for e in range(len(coefficients) + 1)
            ]
            scale *= node - other
        numerators.append(coefficients)
        scales.append(scale)
    common = lcm(*(abs(s) for s in scales)) if scales else 1
    matrix = [[c * (common // s) for c in row] for row, s in zip(numerators, scales)]
    return matrix, common
