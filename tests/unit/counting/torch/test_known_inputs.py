"""Values derived from the example inputs are known in fake mode (counting/torch/known_inputs.py).

Small models whose counts are derived by hand, then the transformers models that branch on `.item()` of lengths and
masks derived from `input_ids` (XLM, FlauBERT, Longformer, LED), each built from a tiny config with random weights
and counted in fake mode exactly as `execution="real"` counts it.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch.known_inputs import INPUT_LIMIT  # noqa: E402


class Lengths(nn.Module):
    """Projects only the first `max(lengths)` tokens, lengths counted from the token ids (as XLM does)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 4, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        lengths = (ids != 0).sum(dim=1)
        longest = int(lengths.max().item())
        return self.proj(self.embed(ids[:, :longest]))


@pytest.mark.parametrize(
    ("ids", "macs"),
    [
        ([[3, 5, 0, 0, 0, 0]], 32),  # longest = 2: 2 tokens x 4 -> 4, 2*4*4 = 32 MACs
        ([[3, 5, 7, 0, 0, 0], [1, 0, 0, 0, 0, 0]], 96),  # longest = 3, batch 2: 2*3*4*4 = 96 MACs
        ([[0, 0, 0, 0, 0, 0]], 0),  # the tool's all-zero ids: nothing is projected, as in a real forward
    ],
)
def test_a_branch_on_a_length_from_the_token_ids_follows_their_values(ids: list[list[int]], macs: int) -> None:
    tokens = torch.tensor(ids)
    fake = count(Lengths(), tokens)
    real = count(Lengths(), tokens, execution="real")
    assert fake.macs == real.macs == macs
    assert fake.flops == real.flops
    assert fake.estimated == {}


def test_numbers_torch_wraps_in_tensors_are_known() -> None:
    class Halves(nn.Module):
        """Longformer's `torch.div(seq_len, window, rounding_mode="trunc")`, once per layer: from the second call
        on, the shape memo replays the division (a fake without the constant fake mode gives the first)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(2):
                half = int(torch.div(x.size(1), 2, rounding_mode="trunc"))  # 8 // 2 = 4, both times
                x = self.proj(x[:, :half]).repeat(1, 2, 1)
            return x

    report = count(Halves(), torch.randn(1, 8, 4))
    # twice 4 rows of 4 -> 4: 2*4*4*4 = 128 MACs
    assert report.macs == 128 and report.estimated == {}
    assert count(Halves(), torch.randn(1, 8, 4), execution="real").macs == 128


def test_a_python_number_written_through_a_known_mask_stays_known() -> None:
    class Flags(nn.Module):
        """Longformer's `extended_attention_mask[attention_mask == 2] = finfo.max`, then a count of the flags."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 5, bias=False)

        def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            flags = torch.zeros(ids.shape)
            flags[ids == 2] = 1.0
            return self.proj(x[: int(flags.sum().item())])

    ids = torch.tensor([[2, 0, 2, 2, 1]])
    report = count(Flags(), ids, torch.randn(5, 4))
    # three ids equal 2: 3 rows, 3*4*5 = 60 MACs
    assert report.macs == 60 and report.estimated == {}


def test_an_in_place_write_to_an_input_reaches_neither_the_callers_tensor_nor_the_count() -> None:
    class Rewrites(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(1, 2, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            ids[ids == 0] = 4  # in place, on the count's private copy of the value
            return self.proj(torch.ones(int(ids.sum().item()), 1))

    ids = torch.tensor([[0, 1, 0]])
    fake = count(Rewrites(), ids)
    # ids become [4, 1, 4]: 9 rows of 1 -> 2, 9*1*2 = 18 MACs
    assert fake.macs == 18
    assert ids.tolist() == [[0, 1, 0]]
    assert count(Rewrites(), ids, execution="real").macs == 18
    assert ids.tolist() == [[0, 1, 0]]


def test_unknown_data_written_through_a_view_makes_the_whole_input_unknown() -> None:
    class Overwrites(nn.Module):
        def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            ids[:, :2] = x[:, :2].long()  # float activations, unknown in fake mode, written through a view of ids
            return torch.ones(int((ids != 0).sum().item()))

    from pytest_flopbudget._errors import CountingError

    with pytest.raises(CountingError, match=r"needs the value of an int64 tensor of shape \[\] .*`return torch.ones"):
        count(Overwrites(), torch.zeros(1, 4, dtype=torch.long), torch.full((1, 4), 3.0))
    real = count(Overwrites(), torch.zeros(1, 4, dtype=torch.long), torch.full((1, 4), 3.0), execution="real")
    assert real.flops == 4 + 4  # `!= 0` and `sum` over 4 ids: 4 FLOPs each; two ids are 3 now


def test_inputs_without_values_stay_unknown() -> None:
    """A meta tensor has no values, and an input over the limit is not copied: the read fails, naming itself."""
    from pytest_flopbudget._errors import CountingError

    with pytest.raises(CountingError, match=r"needs the value of an int64 tensor of shape \[\]"):
        count(Lengths(), torch.zeros(1, 6, dtype=torch.long, device="meta"))

    class Kept(nn.Module):
        def forward(self, keep: torch.Tensor) -> torch.Tensor:
            return torch.ones(int(keep.sum().item()))

    # at the limit the value is known: the sum over n flags costs n FLOPs (ones(n) costs nothing)
    assert count(Kept(), torch.ones(INPUT_LIMIT, dtype=torch.bool)).flops == INPUT_LIMIT
    with pytest.raises(CountingError, match=r"needs the value of an int64 tensor of shape \[\]"):
        count(Kept(), torch.ones(INPUT_LIMIT + 1, dtype=torch.bool))


# --- transformers models that branch on values derived from input_ids ------------------------------------------


def _xlm() -> Any:
    from transformers import XLMConfig, XLMModel

    return XLMModel(XLMConfig(vocab_size=16, emb_dim=32, n_layers=1, n_heads=2, max_position_embeddings=16))


def _flaubert() -> Any:
    from transformers import FlaubertConfig, FlaubertModel

    return FlaubertModel(FlaubertConfig(vocab_size=16, emb_dim=32, n_layers=1, n_heads=2, max_position_embeddings=16))


def _longformer() -> Any:
    from transformers import LongformerConfig, LongformerModel

    config = LongformerConfig(
        vocab_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        attention_window=4,
        max_position_embeddings=32,
    )
    return LongformerModel(config)


def _led() -> Any:
    from transformers import LEDConfig, LEDModel

    config = LEDConfig(
        vocab_size=16,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        attention_window=4,
        max_encoder_position_embeddings=32,
        max_decoder_position_embeddings=32,
    )
    return LEDModel(config)


@pytest.mark.parametrize("build", [_xlm, _flaubert, _led], ids=["xlm", "flaubert", "led"])
def test_transformers_models_branching_on_input_lengths_count_in_fake_mode_as_in_real(build: Any) -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.zeros(1, 8, dtype=torch.long)  # what the tool builds for `inputs = [[1, 8]]`
    fake = count(model, input_ids=ids)
    real = count(model, input_ids=ids, execution="real")
    assert fake.macs > 0
    assert (fake.macs, fake.flops) == (real.macs, real.flops)
    assert fake.estimated == {} and fake.skipped == real.skipped


def test_xlm_counts_the_padding_in_the_users_token_ids() -> None:
    """XLM masks positions whose id is its `pad_index` (2): the user's ids decide the mask, in fake mode too."""
    pytest.importorskip("transformers")
    model = _xlm().eval()
    padded = torch.tensor([[5, 6, 7, 2, 2, 2, 2, 2]])
    fake = count(model, input_ids=padded)
    real = count(model, input_ids=padded, execution="real")
    assert (fake.macs, fake.flops) == (real.macs, real.flops)


def test_longformer_counts_in_fake_mode_as_in_real() -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = _longformer().eval()
    ids = torch.zeros(1, 8, dtype=torch.long)
    fake = count(model, input_ids=ids)
    real = count(model, input_ids=ids, execution="real")
    assert fake.macs == real.macs > 0
    # Without an attention mask, transformers' `warn_if_padding_and_no_attention_mask` tests
    # `pad_token_id in input_ids[:, [-1, 0]]` (eq over 2 ids, any over 2: 4 FLOPs at the root) where it may read
    # the ids' values: in a real forward, and in a fake one whose ids the count knows (KnownValues.readable)
    assert fake.flops == real.flops
    assert fake.layers[""].ops == real.layers[""].ops
    with_mask = {"input_ids": ids, "attention_mask": torch.ones(1, 8, dtype=torch.long)}
    fake, real = count(model, **with_mask), count(model, **with_mask, execution="real")
    assert (fake.macs, fake.flops) == (real.macs, real.flops)


XLM_SOURCE = """\
from transformers import XLMConfig, XLMModel

def xlm():
    return XLMModel(XLMConfig(vocab_size=16, emb_dim=32, n_layers=1, n_heads=2, max_position_embeddings=16))
"""


def test_a_pyproject_entry_counts_xlm_in_fake_mode_as_in_real(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end from `[tool.flopbudget.models]`: the tool builds the token ids (zeros) and they are known values."""
    pytest.importorskip("transformers")
    from pytest_flopbudget._backends import count_entry
    from pytest_flopbudget._config.pyproject import load_settings

    (tmp_path / "fb_known_xlm.py").write_text(XLM_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    reports = {}
    for execution in ("fake", "real"):
        (tmp_path / "pyproject.toml").write_text(
            "[tool.flopbudget.models.xlm]\n"
            'target = "fb_known_xlm:xlm"\n'
            "inputs = [[1, 8]]\n"
            f'execution = "{execution}"\n'
            "flops = '1G'\n"
        )
        entry = load_settings(tmp_path / "pyproject.toml").models["xlm"]
        reports[execution] = count_entry(entry, tmp_path)
    fake, real = reports["fake"], reports["real"]
    assert fake.inputs == [{"shape": [1, 8], "dtype": "int64"}]
    assert fake.macs > 0 and (fake.macs, fake.flops) == (real.macs, real.flops)
