"""A cheap memo of output metadata for repeated pure ops under fake tensors.

FakeTensorMode already caches shape propagation, but its cache key describes every tensor argument in full, which
costs more than the rest of a count. A network repeats the same op on the same shapes many times (every block of
a ResNet stage), so we remember, per op and argument metadata, the shapes of the outputs and build fresh fake
outputs directly. Only ops that neither mutate nor alias their inputs nor have data-dependent output shapes are
memoised: for those, output metadata is a pure function of the key, and nothing else about the result matters.

View ops (`select`, `expand`, `view`, `unsqueeze`, `transpose`...) are memoised too, because a sequential scan
(Mamba's and RWKV's per-token loops) is mostly views, and fake mode's own handling of a view costs ten times a
replay. A view's size, stride and storage offset are a pure function of its input's and of its arguments, like a
pure op's metadata; what a replay must add is the aliasing: the replayed output is built on the input's storage
(`make_view`), as fake mode's own cache does it, so in-place updates through it and `_base` behave the same.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Callable

import torch

_Meta = tuple[tuple[int, ...], tuple[int, ...], torch.dtype, torch.device]  # (shape, stride, dtype, device)
_NOT_MEMOISABLE = object()
_PRIM_DEVICE = torch.ops.prim.device.default


#: (base, shape, stride, storage offset, dtype, device) -> a fake view of `base`'s storage, or None if `base` is not
#: a tensor the replay can alias (a real constant fake mode has not converted yet)
MakeView = Callable[[Any, tuple[int, ...], tuple[int, ...], int, torch.dtype, torch.device], Any]
_PURE, _VIEW = "pure", "view"


class ShapeMemo:
    def __init__(
        self,
        make_fake: Callable[[tuple[int, ...], tuple[int, ...], torch.dtype, torch.device], Any],
        same_shape_inplace: frozenset[str] = frozenset(),
        make_view: MakeView | None = None,
    ) -> None:
        self._make_fake = make_fake
        self._make_view = make_view
        self._same_shape_inplace = same_shape_inplace
        self._outputs: dict[Hashable, tuple[Any, ...]] = {}
        self._kinds: dict[Any, str | None] = {}
        self._inplace: dict[Any, bool] = {}  # op -> whether `shortcut` may apply (asked for every op)

    def shortcut(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any | None:
        """Results that need no shape propagation at all, or None.

        `prim.device` of a fake tensor is its fake device; an in-place elementwise op (`relu_`, `add_`) whose
        tensor arguments all match `self` in shape and dtype returns `self` unchanged in shape.
        """
        if func is _PRIM_DEVICE:
            return args[0].device
        inplace = self._inplace.get(func)
        if inplace is None:
            packet = func.overloadpacket.__name__
            name = f"{func.namespace}.{packet[:-1]}"
            inplace = self._inplace[func] = packet.endswith("_") and name in self._same_shape_inplace
        if not inplace:
            return None
        target = args[0] if args else None
        if not isinstance(target, torch.Tensor):
            return None
        for value in (*args[1:], *kwargs.values()):
            if isinstance(value, torch.Tensor):
                if value.shape != target.shape or value.dtype != target.dtype or value.device != target.device:
                    return None
            elif not (value is None or isinstance(value, (bool, int, float))):
                return None
        return target

    def key(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable | None:
        """None when the op or one of its arguments rules memoising out."""
        if func in self._kinds:
            kind = self._kinds[func]
        else:
            kind = self._kinds[func] = _kind(func, views=self._make_view is not None)
        if kind is None:
            return None
        return _key_of(func, args, kwargs)

    def shortcut_key(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable | None:
        """For an op `shortcut` answered (an in-place op, never memoised itself): its arguments described as `key`
        describes them, for the caller's memo of what the op costs (its shapes, dtypes and scalars decide that)."""
        return _key_of(func, args, kwargs)

    def replay(self, key: Hashable, args: tuple[Any, ...] = ()) -> Any | None:
        entry = self._outputs.get(key)
        if entry is None:
            return None
        single, metas = entry
        if single == _VIEW:
            assert self._make_view is not None  # views are memoised only with a make_view
            shape, stride, offset, dtype, device = metas
            return self._make_view(args[0], shape, stride, offset, dtype, device)
        outs = [self._make_fake(*meta) if meta is not None else None for meta in metas]
        return outs[0] if single else tuple(outs)

    def store(self, key: Hashable, out: Any) -> None:
        if self._kinds.get(key[0]) == _VIEW:  # type: ignore[index]  # keys are tuples led by the op
            if isinstance(out, torch.Tensor) and not (out.is_conj() or out.is_neg()) and _static(out.shape):
                meta = (tuple(out.shape), out.stride(), out.storage_offset(), out.dtype, out.device)
                self._outputs[key] = (_VIEW, meta)
            return
        single = isinstance(out, torch.Tensor)
        values = (out,) if single else out
        if not isinstance(values, tuple):
            return
        metas: list[tuple[Any, ...] | None] = []
        for value in values:
            if isinstance(value, torch.Tensor):
                if any(not isinstance(s, int) for s in value.shape):
                    return
                metas.append((tuple(value.shape), value.stride(), value.dtype, value.device))
            elif value is None:
                metas.append(None)
            else:
                return
        self._outputs[key] = (single, tuple(metas))


def _kind(func: Any, views: bool) -> str | None:
    """`_PURE`, `_VIEW` (one tensor returned, a view of the first argument, nothing written), or None."""
    schema = func._schema
    tags = set(func.tags)
    impure = {torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output, torch.Tag.nondeterministic_seeded}
    if schema.is_mutable or tags & impure or func.namespace not in ("aten", "prims"):
        return None
    returns, arguments = schema.returns, schema.arguments
    if not any(ret.alias_info is not None for ret in returns) and not any(a.alias_info is not None for a in arguments):
        return _PURE
    if views and len(returns) == 1 and arguments and str(returns[0].type) == "Tensor":
        out, first = returns[0].alias_info, arguments[0].alias_info
        others = [a.alias_info for a in arguments[1:] if a.alias_info is not None]
        aliases = out is not None and first is not None and not out.is_write and not first.is_write
        if aliases and not others and out.before_set == first.before_set and str(arguments[0].type) == "Tensor":
            return _VIEW
    return None


def _static(shape: Any) -> bool:
    return all(isinstance(s, int) for s in shape)


def _key_of(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable | None:
    """The op and its arguments' metadata (`_describe`), or None when an argument rules memoising out."""
    parts: list[Any] = [func]
    for value in args:
        part = _describe(value)
        if part is _NOT_MEMOISABLE:
            return None
        parts.append(part)
    for name in sorted(kwargs):
        part = _describe(kwargs[name])
        if part is _NOT_MEMOISABLE:
            return None
        parts.append((name, part))
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:  # a symbolic size or stride: SymInts are unhashable (nested ints aside, see _describe)
        return None
    return key


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if getattr(value, "constant", None) is not None:
            # Fake mode carries the value of small constants (`torch.tensor(2.0).log2()`); a replayed output would
            # lose it, and `float()` of it would become an unknown.
            return _NOT_MEMOISABLE
        # Symbolic sizes are not looked for here (`key` finds them, unhashable, in one pass); a nested int, the one
        # hashable kind, names one ragged structure, so an output is still a function of the key, and `store`
        # keeps only outputs of static shape.
        return (value.shape, value.stride(), value.dtype, value.device, value.storage_offset())
    if isinstance(value, (list, tuple)):
        parts = tuple(_describe(v) for v in value)
        return _NOT_MEMOISABLE if any(p is _NOT_MEMOISABLE for p in parts) else ("seq", parts)
    if value is None or isinstance(
        value, (bool, int, float, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
    ):
        return (type(value), value)
    return _NOT_MEMOISABLE
