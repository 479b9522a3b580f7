"""Which generated inputs a model wants as token ids, and what a Hugging Face model calls its main input.

`inputs = [[1, 64]]` without a dtype used to give float zeros, and a language model failed in its embedding. Shapes
alone cannot say that an input holds token ids, but the model can: an input is token ids when the first op that
reads it (after views and reshapes, which read nothing) is an embedding lookup, `aten.embedding` or
`aten.embedding_bag`, as `nn.Embedding` runs it. `token_id_inputs` finds out by running the model's forward on
fake tensors until every candidate input has met its first reader (usually the first op or two), on a private
copy of the model as the count does, so nothing of the user's model runs. Metadata reads (`x.shape`, `x.device`)
and views (`x.view(-1, t)`) are not readers; the reader is found through them.

Hugging Face `transformers` models say it themselves: `main_input_name` (`input_ids`, `pixel_values`,
`input_features`, ...) names the argument the first positional shape is bound to, and the names of the
arguments say their dtype (`*_ids` and `*_mask` are integers).
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Mapping
from typing import Any, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from pytest_flopbudget._counting.torch.ops import op_key

#: Ops that read their `indices` argument (position 1) as token ids.
EMBEDDING_OPS = frozenset(
    {"aten.embedding", "aten.embedding_bag", "aten._embedding_bag", "aten._embedding_bag_forward_only"}
)
#: Ops that do not read values: the input's first reader is found through them.
_PASS_THROUGH = frozenset({"aten._unsafe_view", "aten.clone", "aten.contiguous", "aten.lift_fresh", "aten.alias"})
#: Ops that read a tensor's metadata only (`x.device`, `x.size()`): they are no reader at all.
_METADATA = frozenset(
    {
        "aten.sym_size",
        "aten.sym_stride",
        "aten.sym_numel",
        "aten.sym_storage_offset",
        "aten.is_same_size",
        "aten._assert_tensor_metadata",
    }
)


def main_input_name(model: Any) -> str | None:
    """The argument a Hugging Face model's first input is (`main_input_name`), None for other models."""
    name = getattr(type(model), "main_input_name", None)
    return name if isinstance(name, str) and name.isidentifier() else None


def integer_argument(name: str) -> bool:
    """Hugging Face's integer arguments by name: `input_ids`, `decoder_input_ids`, `attention_mask`, `pixel_mask`."""
    return name.endswith(("_ids", "_mask")) or name == "ids"


def argument_names(model: Any, main: str) -> list[str]:
    """`main`, then the other parameters of `model.forward` in order: what positional shapes are bound to."""
    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return [main]
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [main, *(p.name for p in parameters if p.kind in kinds and p.name != main)]


def float_dtype_name(model: Any) -> str | None:
    """The dtype name of a model's floating-point weights (a bfloat16 model takes bfloat16 pixel values)."""
    dtype = getattr(model, "dtype", None)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return str(dtype).replace("torch.", "")
    return None


def has_embedding(model: torch.nn.Module) -> bool:
    return any(isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) for m in model.modules())


def token_id_inputs(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    candidates: set[Hashable],
    method: str = "forward",
) -> set[Hashable]:
    """The candidates (positions in `args`, names in `kwargs`) whose first reader is an embedding lookup.

    Only models with an `nn.Embedding` or `nn.EmbeddingBag` are run. A forward that fails before every candidate
    is decided leaves the rest as they are (float): the count that follows reports the failure.
    """
    if not candidates or not has_embedding(model):
        return set()
    from pytest_flopbudget._counting.torch.defer_dynamo import deferred_dynamo
    from pytest_flopbudget._counting.torch.execution import (
        by_identity,
        convert_by_replacing,
        execution_context,
        quiet_fake_tensor_log,
    )
    from pytest_flopbudget._counting.torch.model_copy import ModelCopy

    with deferred_dynamo(), quiet_fake_tensor_log(), execution_context("fake") as context:
        stand_in = by_identity(context.tensor)
        copier = ModelCopy(context.parameter, stand_in)
        with context.outside():
            counted = copier.copy(model)
            fake_args, fake_kwargs = copier.copy_inputs(tuple(args), dict(kwargs))
        convert_by_replacing(counted)
        tracked = {key: fake_args[key] if isinstance(key, int) else fake_kwargs[cast(str, key)] for key in candidates}
        as_ids = {key: t.to(torch.int64) for key, t in tracked.items() if isinstance(t, torch.Tensor)}
        fake_args = tuple(as_ids.get(i, a) for i, a in enumerate(fake_args))
        fake_kwargs = {name: as_ids.get(name, v) for name, v in fake_kwargs.items()}
        probe = _FirstReader(as_ids)
        call = counted if method == "forward" else getattr(counted, method)
        try:
            with probe:
                call(*fake_args, **fake_kwargs)
        except Exception:  # _Decided, or a model that fails on these inputs (the count says how)
            pass
    return probe.ids


class _Decided(Exception):
    """Every candidate has met its first reader: the rest of the forward need not run."""


class _FirstReader(TorchDispatchMode):
    """Follows each candidate tensor (and its views) to the first op that reads it.

    Candidates start as int64 (a forward may check `ids.dtype` in Python before any op); one whose first reader is
    not an embedding is float32 from then on, converted as each later op reads it, as it will be in the count.
    """

    def __init__(self, candidates: Mapping[Hashable, torch.Tensor]) -> None:
        super().__init__()
        self.tracked: dict[int, Hashable] = {id(t): key for key, t in candidates.items()}
        self.alive: list[torch.Tensor] = list(candidates.values())  # ids stay unique while tracked
        self.undecided: set[Hashable] = set(candidates)
        self.ids: set[Hashable] = set()
        self.floats: set[Hashable] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        read = {self.tracked[id(t)] for t in flat if isinstance(t, torch.Tensor) and id(t) in self.tracked}
        key = op_key(func)
        if not read or key in _METADATA or func.namespace == "prim":
            return func(*args, **kwargs)
        if key in _PASS_THROUGH or func.is_view:
            out = func(*args, **kwargs)
            if len(read) == 1:
                for tensor in tree_flatten(out)[0]:
                    if isinstance(tensor, torch.Tensor):
                        self.tracked[id(tensor)] = next(iter(read))
                        self.alive.append(tensor)
            return out
        first = read & self.undecided
        if key in EMBEDDING_OPS and len(args) > 1 and self.tracked.get(id(args[1])) in first:
            self.ids.add(self.tracked[id(args[1])])
        self.floats |= first - self.ids
        self.undecided -= first
        if not self.undecided:
            raise _Decided
        args, kwargs = tree_map(self._as_decided, (args, kwargs))
        return func(*args, **kwargs)

    def _as_decided(self, value: Any) -> Any:
        key = self.tracked.get(id(value)) if isinstance(value, torch.Tensor) else None
        return value.to(torch.float32) if key is not None and key in self.floats else value
