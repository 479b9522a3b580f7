"""Cost of a generation count (`generate = 256`) against one prefill count of the same model.

    python benchmarks/bench_generate.py [--repeat N] [--tokens N]

Llama-7B shapes (transformers' LlamaConfig defaults: 32 layers, 32 heads of 128, eager attention) with meta
(shape-only) weights, a prompt of 2048 token ids, both through `backends.count_entry` as `flopbudget count` does
(loading the model each time). The generation runs Hugging Face's own greedy `generate` on fake tensors: the
prefill and decode steps 1-4, then the last two steps from a cache grown to their length; the other steps are read
off the line steps 1-2 fix, checked at steps 3 and N-2 (counting/phases.py). The issue's target is under 10 s on
2 cores; the figures printed are wall times, and the load average says how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PYPROJECT = """\
[tool.flopbudget.models.llama_7b]
target = "benchmarks.bench_generate:llama_7b_on_meta"
inputs = [{{ shape = [1, 2048], dtype = "int64" }}]
flops = "1000P"
{generate}
"""


def llama_7b_on_meta() -> Any:
    """transformers' Llama (7B by its config's defaults) with meta weights: nothing is allocated or downloaded."""
    import torch
    import transformers

    with torch.device("meta"):
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(attn_implementation="eager"))


def entry(tokens: int) -> Any:
    from pytest_flopbudget._config.pyproject import parse_settings

    text = PYPROJECT.format(generate=f"generate = {tokens}" if tokens else "")
    return parse_settings(text, ROOT / "pyproject.toml").models["llama_7b"]


def timed(model: Any, repeat: int) -> tuple[list[float], Any]:
    from pytest_flopbudget._backends import count_entry

    times, report = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        report = count_entry(model, ROOT)
        times.append(time.perf_counter() - start)
    return times, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    import torch

    from pytest_flopbudget._backends import count_entry

    count_entry(entry(4), ROOT)  # warm: imports (transformers' generation too), first-call caches
    prefill_times, prefill = timed(entry(0), args.repeat)
    generate_times, generated = timed(entry(args.tokens), args.repeat)
    result = {
        "model": "transformers LlamaForCausalLM, LlamaConfig() (7B) on meta, prompt 2048",
        "tokens": args.tokens,
        "prefill_s": round(statistics.median(prefill_times), 2),
        "generate_s": round(statistics.median(generate_times), 2),
        "ratio": round(statistics.median(generate_times) / statistics.median(prefill_times), 2),
        "prefill_macs": prefill.macs,
        "generate_macs": generated.macs,
        "decode_first_macs": generated.phases[1].macs,
        "decode_last_macs": generated.phases[-1].macs,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
