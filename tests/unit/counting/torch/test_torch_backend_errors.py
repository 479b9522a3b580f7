"""Who failed, when a count ends in an error (counting/torch/failures.py: `explain`).

"The model raised" is said only of the model's own errors: an op that fails on real zeros of the same shapes too,
or an exception from the model's code when it read nothing fake mode made up. Our own counting code failing, an
op failing only on fake tensors, and any error after the model read a made-up value are fake mode's, and say to
count with execution='real'.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch import data_dependent, shape_memo  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402


def message_of(model: nn.Module, *args: object) -> str:
    with pytest.raises(CountingError) as info:
        count(model, *args)
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("where", ["known values", "shape memo"])
def test_a_failure_of_our_counting_code_is_not_the_models(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    if where == "known values":
        monkeypatch.setattr(data_dependent.KnownValues, "source", broken)
    else:
        monkeypatch.setattr(shape_memo.ShapeMemo, "store", broken)
    text = message_of(nn.Sequential(nn.Linear(2, 3)), torch.ones(1, 2))
    assert text.startswith("fake mode cannot run this model: pytest-flopbudget's fake-mode counting failed in ")
    assert "RuntimeError: boom" in text and "a bug in pytest-flopbudget, not in the model" in text
    assert "the model raised" not in text and text.endswith("execution='real' (runs the real forward)")


def test_the_models_own_exception_is_the_models() -> None:
    class Refuses(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.fc(x)  # ops ran through the counting mode before the model's own raise
            raise ValueError("expects a dict of images")

    text = message_of(Refuses(), torch.ones(1, 2))
    assert text == (
        "the model raised in the model (Refuses): ValueError: expects a dict of images; "
        "check the example inputs' shapes and dtypes"
    )


def test_an_error_after_reading_an_unknown_item_is_fake_modes() -> None:
    class ByName(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = nn.ModuleDict({"0": nn.Linear(4, 4)})

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            name = str(x.sum().long().item())  # "0" for these zeros; fake mode stands in a symbol ("u0")
            return self.heads[name](x)  # type: ignore[no-any-return]

    x = torch.zeros(2, 4)
    assert count(ByName(), x, execution="real").macs == 2 * 4 * 4
    text = message_of(ByName(), x)
    # the KeyError names the symbol ('u0'): the read that made it is named, with its line (unknown_values.py)
    assert text.startswith(
        "fake mode cannot run this model: the model (ByName) needs the value of an int64 tensor of shape [] "
    )
    assert "`name = str(x.sum().long().item())" in text
    assert "the model raised" not in text


def test_an_error_after_formatting_an_unknown_value_is_fake_modes() -> None:
    # the KeyError NLLB-MoE raised before: an expert looked up by the f-string of a tensor fake mode cannot see
    class LooksUp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.experts = nn.ModuleDict({"expert_0": nn.Linear(4, 4)})

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            index = x.sum().long()  # 0 for these zeros, unknown to fake mode
            return self.experts[f"expert_{index}"](x)  # type: ignore[no-any-return]

    x = torch.zeros(2, 4)
    assert count(LooksUp(), x, execution="real").macs == 2 * 4 * 4  # the model is right: real execution counts it
    text = message_of(LooksUp(), x)
    assert text.startswith("fake mode cannot run this model: the model (LooksUp) failed after reading an f-string ")
    assert "KeyError" in text and text.endswith("execution='real' (runs the real forward)")
    assert "the model raised" not in text
