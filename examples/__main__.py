"""`python -m examples`: the per-layer count of every bundled reference model (the README's first command)."""

from __future__ import annotations

import sys
import time

import torch

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig, gpt_inputs, llama_inputs
from examples.resnet import resnet50
from examples.vit import vit_b_16
from pytest_flopbudget import count


def main() -> int:
    # Built on the meta device: counting needs shapes only, so not even the 7B model allocates its weights.
    cases = [
        ("ResNet-50, 1x3x224x224", lambda: resnet50(), (torch.randn(1, 3, 224, 224),), 1),
        ("ViT-B/16, 1x3x224x224", lambda: vit_b_16(), (torch.randn(1, 3, 224, 224),), 2),
        (
            "GPT-2 small, 1x1024 tokens",
            lambda: GPT(GPTConfig.gpt2_small()),
            gpt_inputs(GPTConfig.gpt2_small(), seq=1024),
            1,
        ),
        (
            "Llama 7B, 1x2048 tokens",
            lambda: Llama(LlamaConfig.llama_7b()),
            llama_inputs(LlamaConfig.llama_7b(), seq=2048),
            1,
        ),
    ]
    for title, build, inputs, depth in cases:
        start = time.perf_counter()
        with torch.device("meta"):
            model = build().eval()
        with torch.no_grad():
            report = count(model, *inputs)
        seconds = time.perf_counter() - start
        print(report.table(depth=depth, title=f"== {title} (counted in {seconds:.2f} s)"))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
