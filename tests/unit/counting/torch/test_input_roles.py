"""Which generated inputs a model reads as token ids (`counting/torch/input_roles.py`): by the first op that reads
each input, found on fake tensors, and by the names Hugging Face models give their arguments."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget._counting.torch.input_roles import (  # noqa: E402
    argument_names,
    float_dtype_name,
    has_embedding,
    integer_argument,
    main_input_name,
    token_id_inputs,
)


class TwoInputs(nn.Module):
    """`ids` reaches an embedding through a view; `scale` is multiplied first, so it stays float."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.calls = 0

    def forward(self, ids: Any, scale: Any) -> Any:
        self.calls += 1
        assert ids.shape[0] >= 1  # a metadata read is not a reader
        return self.emb(ids.view(-1)) * scale.sum()


class Later(nn.Module):
    """The embedding comes second: `x` is read by a multiply first, so it is not token ids."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, x: Any) -> Any:
        return self.emb((x * 2).long())


def test_token_ids_are_the_inputs_an_embedding_reads_first() -> None:
    model = TwoInputs()
    found = token_id_inputs(model, (torch.zeros(2, 3), torch.zeros(3)), {}, {0, 1})
    assert found == {0}
    assert model.calls == 0  # a private copy ran, not the user's model
    # by keyword as well as by position
    assert token_id_inputs(model, (), {"ids": torch.zeros(2, 3), "scale": torch.zeros(3)}, {"ids", "scale"}) == {"ids"}
    assert token_id_inputs(Later(), (torch.zeros(2, 3),), {}, {0}) == set()


def test_models_without_an_embedding_or_candidates_are_not_run() -> None:
    class Fails(nn.Module):
        def forward(self, x: Any) -> Any:
            raise AssertionError("must not run")

    assert token_id_inputs(Fails(), (torch.zeros(2),), {}, {0}) == set()
    assert token_id_inputs(TwoInputs(), (torch.zeros(2, 3), torch.zeros(3)), {}, set()) == set()
    assert has_embedding(TwoInputs()) and has_embedding(nn.Sequential(nn.EmbeddingBag(10, 4)))
    assert not has_embedding(nn.Linear(2, 2))


def test_a_forward_that_fails_leaves_the_undecided_inputs_float() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 4)

        def forward(self, ids: Any, other: Any) -> Any:
            self.emb(ids)
            raise ValueError("fails before `other` is read")

    assert token_id_inputs(Broken(), (torch.zeros(3), torch.zeros(3)), {}, {0, 1}) == {0}


def test_hugging_face_names() -> None:
    class Text(nn.Module):
        main_input_name = "input_ids"

        def forward(self, input_ids: Any, attention_mask: Any = None, *rest: Any, labels: Any = None) -> Any:
            return input_ids

    class NotAName(nn.Module):
        main_input_name = "not a name"

    assert main_input_name(Text()) == "input_ids"
    assert main_input_name(NotAName()) is None
    assert main_input_name(nn.Linear(2, 2)) is None
    # the main input first, then the other named parameters in order (not *rest)
    assert argument_names(Text(), "input_ids") == ["input_ids", "attention_mask", "labels"]
    assert [integer_argument(n) for n in ("input_ids", "attention_mask", "pixel_mask", "ids", "pixel_values")] == [
        True,
        True,
        True,
        True,
        False,
    ]


def test_float_dtype_name_reads_the_weights_dtype() -> None:
    class Typed(nn.Module):
        dtype = torch.bfloat16

    class Integer(nn.Module):
        dtype = torch.int8

    assert float_dtype_name(Typed()) == "bfloat16"
    assert float_dtype_name(Integer()) is None
    assert float_dtype_name(nn.Linear(2, 2)) is None  # a plain module has no `dtype`
