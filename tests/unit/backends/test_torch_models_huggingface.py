"""Hugging Face models from pyproject entries: transformers models take a positional shape as their
`main_input_name` with its dtype, a diffusers UNet takes named inputs with a 0-d timestep, a VAE counts `decode`.

Every model is built from a tiny config with random weights (nothing is downloaded).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._config.pyproject import ModelEntry, load_settings

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("diffusers")

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._backends import count_entry  # noqa: E402
from pytest_flopbudget._config.location import LocatedError  # noqa: E402

MODELS = """\
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, ViTConfig, ViTModel

def gpt2():
    config = GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=16, bos_token_id=None,
                        eos_token_id=None, attn_implementation="eager")
    return GPT2LMHeadModel(config)

def vit():
    config = ViTConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                       image_size=8, patch_size=4, num_channels=3, attn_implementation="eager")
    return ViTModel(config, add_pooling_layer=False)

def vit_bfloat16():
    return vit().to(torch.bfloat16)

def bert():
    config = BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        vocab_size=16, max_position_embeddings=16, attn_implementation="eager")
    return BertModel(config, add_pooling_layer=False)

def unet():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=8, attention_head_dim=2, norm_num_groups=4,
    )

def vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
        block_out_channels=(8,), latent_channels=4, norm_num_groups=4, sample_size=8,
    )
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf")
    package = root / "fbhf_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(MODELS)
    return root


@pytest.fixture(autouse=True)
def _isolated_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.path", list(sys.path))


def entry_for(project: Path, **toml: str) -> ModelEntry:
    body = "\n".join(f"{k} = {v}" for k, v in toml.items())
    (project / "pyproject.toml").write_text(f"[tool.flopbudget.models.m]\n{body}\nflops = '1G'\n")
    return load_settings(project / "pyproject.toml").models["m"]


def models() -> Any:
    return sys.modules["fbhf_models.models"]


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_a_positional_shape_is_a_language_models_input_ids(project: Path, execution: str) -> None:
    report = count_entry(
        entry_for(project, target='"fbhf_models.models:gpt2"', inputs="[[1, 16]]", execution=f'"{execution}"'),
        project,
    )
    assert report.inputs == [{"shape": [1, 16], "dtype": "int64"}]
    expected = count(models().gpt2().eval(), input_ids=torch.zeros(1, 16, dtype=torch.int64))
    assert (report.flops, report.macs, report.params) == (expected.flops, expected.macs, expected.params)
    # the LM head alone: 16 tokens x 8 -> 16 vocabulary, 16*8*16 = 2048 MACs
    assert report.layers["lm_head"].macs == 2048


def test_a_vision_models_main_input_is_float_pixel_values(project: Path) -> None:
    report = count_entry(entry_for(project, target='"fbhf_models.models:vit"', inputs="[[1, 3, 8, 8]]"), project)
    assert report.inputs == [{"shape": [1, 3, 8, 8], "dtype": "float32"}]
    # patch embedding: a 4x4 conv, 3 -> 8 channels, on 2x2 patches: 4 positions * 8 * 3*16 = 1536 MACs
    assert report.layers["embeddings.patch_embeddings.projection"].macs == 1536


def test_pixel_values_follow_the_models_float_dtype(project: Path) -> None:
    report = count_entry(
        entry_for(project, target='"fbhf_models.models:vit_bfloat16"', inputs="[[1, 3, 8, 8]]"), project
    )
    assert report.inputs == [{"shape": [1, 3, 8, 8], "dtype": "bfloat16"}]


def test_further_shapes_follow_forwards_parameters(project: Path) -> None:
    entry = entry_for(project, target='"fbhf_models.models:bert"', inputs="[[1, 16], [1, 16]]")
    report = count_entry(entry, project)
    # input_ids, then attention_mask: both int64
    assert [item["dtype"] for item in report.inputs] == ["int64", "int64"]
    named = entry_for(
        project, target='"fbhf_models.models:bert"', inputs="{ input_ids = [1, 16], attention_mask = [1, 16] }"
    )
    assert count_entry(named, project).to_dict() == report.to_dict()


def test_a_given_dtype_wins_over_the_name(project: Path) -> None:
    entry = entry_for(
        project, target='"fbhf_models.models:bert"', inputs='[[1, 16], { shape = [1, 16], dtype = "bool" }]'
    )
    assert [item["dtype"] for item in count_entry(entry, project).inputs] == ["int64", "bool"]


def test_too_many_shapes_name_the_key(project: Path) -> None:
    entry = entry_for(
        project, target='"fbhf_models.models:vit"', inputs="[[1, 3, 8, 8]]".replace("]]", "]" + ", [1]" * 9 + "]")
    )
    with pytest.raises(
        LocatedError, match=r"tool\.flopbudget\.models\.m\.inputs: 10 shapes for ViTModel, whose forward"
    ):
        count_entry(entry, project)


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_a_diffusers_unet_takes_named_inputs_with_a_scalar_timestep(project: Path, execution: str) -> None:
    inputs = '{ sample = [1, 4, 8, 8], timestep = { shape = [], dtype = "int64" }, encoder_hidden_states = [1, 5, 8] }'
    report = count_entry(
        entry_for(project, target='"fbhf_models.models:unet"', inputs=inputs, execution=f'"{execution}"'), project
    )
    assert report.inputs[1] == {"shape": [], "dtype": "int64"} and report.skipped == {}
    # Cross-check with torch's FlopCounterMode on the real forward: it counts 2 FLOPs per MAC of convolutions and
    # matrix products but nothing for scaled_dot_product_attention on the CPU. Attention MACs, by hand (QK^T and
    # PV: 2 * Lq * Lk * channels): down block 8 ch at 8x8 = 64 tokens, self 2*64*64*8 = 65536 + cross (5 tokens)
    # 2*64*5*8 = 5120; mid block 16 ch at 4x4 = 16 tokens, 2*16*16*16 = 8192 + 2*16*5*16 = 2560; up block: two
    # attentions at 8 ch and 64 tokens, 2 * (65536 + 5120) = 141312. Total 222720.
    from torch.utils.flop_counter import FlopCounterMode

    model = models().unet().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, 4, 8, 8), torch.zeros((), dtype=torch.int64), torch.zeros(1, 5, 8))
    assert counter.get_total_flops() % 2 == 0
    assert report.macs == counter.get_total_flops() // 2 + 222720
    assert report.params == sum(p.numel() for p in model.parameters())


def test_a_vae_counts_its_decode(project: Path) -> None:
    entry = entry_for(project, target='"fbhf_models.models:vae"', inputs="[[1, 4, 8, 8]]", method='"decode"')
    report = count_entry(entry, project)
    assert report.model == "AutoencoderKL.decode"
    assert report.macs == count(models().vae().eval(), torch.zeros(1, 4, 8, 8), method="decode").macs
    costed = {path for path, layer in report.layers.items() if layer.macs}
    # only the decoder runs: post_quant_conv (1x1, 4 -> 4 at 8x8: 64*4*4 = 1024 MACs), then the decoder from its
    # conv_in (3x3, 4 -> 8: 64*8*4*9 = 18432) to its conv_out (3x3, 8 -> 3: 64*3*8*9 = 13824)
    assert all(path == "post_quant_conv" or path.startswith("decoder.") for path in costed)
    assert report.layers["post_quant_conv"].macs == 1024
    assert (report.layers["decoder.conv_in"].macs, report.layers["decoder.conv_out"].macs) == (18432, 13824)
