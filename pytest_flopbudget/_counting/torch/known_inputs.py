"""Values a fake count knows because it was given them: the example inputs, and Python numbers.

Fake tensors carry no values, yet many models branch on values they derive from their inputs: XLM and FlauBERT
check `lengths.max().item() <= slen` (lengths counted from `input_ids != pad_index`), Longformer and LED decide
`is_index_global_attn.flatten().any().item()` from the attention mask and size their chunks with
`torch.div(seq_len, window, rounding_mode="trunc")`. The inputs the count is given are real tensors (the tool's
zeros, or the user's), so these values are known exactly: `InputValues` keeps the real value of each small integer
or boolean input beside its fake, and `KnownValues` (data_dependent.py) propagates it through every op whose
tensor arguments are all known, running that op for real on the small CPU copies. Ops on Python numbers alone
(`torch.div(8, 4)`) or on the numbers torch wraps in plain tensors (`mask[ids == 2] = float_max`) are known the
same way. Float inputs (features, pixels) stay unknown: their values are data that decides no size in the models
we count, and computing with them would be the real forward.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten

from pytest_flopbudget._counting.torch.data_dependent import (
    _VALUE_SOURCES,
    VALUE_LIMIT,
    KnownValues,
    _is_fake,
    _tensors,
)

#: Integer and boolean example inputs up to this many elements (8 MiB of int64 token ids) keep their values: a copy
#: of each is made, and pyproject entries build them as real zeros instead of meta tensors (backends/torch_models.py).
INPUT_LIMIT = min(1 << 20, VALUE_LIMIT)
#: first arguments that make an op a candidate for `_from_plain`: a Python number or a plain (real) tensor
_PLAIN = frozenset({torch.Tensor, int, float, bool})
#: ops whose real result is uninitialised memory, not a value
_UNINITIALISED = frozenset(
    {
        "aten.empty",
        "aten.empty_like",
        "aten.empty_strided",
        "aten.new_empty",
        "aten.new_empty_strided",
    }
)


class InputValues(KnownValues):
    """`KnownValues` that also knows the example inputs and results computed from Python numbers alone."""

    def remember_inputs(self, real: Any, stand_in: Callable[[Any], Any]) -> None:
        """`real` is the caller's tree of arguments; `stand_in` maps each of its tensors, by identity, to the fake
        tensor the forward receives (so each value is paired with its own fake, whatever the inputs' structure)."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        for value in tree_flatten(real)[0]:
            if _is_known_input(value):
                fake = stand_in(value)
                if _is_fake(fake):
                    with unset_fake_temporarily():  # a private copy: an in-place op on it must not reach the caller
                        self._remember(fake, value.detach().to("cpu", copy=True))

    def source(self, key: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if key not in _VALUE_SOURCES and args and type(args[0]) in _PLAIN:
            self._from_plain(key, func, args, kwargs, out)
        else:
            super().source(key, func, args, kwargs, out)

    def _from_plain(self, key: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """An op whose arguments hold no fake tensor: fake mode made its output a fake without a value; the value
        is the real result (deterministic ops that write nothing: not `empty`, not a random draw, not `add_`)."""
        if (
            not isinstance(out, torch.Tensor)
            or out.numel() > VALUE_LIMIT
            or key in _UNINITIALISED
            or torch.Tag.nondeterministic_seeded in func.tags
            or func._schema.is_mutable  # run for real, it would write the plain tensor (a model's own constant)
        ):
            return
        if all(not _is_fake(t) and not t.is_meta and t.numel() <= VALUE_LIMIT for t in _tensors((args, kwargs))):
            real = self._real_run(func, args, kwargs)
            if isinstance(real, torch.Tensor):
                self._remember(out, real)


def _is_known_input(value: Any) -> bool:
    """A small integer or boolean tensor with data (token ids, masks, lengths; not a meta tensor)."""
    return (
        isinstance(value, torch.Tensor)
        and not value.is_meta
        and not (value.is_floating_point() or value.is_complex())
        and value.numel() <= INPUT_LIMIT
    )
