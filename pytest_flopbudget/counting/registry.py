"""Op -> formula lookup, with an explicit set of ops known to be free.

A backend asks `lookup(op)` and gets one of three answers: a formula, `FREE`, or `None`. `None` means the op has
compute we have no formula for, and the backend must report it as skipped: there is deliberately no default.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, Callable, Generic, TypeVar, Union

from .formulas import Cost

Formula = Callable[..., Cost]
K = TypeVar("K", bound=Hashable)


class _Free:
    """Marker for ops that move, view or describe data without arithmetic."""

    def __repr__(self) -> str:
        return "FREE"


FREE_OP = _Free()
Entry = Union[Formula, _Free]


class FormulaRegistry(Generic[K]):
    """Formulas keyed by op, optionally by the first opset version they apply to (ONNX)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[K, list[tuple[int, Entry]]] = {}

    def register(self, *keys: K, since: int = 0) -> Callable[[Formula], Formula]:
        """Decorator: `@registry.register(key, ...)` files one formula under every key."""

        def decorate(fn: Formula) -> Formula:
            for key in keys:
                self._add(key, since, fn)
            return fn

        return decorate

    def register_free(self, *keys: K, since: int = 0) -> None:
        for key in keys:
            self._add(key, since, FREE_OP)

    def _add(self, key: K, since: int, entry: Entry) -> None:
        versions = self._entries.setdefault(key, [])
        if any(v == since for v, _ in versions):
            raise ValueError(f"{self.name}: {key!r} (since {since}) is registered twice")
        versions.append((since, entry))
        versions.sort(key=lambda item: item[0])

    def lookup(self, key: K, version: int | None = None) -> Entry | None:
        """The entry for `key` at `version` (the newest whose `since` <= version; the newest if None)."""
        versions = self._entries.get(key)
        if not versions:
            return None
        if version is None:
            return versions[-1][1]
        chosen: Entry | None = None
        for since, entry in versions:
            if since <= version:
                chosen = entry
        return chosen

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def keys(self) -> Iterator[K]:
        return iter(sorted(self._entries, key=repr))

    def is_free(self, key: K) -> bool:
        return self.lookup(key) is FREE_OP
