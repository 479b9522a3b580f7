"""Ops whose meta kernel refuses inputs the real kernel accepts, answered another way under fake tensors.

A fake tensor only needs the output's shape, dtype and device. Where a meta kernel is narrower than the real one
(a dtype it does not list), running it on inputs it does accept and restoring the dtype gives the same metadata;
the formula reads shapes only, so the count is the same as on real tensors.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def _grouped_mm_in_bf16(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`aten._grouped_mm`'s meta kernel takes only bf16 (CPU runs fp32 too): shapes do not depend on the dtype."""

    def bf16(value: Any) -> Any:
        return value.to(torch.bfloat16) if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    dtype = kwargs.get("out_dtype") or (args[0].dtype if args else torch.float32)
    cast_args = tuple(bf16(v) for v in args[:2]) + tuple(args[2:])
    cast_kwargs = {k: v for k, v in kwargs.items() if k not in ("out_dtype", "bias")}
    if len(cast_args) > 3:  # bias (positional): not supported by the meta kernel and it does not change the shape
        cast_args = (*cast_args[:3], None, *cast_args[4:])
    return func(*cast_args, **cast_kwargs).to(dtype)


FAKE_FALLBACKS: dict[str, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    "aten._grouped_mm": _grouped_mm_in_bf16,
}
