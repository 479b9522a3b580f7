"""What the memory metrics cost: a count that measures bytes, param-bytes, buffer-bytes and peak memory against a
FLOPs-only count, ResNet-50 and Llama-7B on meta, measured in one run.

    python benchmarks/bench_memory_metrics.py                          # against 8e77c66, 5 rounds of 5 counts
    python benchmarks/bench_memory_metrics.py --against 8e77c66 --rounds 7 --repeat 5

The FLOPs-only count is the revision before the memory work (8e77c66, issue 19: FLOPs, MACs and parameters per
layer, no bytes, no peak tracking), extracted with `git archive` into a temporary folder as bench_revisions.py does.
Each round runs one child process per revision, alternating, so load on the machine hits both alike; a child
builds the model on the meta device (ResNet-50 at batch 1, 224x224; Llama-7B at sequence 2048), warms up with one
count under `no_grad` (as the plugin counts a configured inference model) and times the next ones. A child says
which memory metrics its reports measured, so a ratio is known to compare a count with all of them against one
with none. The figures that matter are the ratios of the medians, of the wall clock and of the counting process's
CPU time (which other load on a shared machine disturbs less); the issue asks for at most 1.2x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_revisions import extract  # noqa: E402

#: The issue's ceiling on the cost of the memory metrics.
CEILING = 1.2

CHILD = r"""
import json, sys, time
import torch
from pytest_flopbudget import count
case, repeat = sys.argv[1], int(sys.argv[2])
if case == "resnet50":
    from examples.resnet import resnet50
    with torch.device("meta"):
        model = resnet50().eval()
    inputs = (torch.randn(1, 3, 224, 224),)
else:
    from examples.decoder import Llama, LlamaConfig, llama_inputs
    cfg = LlamaConfig.llama_7b()
    with torch.device("meta"):
        model = Llama(cfg).eval()
    inputs = llama_inputs(cfg, seq=2048)
with torch.no_grad():
    report = count(model, *inputs)
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = count(model, *inputs)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
measured = sorted(str(m) for m in getattr(report, "optional_metrics", ()))
print(json.dumps({"median_s": sorted(times)[len(times) // 2], "median_cpu_s": sorted(cpu)[len(cpu) // 2],
                  "flops": report.flops, "memory_metrics": measured}))
"""

CASES = {"resnet50": "ResNet-50 (meta, 1x3x224x224)", "llama7b": "Llama-7B (meta, seq 2048)"}


def child(tree: Path, case: str, repeat: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(repeat)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="8e77c66", help="the FLOPs-only revision (default 8e77c66)")
    parser.add_argument("--rounds", type=int, default=5, help="child processes per revision and model")
    parser.add_argument("--repeat", type=int, default=5, help="timed counts per child")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        flops_only = extract(args.against, Path(tmp))
        for case, name in CASES.items():
            times: dict[str, list[float]] = {"flops_only": [], "memory": []}
            cpu: dict[str, list[float]] = {"flops_only": [], "memory": []}
            last: dict[str, dict[str, object]] = {}
            for _ in range(args.rounds):
                for label, tree in (("flops_only", flops_only), ("memory", ROOT)):
                    last[label] = child(tree, case, args.repeat)
                    times[label].append(float(last[label]["median_s"]))  # type: ignore[arg-type]
                    cpu[label].append(float(last[label]["median_cpu_s"]))  # type: ignore[arg-type]
            before, after = statistics.median(times["flops_only"]), statistics.median(times["memory"])
            before_cpu, after_cpu = statistics.median(cpu["flops_only"]), statistics.median(cpu["memory"])
            results[case] = {
                "model": name,
                "flops_only_s": round(before, 4),
                "with_memory_s": round(after, 4),
                "ratio": round(after / before, 3),
                # CPU time of the counting process: less sensitive than the wall clock to other load on the machine
                "cpu_ratio": round(after_cpu / before_cpu, 3),
                "within_ceiling": after / before <= CEILING,
                "same_flops": last["flops_only"]["flops"] == last["memory"]["flops"],
                "memory_metrics": {label: last[label]["memory_metrics"] for label in last},
                "rounds_s": {label: [round(t, 4) for t in values] for label, values in times.items()},
                "rounds_cpu_s": {label: [round(t, 4) for t in values] for label, values in cpu.items()},
            }
    print(json.dumps({"against": args.against, "ceiling": CEILING, **results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
