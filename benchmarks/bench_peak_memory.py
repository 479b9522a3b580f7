"""Cost of following peak memory during a count, against a plain count of the same model in the same process.

    python benchmarks/bench_peak_memory.py [--repeat N]

Both models are built on the meta device (no weights): ResNet-50 at batch 1, 224x224, and Llama-7B at sequence
2048, counted for inference under `no_grad` as the plugin counts a configured inference model. Each figure is the
median of N runs taken in alternation (see bench_torch.interleaved_medians), and the ratio is what matters.
Measured on the shared 2-core development machine (median of 7): ResNet-50 1.07x (0.022 s -> 0.024 s), Llama-7B
1.12x (0.083 s -> 0.092 s).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def ratio(name: str, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], repeat: int) -> dict[str, Any]:
    import torch
    from bench_torch import interleaved_medians

    from pytest_flopbudget.counting.torch.backend import count_torch
    from pytest_flopbudget.counting.torch.peak_memory import LiveBytes

    peaks: list[Any] = []

    def plain() -> None:
        with torch.no_grad():
            count_torch(model, args, kwargs)

    def tracked() -> None:
        live = LiveBytes()
        with torch.no_grad():
            count_torch(model, args, kwargs, peak=live)
        peaks.append(live.result())

    medians = interleaved_medians({"plain": plain, "peak": tracked}, repeat)
    return {
        "model": name,
        "plain_s": round(medians["plain"], 3),
        "with_peak_s": round(medians["peak"], 3),
        "ratio": round(medians["peak"] / medians["plain"], 3),
        "peak_bytes": peaks[-1].bytes,
        "peak_layer": peaks[-1].layer,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    import torch

    from examples.decoder import Llama, LlamaConfig, llama_inputs
    from examples.factories import resnet50_on_meta

    results = [
        ratio(
            "resnet50 (meta, 1x3x224x224)",
            resnet50_on_meta().eval(),
            (torch.randn(1, 3, 224, 224),),
            {},
            options.repeat,
        )
    ]
    config = LlamaConfig.llama_7b()
    with torch.device("meta"):
        llama = Llama(config).eval()
    results.append(ratio("llama-7b (meta, seq 2048)", llama, llama_inputs(config, seq=2048), {}, options.repeat))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
