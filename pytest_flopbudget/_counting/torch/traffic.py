"""Bytes moved by one ATen op: the rules of the `bytes` metric in the PyTorch engine.

Every counted op (one with a formula) reads each distinct tensor among its inputs once and writes each of its
outputs once, at each tensor's own element size (`bytes_moved`). An op that is free of FLOPs still moves memory
when its outputs are new tensors: `cat`, `clone`, `_to_copy`, `constant_pad_nd`, `embedding`, `index_select`,
`copy_`, `zeros`... `free_op_traffic` gives the rule for one such op, from its schema (cached per op overload):

* a view or a metadata-only op moves nothing: an output that aliases an input without writing it (`view`,
  `transpose`, `expand`, `slice`, `select`, `as_strided`, `detach`, `alias`, `permute`, `unsqueeze`...), an in-place
  view (`transpose_`, tagged `inplace_view`), the views whose schema does not say so (`_unsafe_view`,
  `unsafe_split`), sizes and asserts, an allocation that writes nothing (`empty`, `new_empty`), and the one
  element `.item()` reads to the host;
* a gather reads only what it gathers: its index tensors and as many elements of its source as it writes
  (`embedding` reads its ids and the looked-up rows, never the whole table), then writes its output;
* an op that overwrites its `self` or only takes its metadata reads its other tensor arguments and writes its
  output (`copy_` reads src and writes dst, `fill_` and `zero_` only write, `zeros_like` reads nothing);
* every other free op moves what a counted op moves (`cat` reads its inputs and writes their concatenation).

Where the positions an op writes depend on data (`masked_fill_`, `index_copy_`), the whole tensor is counted: a
figure never below the real traffic. A size fake mode does not know (an unbacked symbol) raises `Unsized`: the
count then leaves `bytes` not measured rather than low.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable

import torch

from pytest_flopbudget._counting.torch.ops import BOOKKEEPING_OPS

#: The bytes one op moves: (op, positional args, keyword args, outputs) -> bytes.
Rule = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], int]


class Unsized(Exception):
    """A tensor the op reads or writes has a size fake mode does not know (an unbacked symbol)."""


def bytes_moved(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """The memory traffic of one counted op: every distinct tensor among its inputs read once, every distinct
    tensor among its outputs written once, each at its own dtype's element size.

    So `x.add_(y)` reads x and y and writes x (the aliased output is written once, on top of its one read), and an
    `out=` tensor is written, not read. An output a backward's `output_mask` turns off is not written (fake mode
    returns a tensor there, the real kernel none). Raises `Unsized` for a size fake mode does not know.
    """
    written = [out] if isinstance(out, torch.Tensor) else _tensors(_masked(func, args, kwargs, out))
    read = _tensors((args, kwargs) if kwargs else args)
    if kwargs and "out" in kwargs:
        outs = _tensors(kwargs["out"])
        read = [t for t in read if not any(t is o for o in outs)]
    return tensor_bytes(read) + tensor_bytes(written)


_MASK_INDEX: dict[Any, int | None] = {}


def _masked(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
    """The outputs `output_mask` (`native_batch_norm_backward`, `convolution_backward`) asks for."""
    index = _MASK_INDEX.get(func, -1)
    if index == -1:
        names = [arg.name for arg in func._schema.arguments]
        index = _MASK_INDEX[func] = names.index("output_mask") if "output_mask" in names else None
    if index is None or not isinstance(out, (tuple, list)):
        return out
    mask = args[index] if index < len(args) else kwargs.get("output_mask")
    if not isinstance(mask, (tuple, list)) or len(mask) != len(out):
        return out
    return [value for value, wanted in zip(out, mask) if wanted]


def tensor_bytes(tensors: Iterable[Any]) -> int:
    """The bytes of each distinct tensor, at its dtype's element size; `Unsized` for an unbacked size."""
    total, seen = 0, set()
    for tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        total += _numel(tensor) * tensor.element_size()
    return total


def _numel(tensor: Any) -> int:
    try:
        return int(tensor.numel())
    except Exception as exc:  # an unbacked symbolic size: no figure to give, and no figure is not zero
        raise Unsized(f"a {tuple(tensor.shape)} tensor") from exc


def _tensors(value: Any) -> list[Any]:
    """The tensors in an op's arguments or outputs (nested tuples, lists and dicts), in order. A walk of its own:
    pytree's `tree_flatten` costs several times more, and this runs for most ops of every count."""
    if isinstance(value, torch.Tensor):
        return [value]
    found: list[Any] = []
    _collect(value, found)
    return found


def _collect(value: Any, found: list[Any]) -> None:
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, (tuple, list, dict)):
                _collect(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)


def _gathered(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """A gather (`embedding`, `index_select`, `gather`, `index`, a slice copied out): reads its index tensors and
    as many elements of its source (`weight` or `self`) as it writes, then writes its output."""
    source = _argument(func, args, kwargs, _source_name(func))
    written = _tensors(out)
    outs = _tensors(kwargs.get("out"))
    indices = [t for t in _tensors((args, kwargs)) if t is not source and not any(t is o for o in outs)]
    elements = sum(_numel(t) for t in {id(t): t for t in written}.values())
    rows = elements * source.element_size() if isinstance(source, torch.Tensor) else 0
    return tensor_bytes(indices) + rows + tensor_bytes(written)


def _overwritten(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """An op that reads nothing of its `self` but its metadata or overwrites it (`copy_`, `fill_`, `zero_`,
    `uniform_`, `zeros_like`, `new_full`): reads its other tensor arguments, writes its output."""
    self = _argument(func, args, kwargs, "self")
    outs = _tensors(kwargs.get("out"))
    read = [t for t in _tensors((args, kwargs)) if t is not self and not any(t is o for o in outs)]
    return tensor_bytes(read) + tensor_bytes(_tensors(out))


#: Free ops that read only what they gather: their index tensors and the source elements they write out.
GATHERS = frozenset(
    {
        "aten.embedding",
        "aten.index_select",
        "aten.gather",
        "aten.index",
        "aten._unsafe_index",
        "aten.take",
        "aten.take_along_dim",
        "aten.slice_copy",
        "aten.select_copy",
        "aten.diagonal_copy",
        "aten.as_strided_copy",
        "aten.narrow_copy",
    }
)
#: Free ops that overwrite `self` (in place), or read only its metadata: their other tensor arguments are read.
OVERWRITES = frozenset(
    {
        "aten.copy",
        "aten.fill",
        "aten.zero",
        "aten.uniform",
        "aten.normal",
        "aten.random",
        "aten.exponential",
        "aten.zeros_like",
        "aten.ones_like",
        "aten.full_like",
        "aten.rand_like",
        "aten.randn_like",
        "aten.randint_like",
        "aten.new_zeros",
        "aten.new_ones",
        "aten.new_full",
    }
)
#: Free ops that touch no tensor data: sizes, asserts, storage bookkeeping, allocations that write nothing, the
#: views whose schema does not mark their output as an alias, and one value read to the host (`.item()`: a
#: synchronisation of one element, not counted, so that a value fake mode knows and one it does not count alike).
NO_TRAFFIC = frozenset(
    {
        *BOOKKEEPING_OPS,
        "aten._unsafe_view",
        "aten.unsafe_split",
        "aten.unsafe_split_with_sizes",
        "aten.unsafe_chunk",
        "aten.lift",
        "aten.lift_fresh",
        "aten.empty",
        "aten.empty_like",
        "aten.empty_strided",
        "aten.new_empty",
        "aten.new_empty_strided",
        "aten._linalg_check_errors",
        "aten._local_scalar_dense",
        "aten.item",
        "aten.is_nonzero",
    }
)

_RULES: dict[Any, Rule | None] = {}


def free_op_traffic(func: Any, key: str) -> Rule | None:
    """The bytes rule of a FLOP-free op (`key` is its registry key, `aten.copy` for `aten.copy_.default`), or None
    when it moves nothing (see the module's docstring). Decided once per op overload."""
    if func in _RULES:
        return _RULES[func]
    rule: Rule | None
    if key in NO_TRAFFIC or func.namespace != "aten" or _is_view(func):
        rule = None
    elif key in GATHERS:
        rule = _gathered
    elif key in OVERWRITES:
        rule = _overwritten
    else:
        rule = bytes_moved
    _RULES[func] = rule
    return rule


def _is_view(func: Any) -> bool:
    """An output aliasing an input it does not write (`view`, `transpose`, `contiguous` returning self), or an
    in-place change of metadata only (`transpose_`)."""
    if torch.Tag.inplace_view in func.tags:
        return True
    returns = func._schema.returns
    return any(ret.alias_info is not None and not ret.alias_info.is_write for ret in returns)


_SOURCE_NAMES: dict[Any, str] = {}


def _source_name(func: Any) -> str:
    """The argument a gather reads from: `weight` for `embedding`, else `self`."""
    name = _SOURCE_NAMES.get(func)
    if name is None:
        names = [arg.name for arg in func._schema.arguments]
        name = _SOURCE_NAMES[func] = "weight" if "weight" in names else "self"
    return name


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """One argument by schema name, None when absent (a factory op has no `self`)."""
    for index, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            return args[index] if index < len(args) else kwargs.get(name)
    return None
