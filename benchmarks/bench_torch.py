"""Speed and memory of the PyTorch backend, measured against peers in the same run.

    python benchmarks/bench_torch.py            # everything (several minutes: Zamba's default config is 7B)
    python benchmarks/bench_torch.py --quick    # skip the 70B case and Zamba

Cold counts are timed in fresh child processes, ours and `FlopCounterMode`'s alternately, each child importing
torch and building the same model first; "after build" times only the count (or the real forward under
`FlopCounterMode`), "from start" the whole child. Sequential-scan models (Mamba, RWKV, Zamba from transformers'
default configs, built on the meta device) report the seconds of a first count at sequence 128, under `no_grad` as
the plugin and the CLI count a configured inference model (backends/torch_models.py): the median of three fresh
children, with the CPU seconds of the same children (the wall clock here includes other processes' load).

Machines here are noisy, so every figure that matters is a ratio of two timings taken in the same process, each
the median of several repetitions after a warm-up. Memory figures come from child processes so that one case's
peak does not hide another's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


def interleaved_medians(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds of each function, run in alternation so that load on the machine hits all of them alike."""
    for fn in fns.values():
        fn()  # warm-up: first-call imports and caches are not what we compare
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def resnet50_vs_flop_counter(repeat: int) -> dict[str, float]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from examples.resnet import resnet50
    from pytest_flopbudget import count

    model = resnet50().eval()
    x = torch.randn(1, 3, 224, 224)

    def peer() -> None:
        with FlopCounterMode(display=False), torch.no_grad():
            model(x)

    def ours() -> None:
        with torch.no_grad():
            count(model, x)

    medians = interleaved_medians({"count_fake_s": ours, "flop_counter_real_s": peer}, repeat)
    return {**medians, "speedup": medians["flop_counter_real_s"] / medians["count_fake_s"]}


CHILD = r"""
import json, sys, time
import torch
from examples.decoder import Llama, LlamaConfig, llama_inputs
from examples.resnet import resnet50
from pytest_flopbudget import count

case = sys.argv[1]
def status_mb(field):
    # /proc/self/status: VmHWM is this process's own peak (ru_maxrss would include the parent's, inherited on exec)
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024
def rss_mb():
    return status_mb("VmHWM")
if case == "resnet50-real-weights":
    model = resnet50().eval()
    size_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    x = torch.randn(1, 3, 224, 224)
    count(resnet50().to("meta"), x)  # warm up imports and caches so the figure below is the count itself
    before = status_mb("VmRSS")
    count(model, x)
    peak = rss_mb()
    print(json.dumps({"model_mb": size_mb, "rss_before_count_mb": before, "rss_peak_mb": peak,
                      "peak_over_before_mb": peak - before}))
else:
    cfg = LlamaConfig.llama_7b() if case == "llama-7b" else LlamaConfig.llama_70b()
    start = time.perf_counter()
    with torch.device("meta"):
        model = Llama(cfg)
    built = time.perf_counter()
    report = count(model, *llama_inputs(cfg, seq=2048))
    seconds = time.perf_counter() - built
    build_seconds = built - start
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    attention = cfg.n_layers * 2 * 2048 * 2048 * cfg.d_model  # QK^T and AV, dense causal rule
    analytic = linear * 2048 + attention
    print(json.dumps({"count_seconds": seconds, "build_seconds": build_seconds, "rss_peak_mb": rss_mb(),
                      "params": report.params,
                      "macs": report.macs, "analytic_macs": analytic,
                      "error_pct": 100 * (report.macs - analytic) / analytic, "skipped": report.skipped}))
"""


COLD = r"""
import json, sys, time
start = time.perf_counter()
import torch
which, name = sys.argv[1], sys.argv[2]
if name == "resnet50":
    from examples.resnet import resnet50 as build
else:
    from examples.densenet import densenet121 as build
model = build().eval()
x = torch.randn(1, 3, 224, 224)
built = time.perf_counter()
if which == "ours":
    from pytest_flopbudget import count
    count(model, x)
else:
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False), torch.no_grad():
        model(x)
end = time.perf_counter()
print(json.dumps({"from_start_s": end - start, "after_build_s": end - built,
                  "dynamo_imported": "torch._dynamo" in sys.modules}))
"""

SCAN = r"""
import json, sys, time
import torch, transformers
name = sys.argv[1]
config, cls = {
    "mamba": (transformers.MambaConfig, transformers.MambaForCausalLM),
    "rwkv": (transformers.RwkvConfig, transformers.RwkvForCausalLM),
    "zamba": (lambda: transformers.ZambaConfig(use_mamba_kernels=False), transformers.ZambaForCausalLM),
}[name]
with torch.device("meta"):
    model = cls(config()).eval()
ids = torch.zeros(1, 128, dtype=torch.long)
from pytest_flopbudget import count
start, cpu = time.perf_counter(), time.process_time()
with torch.no_grad():
    report = count(model, ids)
print(json.dumps({"cold_count_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                  "macs": report.macs, "skipped": report.skipped}))
"""


def run_json(code: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_vs_flop_counter(name: str, repeat: int) -> dict[str, Any]:
    """Medians over `repeat` pairs of fresh children, ours and the peer's alternately; ratios below 1 are ours."""
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
    for _ in range(repeat):
        for which in runs:
            runs[which].append(run_json(COLD, which, name))
    result: dict[str, Any] = {}
    for field in ("from_start_s", "after_build_s"):
        ours = statistics.median(r[field] for r in runs["ours"])
        peer = statistics.median(r[field] for r in runs["peer"])
        result[f"count_{field}"], result[f"flop_counter_{field}"] = ours, peer
        result[f"ratio_{field.removesuffix('_s')}"] = ours / peer
    result["count_imports_dynamo"] = any(r["dynamo_imported"] for r in runs["ours"])
    return result


def scan_medians(name: str, runs: int = 3) -> dict[str, Any]:
    """Median seconds over `runs` fresh children (each a cold count); the figures themselves are the same each run."""
    results = [run_json(SCAN, name) for _ in range(runs)]
    median = {field: statistics.median(r[field] for r in results) for field in ("cold_count_s", "cpu_s")}
    return {**results[0], **median}


def child(case: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip the 70B configuration")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    results: dict[str, Any] = {"resnet50_224": resnet50_vs_flop_counter(args.repeat)}
    results["warm_ratio_count_over_flop_counter"] = 1 / results["resnet50_224"]["speedup"]
    cold_repeat = max(3, args.repeat // 2)
    results["cold_resnet50_224"] = cold_vs_flop_counter("resnet50", cold_repeat)
    results["cold_densenet121_224"] = cold_vs_flop_counter("densenet121", cold_repeat)
    scans = ["mamba", "rwkv"] if args.quick else ["mamba", "rwkv", "zamba"]
    results["sequential_scans_seq128"] = {name: scan_medians(name) for name in scans}
    results["llama_7b_meta_seq2048"] = child("llama-7b")
    if not args.quick:
        results["llama_70b_meta_seq2048"] = child("llama-70b")
    results["resnet50_real_weights_memory"] = child("resnet50-real-weights")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
