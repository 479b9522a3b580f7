"""Op -> formula lookup, with an explicit set of ops known to be free, and a layer for users' own formulas.

A backend asks `lookup(op)` and gets one of three answers: a formula, `FREE`, or `None`. `None` means the op has
compute we have no formula for, and the backend must report it as skipped: there is deliberately no default.
`FREE` is the one zero-cost sentinel of both backends: a free op costs no FLOPs and is not recorded for them,
whereas a formula that returns a zero `Cost` (dropout in inference) records the call. Free of FLOPs is not free
of memory: the PyTorch engine records a free op that copies, gathers or fills with the bytes it moves alone
(`counting/torch/traffic.py`); a view is not recorded at all.

Formulas registered with `register_formula` (`user_formulas.py`) sit on top of the built-in table: `lookup` finds
them first, and removing one brings back what was there before.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Callable, Generic, TypeVar, Union

from pytest_flopbudget._counting.formulas import Cost

Formula = Callable[..., Cost]
K = TypeVar("K", bound=Hashable)


class Free:
    """Marker for ops that move, view or describe data without arithmetic."""

    def __repr__(self) -> str:
        return "FREE"


FREE = Free()
Entry = Union[Formula, Free]


class FormulaRegistry(Generic[K]):
    """Formulas keyed by op, optionally by the first opset version they apply to (ONNX)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[K, list[tuple[int, Entry]]] = {}
        #: key -> users' formulas, the newest last; they apply at every version and hide the built-in entry.
        self._user: dict[K, list[Formula]] = {}

    def register(self, *keys: K, since: int = 0) -> Callable[[Formula], Formula]:
        """Decorator: `@registry.register(key, ...)` files one formula under every key."""

        def decorate(fn: Formula) -> Formula:
            for key in keys:
                self._add(key, since, fn)
            return fn

        return decorate

    def register_free(self, *keys: K, since: int = 0) -> None:
        for key in keys:
            self._add(key, since, FREE)

    def _add(self, key: K, since: int, entry: Entry) -> None:
        versions = self._entries.setdefault(key, [])
        if any(v == since for v, _ in versions):
            raise ValueError(f"{self.name}: {key!r} (since {since}) is registered twice")
        versions.append((since, entry))
        versions.sort(key=lambda item: item[0])

    def lookup(self, key: K, version: int | None = None) -> Entry | None:
        """The user's formula for `key` if any, else the built-in entry at `version` (see `builtin`)."""
        user = self._user.get(key)
        if user:
            return user[-1]
        return self.builtin(key, version)

    def builtin(self, key: K, version: int | None = None) -> Entry | None:
        """The built-in entry for `key` at `version` (the newest whose `since` <= version; the newest if None)."""
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

    def push_user(self, key: K, formula: Formula) -> None:
        """Put a user's formula on top of `key`'s entries (checks are the caller's: `register_formula`)."""
        self._user.setdefault(key, []).append(formula)

    def pop_user(self, key: K, formula: Formula) -> bool:
        """Remove that user formula from `key`; False when it is not (or no longer) registered."""
        stack = self._user.get(key, [])
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] is formula:
                del stack[index]
                if not stack:
                    del self._user[key]
                return True
        return False

    def user_keys(self) -> list[K]:
        """Keys that have a user's formula now."""
        return sorted(self._user, key=repr)

    def user_formulas(self, key: K) -> list[Formula]:
        """The users' formulas registered for `key`, the one in use last."""
        return list(self._user.get(key, ()))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> Iterator[K]:
        """The built-in keys."""
        return iter(sorted(self._entries, key=repr))

    def is_free(self, key: K) -> bool:
        return self.lookup(key) is FREE
