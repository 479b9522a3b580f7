"""The stacks' conventions read the same figures off the same architecture in every framework: the tiny Llama of
`examples/decoder.py` (PyTorch) and its Flax NNX twin (`examples/flax_decoder.py`) give the same figure under
every LLM profile, for inference (with the same items) and for a training step (the profiles read matmul MACs,
parameters and tokens, which the twins count identically: tests/unit/counting/jax/test_jax_twins.py)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")

import pytest_flopbudget  # noqa: E402
from examples import flax_decoder  # noqa: E402
from examples.decoder import Llama, LlamaConfig, llama_inputs  # noqa: E402
from pytest_flopbudget._counting.jax.engine import count_nnx  # noqa: E402
from pytest_flopbudget._explain.items import Explanation  # noqa: E402
from pytest_flopbudget._report import Report  # noqa: E402

TRAINING = ("megatron", "megatron-causal", "palm", "torchtitan", "maxtext")


def pair(training: bool) -> tuple[Report, Report]:
    config = LlamaConfig.tiny()
    torch_report = pytest_flopbudget.count(Llama(config).eval(), *llama_inputs(config, seq=8), training=training)
    jax_report = count_nnx(
        flax_decoder.abstract_llama(config, scanned=False), flax_decoder.token_ids(1, 8), training=training
    )
    return torch_report, jax_report


def essentials(explanation: Explanation) -> tuple[int, dict[str, int]]:
    return explanation.theirs, explanation.by_reason()


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_every_llm_profile_gives_the_flax_twin_the_figure_it_gives_the_torch_model(training: bool) -> None:
    torch_report, jax_report = pair(training)
    names = TRAINING if training else (*TRAINING, "vllm")
    for name in names:
        if training:  # the exact training counts differ (the embedding's backward, RMSNorm's hand-written x ** 2:
            # docs/jax.md), so the items do; the convention's figure reads only what the twins count alike
            assert jax_report.under(name).theirs == torch_report.under(name).theirs, name
        else:
            assert essentials(jax_report.under(name)) == essentials(torch_report.under(name)), name
    # Megatron-classic on 8 tokens: 6 x the forward matmul MACs in training (2 blocks of 352,256 and the lm_head's
    # 65,536, test_jax_twins.py), 2 x them in inference; embeddings out, attention dense
    forward_macs = 2 * 352256 + 65536
    assert jax_report.under("megatron").theirs == (6 if training else 2) * forward_macs
