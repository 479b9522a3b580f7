"""How a piece of work grows with its input, measured so that the answer does not depend on the machine.

A test asserts no wall-clock limit (a busy CI machine rejected correct changes): speed figures belong in
`benchmarks/`. What a test can assert on any machine is the shape of the cost. `growth(work, small, factor)` runs
`work(n)` at `n = small` and at `n = factor * small` and returns the ratio of their CPU times: about `factor` for
linear work, `factor ** 2` for quadratic work. Each size is timed as the least of `repeats` runs, the two sizes
taking turns, of this process's CPU time (`time.process_time`, which other processes on the machine do not add
to) with the garbage collector off, so a burst of load inflates neither. `assert_linear` asserts it below
`LINEAR` times the factor: with the default factor of 8, linear work measures about 8 (a fixed cost makes it
less; on a loaded 2-core machine up to about 14 was seen) and quadratic work about 64, and the bound is 24.

Importable from any test module because `tests/conftest.py` puts this directory on `sys.path` (prepend mode).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: The bound on `growth(...) / factor` that linear work stays under and quadratic work does not.
LINEAR = 3.0


def cpu_seconds(call: Callable[[], object]) -> float:
    """The CPU time of one run of `call()`, the garbage collector off while it runs."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        call()
        return time.process_time() - start
    finally:
        gc.enable()


def growth(work: Callable[[int], Callable[[], object]], small: int, factor: int = 8, repeats: int = 2) -> float:
    """CPU time of `work(factor * small)()` over that of `work(small)()`; `work(n)` builds the input of size `n`
    (not timed) and returns the call to time."""
    small_call = work(small)
    large_call = work(factor * small)
    small_call()  # warm-up: first-call imports and caches are not the work measured
    small_best = large_best = float("inf")
    for _ in range(repeats):
        small_best = min(small_best, cpu_seconds(small_call))
        large_best = min(large_best, cpu_seconds(large_call))
    return large_best / max(small_best, 1e-6)


def assert_linear(work: Callable[[int], Callable[[], object]], small: int, factor: int = 8, repeats: int = 2) -> None:
    """`work` grows at most linearly (within `LINEAR`) between `small` and `factor * small`."""
    ratio = growth(work, small, factor, repeats)
    assert ratio < LINEAR * factor, (
        f"{factor}x the input took {ratio:.1f}x the CPU time (linear work takes about {factor}x): not linear"
    )
