"""A value fake mode does not know is named where it was needed (counting/torch/unknown_values.py).

FastSpeech2-Conformer and VITS size their spectrograms by durations they predict from the weights (VITS adds
random noise): no fake count can know them, so the count fails with one line naming the read, its layer and the
model's source line. Given the durations (a FastSpeech2 training step with its labels), it counts as in real.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch.unknown_values import UnknownReads  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


class Regulator(nn.Module):
    def forward(self, durations: torch.Tensor) -> torch.Tensor:
        steps = durations.sum()
        if steps.item() > 3:  # the line the message quotes
            return torch.ones(4)
        return torch.ones(2)


class Predicts(nn.Module):
    """Durations predicted from the weights, then a branch on their total in a submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.duration = nn.Linear(4, 1)
        self.regulator = Regulator()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.regulator(self.duration(x).exp().ceil().long())


def test_a_branch_on_a_value_computed_from_the_weights_names_the_read() -> None:
    with pytest.raises(CountingError) as info:
        count(Predicts(), torch.randn(3, 4))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "fake mode cannot run this model: layer 'regulator' (Regulator) needs the value of an int64 tensor of shape "
        "[] (`.item()`, aten._local_scalar_dense) at test_unknown_values.py:"
    )
    assert "`if steps.item() > 3:  # the line the message quotes`" in message
    assert "but from the weights, float activations or an input without values" in message
    assert message.endswith("count it with execution='real' (runs the real forward)")
    assert count(Predicts(), torch.randn(3, 4), execution="real").params == 5


def test_reads_explain_only_failures_that_name_their_symbols() -> None:
    reads = UnknownReads()
    reads.note(torch.zeros(()), 3, "layer")  # a plain number: fake mode knew the value, nothing to note
    assert reads.explain(RuntimeError("Could not guard on data-dependent expression u0 > 2")) is None
    assert reads.explain(ValueError("no symbol here")) is None


# --- transformers text-to-speech models ----------------------------------------------------------------------------


def _fastspeech2() -> Any:
    from transformers import FastSpeech2ConformerConfig, FastSpeech2ConformerModel

    config = FastSpeech2ConformerConfig(
        vocab_size=16,
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_num_attention_heads=2,
        decoder_num_attention_heads=2,
        encoder_linear_units=64,
        decoder_linear_units=64,
        num_mel_bins=8,
        speech_decoder_postnet_layers=1,
        speech_decoder_postnet_units=16,
        duration_predictor_layers=1,
        duration_predictor_channels=16,
        pitch_predictor_layers=1,
        pitch_predictor_channels=16,
        energy_predictor_layers=1,
        energy_predictor_channels=16,
    )
    return FastSpeech2ConformerModel(config)


def _vits() -> Any:
    from transformers import VitsConfig, VitsModel

    config = VitsConfig(
        vocab_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=64,
        flow_size=16,
        spectrogram_bins=17,
        upsample_initial_channel=16,
        upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
        prior_encoder_num_flows=1,
        prior_encoder_num_wavenet_layers=1,
        duration_predictor_num_flows=1,
        duration_predictor_filter_channels=16,
        depth_separable_num_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        window_size=4,
    )
    return VitsModel(config)


@pytest.mark.parametrize(
    ("build", "model", "line"),
    [
        (_fastspeech2, "FastSpeech2ConformerModel", "modeling_fastspeech2_conformer.py:"),
        (_vits, "VitsModel", "modeling_vits.py:"),
    ],
    ids=["fastspeech2_conformer", "vits"],
)
def test_text_to_speech_durations_predicted_from_the_weights_are_named(build: Any, model: str, line: str) -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    tts = build().eval()
    ids = torch.zeros(1, 8, dtype=torch.long)  # the token ids they take
    with pytest.raises(CountingError) as info:
        count(tts, input_ids=ids)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"fake mode cannot run this model: the model ({model}) needs the value of ")
    assert f"(`.item()`, aten._local_scalar_dense) at {line}" in message
    assert "the model raised" not in message
    assert count(tts, input_ids=ids, execution="real").macs > 0


def test_fastspeech2_with_its_durations_given_counts_in_fake_mode_as_in_real() -> None:
    """A training step takes the durations as labels: known values, so fake mode sizes the spectrogram exactly."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    tts = _fastspeech2()
    durations = torch.tensor([[1, 2, 3, 0, 1, 2, 1, 2]])  # 12 frames
    inputs = {
        "input_ids": torch.zeros(1, 8, dtype=torch.long),
        "duration_labels": durations,
        "spectrogram_labels": torch.zeros(1, 12, 8),
        "pitch_labels": torch.zeros(1, 8, 1),
        "energy_labels": torch.zeros(1, 8, 1),
    }

    def loss(output: Any) -> Any:
        return output.loss

    fake = count(tts, **inputs, training=True, loss_fn=loss)
    real = count(tts, **inputs, training=True, loss_fn=loss, execution="real")
    assert fake.macs > 0
    assert (fake.macs, fake.flops) == (real.macs, real.flops)
