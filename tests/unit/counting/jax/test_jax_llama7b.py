"""A Llama-7B-shaped Flax NNX model (`examples.flax_decoder`, 32 scanned layers, d 4096, 32 heads, MLP 11008,
vocab 32000) counted without weights at batch 1 x seq 2048: the total is the one derived by hand (2*N*T, dense
attention, then every elementwise term), the count takes less CPU time than XLA's `lower().cost_analysis()` of the
same abstract model, and it adds well under 1 GB to the process. `benchmarks/bench_jax_llama.py` prints the
seconds; a test asserts no wall-clock limit (tests/growth.py), only the ratio to XLA's time in the same process.
The PyTorch Llama of `examples/decoder.py` counts the same total.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
pytest.importorskip("torch")  # examples.flax_decoder shares LlamaConfig with the PyTorch decoder

import pytest_flopbudget  # noqa: E402
from examples.decoder import LlamaConfig  # noqa: E402
from examples.flax_decoder import abstract_llama, token_ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
T, D, HEADS, HEAD_DIM, FFN, LAYERS, VOCAB = 2048, 4096, 32, 128, 11008, 32, 32000


def test_llama_7b_counts_the_hand_derived_total() -> None:
    report = pytest_flopbudget.count(abstract_llama(LlamaConfig.llama_7b()), token_ids(1, T))
    assert report.params == 6_738_415_616  # Llama-2-7B, untied lm_head (docs/jax.md, examples/README.md)

    # matmuls: N weights that multiply every token (per layer q, k, v, o 4*d*d and gate, up, down 3*d*ffn, then
    # lm_head d*vocab), 2*N*T FLOPs, plus dense attention QK^T and AV, 2*L*H*T*T*head_dim MACs (the causal mask
    # removes none: the attention convention)
    n = LAYERS * (4 * D * D + 3 * D * FFN) + D * VOCAB
    assert n == 6_607_077_376  # the 6.74e9 parameters less the embedding table (131,072,000)
    attention_macs = 2 * LAYERS * HEADS * T * T * HEAD_DIM
    assert report.macs == n * T + attention_macs == 14_630_806_093_824

    # everything else, per layer (docs/jax.md derives each term; the named composites by their shared rules)
    rms_norm = 4 * T * D + 2 * T  # square, jnp.mean (1 per input element), multiply by rsqrt, by the weight; per
    # row add eps, rsqrt
    rope_tables = 4 * (HEAD_DIM // 2) + T * (HEAD_DIM // 2) + 2 * T * HEAD_DIM  # inv_freq (arange free: / head_dim,
    # theta **, reciprocal, * 1.0), outer, cos and sin
    rope = 2 * (3 * T * D + T * D // 2)  # q and k: x*cos + rotate_half(x)*sin (the half negated)
    scores = HEADS * T * T
    attention = 6 * scores  # jax.nn.dot_product_attention by the attention rule: scale and softmax (5) per score;
    # the causal mask adds nothing
    swiglu = 2 * T * FFN  # silu (1 per element, a named composite) and the gate product
    residuals = 2 * T * D
    layer = 2 * rms_norm + rope_tables + rope + attention + swiglu + residuals
    elementwise = LAYERS * layer + rms_norm  # the final norm; nnx.Embed's lookup is free
    assert elementwise == 31_830_847_488
    assert report.flops == 2 * n * T + 2 * attention_macs + elementwise == 29_293_443_035_136
    assert report.skipped_ops == {}


def test_the_pytorch_llama_7b_counts_the_same() -> None:
    # examples/decoder.py's Llama on the meta device, the PyTorch twin of the Flax model: the same total (the
    # twins count identical figures per layer, test_jax_twins.py)
    import torch

    from examples.decoder import Llama, llama_inputs

    config = LlamaConfig.llama_7b()
    with torch.device("meta"):
        model = Llama(config)
    report = pytest_flopbudget.count(model.eval(), *llama_inputs(config, seq=T))
    assert (report.flops, report.macs, report.params) == (29_293_443_035_136, 14_630_806_093_824, 6_738_415_616)


CHILD = r"""
import json, time
import jax
from flax import nnx
from examples.decoder import LlamaConfig
from examples.flax_decoder import abstract_llama, token_ids
from pytest_flopbudget import count


def status_mb(field):
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


model, ids = abstract_llama(LlamaConfig.llama_7b()), token_ids(1, 2048)
graphdef, state = nnx.split(model)
before = status_mb("VmRSS")
ours = [cpu(lambda: count(model, ids))]
grown = status_mb("VmHWM") - before
xla = []
for _ in range(2):
    forward = lambda state, ids: nnx.merge(graphdef, state)(ids)
    xla.append(cpu(lambda: jax.jit(forward).lower(state, ids).cost_analysis()))
    ours.append(cpu(lambda: count(model, ids)))
print(json.dumps({"ours": ours, "xla": xla, "grown_mb": grown}))
"""


@pytest.mark.slow
def test_llama_7b_counts_faster_than_xla_lowers_it_and_in_little_memory() -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("reads its memory from /proc/self/status (Linux)")
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    # a fresh process: the first count's peak over the resident set before it (measured: 1 to 4 MB)
    assert measured["grown_mb"] < 1024, measured
    # CPU seconds in one process, the least of each (measured: ours 0.04-0.06 s, XLA's 0.11-0.12 s once warm)
    assert min(measured["ours"]) < min(measured["xla"]), measured
