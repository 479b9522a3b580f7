"""Many models on one machine: `check -j 2` against `-j 1`, pytest-xdist `-n 2` against a serial pytest, and the
count cache on a project of 200 models.

    python benchmarks/bench_parallel.py               # 3 rounds
    python benchmarks/bench_parallel.py --rounds 5
    python benchmarks/bench_parallel.py --skip-cache  # only the first two

In one run, interleaved round by round so that load on the machine hits every case alike (medians of the
per-round ratios, wall clock; the CPU time of each command and its children beside it):

- `flopbudget check --no-cache -j 2` over `-j 1` on 16 CPU-bound models (deep stacks of linear, layer-norm and
  GELU layers: each count is a second or so of Python work on fake tensors, 4 models in each of 4 modules), and
  `-j auto`; the outputs of every run must be byte-identical to `-j 1`'s;
- `pytest -n 2` over `pytest -p no:xdist` on the same 16 models (the pyproject's budget items, nothing else);
- the count cache on a generated project of 200 small models, one module each: `flopbudget check` when every
  model is unchanged (a hit for all 200), and after 1 and after 8 model files changed (those recounted).

It prints the cores this process may use and the load average before and after: on a machine other work is
using, the ratios are what that machine gave, not what an idle one would.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEEP = """\
from torch import nn


def deep(depth=400, width=64):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers)
"""

SMALL = """\
from torch import nn


def build():
    return nn.Sequential(nn.Linear(8, {width}), nn.ReLU(), nn.Linear({width}, 2))
"""


def deep_project(root: Path, models: int = 16, modules: int = 4) -> None:
    tables = []
    for module in range(modules):
        (root / f"deep{module}.py").write_text(DEEP)
    for number in range(models):
        tables.append(
            f'[tool.flopbudget.models.deep{number:02d}]\ntarget = "deep{number % modules}:deep"\n'
            f'inputs = [[1, {8 + number}, 64]]\nflops = "100G"\n'
        )
    (root / "pyproject.toml").write_text("\n".join(tables))


def small_project(root: Path, models: int = 200) -> None:
    tables = []
    for number in range(models):
        (root / f"small{number:03d}.py").write_text(SMALL.format(width=4 + number % 7))
        tables.append(
            f'[tool.flopbudget.models.small{number:03d}]\ntarget = "small{number:03d}:build"\n'
            f'inputs = [[1, 8]]\nflops = "1M"\n'
        )
    (root / "pyproject.toml").write_text("\n".join(tables))


def environment(work: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("PRE_COMMIT", "FLOPBUDGET_", "PYTEST_"))
    }
    env["XDG_CACHE_HOME"] = str(work / "xdg-cache")  # the key that signs records: not the user's
    return env


def timed(command: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and everything it started, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


def show(label: str, walls: list[float], cpus: list[float]) -> None:
    print(f"  {label:<44} wall {statistics.median(walls):7.2f} s   cpu {statistics.median(cpus):7.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-cache", action="store_true", help="leave out the 200-model cache project")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{sys.executable}, {cores} cores this process may use; load average before: {load()}")
    work = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    try:
        env = environment(work)
        deep = work / "deep"
        deep.mkdir()
        deep_project(deep)
        check = [sys.executable, "-m", "pytest_flopbudget", "check", "--no-cache"]
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        cases = {
            "check -j 1": ([*check, "-j", "1"], (1, 0)),
            "check -j 2": ([*check, "-j", "2"], (1, 0)),
            "check -j auto": ([*check, "-j", "auto"], (1, 0)),
            "pytest (serial)": ([*pytest, "-p", "no:xdist"], (0,)),
            "pytest -n 2": ([*pytest, "-n", "2"], (0,)),
        }
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        outputs: dict[str, set[str]] = {name: set() for name in cases if name.startswith("check")}
        for _ in range(args.rounds):
            for name, (command, ok) in cases.items():
                wall, cpu, out = timed(command, deep, env, ok)
                walls[name].append(wall)
                cpus[name].append(cpu)
                if name in outputs:
                    outputs[name].add(out)
        identical = all(outputs[name] == outputs["check -j 1"] for name in outputs)
        print(f"\n16 CPU-bound models ({args.rounds} rounds, medians):")
        for name in cases:
            show(name, walls[name], cpus[name])
        print(f"  check -j 2 / -j 1: {median_ratio(walls['check -j 2'], walls['check -j 1']):.2f}x the wall time "
              f"(target at most 0.65x); outputs identical to -j 1: {identical}")  # fmt: skip
        print(f"  check -j auto / -j 1: {median_ratio(walls['check -j auto'], walls['check -j 1']):.2f}x")
        print(f"  pytest -n 2 / serial: {median_ratio(walls['pytest -n 2'], walls['pytest (serial)']):.2f}x the wall "
              f"time (target at most 1.00x)")  # fmt: skip
        if not args.skip_cache:
            cache_project(work, env, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {load()}")


def cache_project(work: Path, env: dict[str, str], rounds: int) -> None:
    """The count cache on 200 models: a hit for all, then 1 and 8 changed model files recounted."""
    root = work / "two-hundred"
    root.mkdir()
    small_project(root)
    check = [sys.executable, "-m", "pytest_flopbudget", "check"]
    timed([*check, "-j", "auto"], root, env)  # fills the cache
    walls: dict[str, list[float]] = {"hit": [], "1 changed": [], "8 changed": []}
    cpus: dict[str, list[float]] = {name: [] for name in walls}
    for round_number in range(rounds):
        for name, changed in (("hit", 0), ("1 changed", 1), ("8 changed", 8)):
            for number in range(changed):
                path = root / f"small{number:03d}.py"
                path.write_text(path.read_text() + f"# edit {round_number} {name}\n")
            wall, cpu, _ = timed(check, root, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    print(f"\n200 models, the count cache ({rounds} rounds, medians; `flopbudget check`, one process):")
    for name in walls:
        show(f"check, {name}", walls[name], cpus[name])
    hit, one, eight = (statistics.median(walls[name]) for name in walls)
    each = (eight - one) / 7
    print(
        f"  a hit for all 200: {hit:.2f} s (target under 1 s); each changed model adds {each:.2f} s, after "
        f"{one - hit - each:.2f} s once for the first (importing torch); 200 unchanged models cost the hit"
    )


if __name__ == "__main__":
    main()
