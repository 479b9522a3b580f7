"""A Llama-7B-shaped Flax NNX model counted without weights, beside XLA's own cost analysis of the same model.

    python benchmarks/bench_jax_llama.py               # batch 1 x seq 2048, the scanned and the looped model
    python benchmarks/bench_jax_llama.py --seq 4096 --repeat 5

The model is `examples.flax_decoder` at `LlamaConfig.llama_7b()` (32 layers, d 4096, 32 heads, MLP 11008, vocab
32000: 6,738,415,616 parameters), built under `nnx.eval_shape`, so no weight is allocated. Two forms of it:
`scan`, the 32 blocks stacked by `nnx.vmap` and run by `nnx.scan` (one block in the jaxpr, as large Flax models
are written), and `loop`, the blocks in a Python loop (32 blocks in the jaxpr, PyTorch's layout and layer names).

Each form runs in a fresh child process, which times the build, our first count (`pytest_flopbudget.count`: trace
with `jax.make_jaxpr`, walk) and the median of `--repeat` more, then XLA's `jax.jit(f).lower(...)` and
`.cost_analysis()` on the same abstract model (what flax's `tabulate(compute_flops=True)` runs), and reads its own
memory from /proc/self/status: the resident set before the count and the high-water mark after it (their
difference bounds what the count added). Wall-clock and CPU seconds are both printed: on a shared machine the CPU
seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time

form, batch, seq, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

import jax
from flax import nnx

from examples.decoder import LlamaConfig
from examples.flax_decoder import abstract_llama, token_ids
from pytest_flopbudget import count


def status_mb(field):
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


config = LlamaConfig.llama_7b()
ids = token_ids(batch, seq)
model, build_s, _ = timed(lambda: abstract_llama(config, scanned=form == "scan"))
rss_before = status_mb("VmRSS")
report, count_s, count_cpu_s = timed(lambda: count(model, ids))
hwm_after = status_mb("VmHWM")
again = [timed(lambda: count(model, ids))[1:] for _ in range(repeat)]

graphdef, state = nnx.split(model)
forward = lambda state, ids: nnx.merge(graphdef, state)(ids)
lowered, lower_s, lower_cpu_s = timed(lambda: jax.jit(forward).lower(state, ids))
cost, analysis_s, analysis_cpu_s = timed(lowered.cost_analysis)
print(json.dumps({
    "form": form,
    "build_s": build_s,
    "count_s": count_s,
    "count_cpu_s": count_cpu_s,
    "count_again_s": statistics.median(w for w, _ in again) if again else None,
    "count_again_cpu_s": statistics.median(c for _, c in again) if again else None,
    "rss_before_mb": rss_before,
    "hwm_after_count_mb": hwm_after,
    "flops": report.flops,
    "macs": report.macs,
    "params": report.params,
    "xla_lower_s": lower_s,
    "xla_lower_cpu_s": lower_cpu_s,
    "xla_cost_analysis_s": analysis_s,
    "xla_cost_analysis_cpu_s": analysis_cpu_s,
    "xla_flops": cost.get("flops"),
    "xla_transcendentals": cost.get("transcendentals"),
}))
"""


def run(form: str, batch: int, seq: int, repeat: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, form, str(batch), str(seq), str(repeat)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def show(r: dict[str, object]) -> None:
    print(f"== {r['form']}: Llama-7B-shaped Flax NNX, built under nnx.eval_shape in {r['build_s']:.2f} s")
    print(
        f"   count       {r['count_s']:.2f} s ({r['count_cpu_s']:.2f} s CPU), again {r['count_again_s']:.2f} s;"
        f" FLOPs {r['flops']:,}  MACs {r['macs']:,}  params {r['params']:,}"
    )
    growth = float(r["hwm_after_count_mb"]) - float(r["rss_before_mb"])  # type: ignore[arg-type]
    print(
        f"   memory      resident {r['rss_before_mb']:.0f} MB before the count, peak {r['hwm_after_count_mb']:.0f} MB"
        f" after it: the count added at most {growth:.0f} MB"
    )
    print(
        f"   XLA         lower {r['xla_lower_s']:.2f} s ({r['xla_lower_cpu_s']:.2f} s CPU) + cost_analysis"
        f" {r['xla_cost_analysis_s']:.2f} s ({r['xla_cost_analysis_cpu_s']:.2f} s CPU);"
        f" flops {r['xla_flops']:,.0f}, transcendentals {r['xla_transcendentals']:,.0f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3, help="counts after the first, whose median is printed")
    parser.add_argument("--forms", default="scan,loop", help="comma-separated: scan, loop")
    args = parser.parse_args()
    for form in args.forms.split(","):
        show(run(form, args.batch, args.seq, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
