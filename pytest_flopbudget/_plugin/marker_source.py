"""Which `flop_budget` marker holds a test to its budget, and the line it is written on.

pytest keeps a function's own markers before a parameter's (`pytest.param(..., marks=...)`), so its
`get_closest_marker` would let the function's marker win over the per-parameter one, which is the closer of the
two. And a `Mark` does not say where it was written: failures, annotations and the `to accept:` hint must point at
the decorator (or the `pytest.param`) to edit, not only at the test function. Both are answered here, the line
by reading the test file's syntax tree (never importing or running it).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

MARKER = "flop_budget"


def closest_marker(item: pytest.Item) -> pytest.Mark | None:
    """The `flop_budget` marker that applies to `item`: a parameter's own marker first, then the nearest of the
    function, its class and its module (pytest's order)."""
    callspec = getattr(item, "callspec", None)
    for mark in getattr(callspec, "marks", ()) or ():
        if mark.name == MARKER:
            return mark
    return item.get_closest_marker(MARKER)


def marker_line(path: str | None, first_line: int | None, mark: pytest.Mark) -> int | None:
    """The line of the `flop_budget(...)` call that made `mark`, in the test file `path` whose function starts at
    `first_line` (its first decorator); None when it cannot be told (then callers point at the function)."""
    if not path or first_line is None:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    calls = _calls(path, stat.st_mtime_ns, stat.st_size)
    if calls is None:
        return None
    own = [call for call in calls if call.scope == first_line]
    for scope in (own, calls):
        same = [call.line for call in scope if call.matches(mark.args, mark.kwargs)]
        if len(same) == 1 or (same and scope is own):
            return same[0]
    if len(own) == 1:  # written with names or expressions: the function's only budget marker is the one
        return own[0].line
    return None


class _Call:
    """One `flop_budget(...)` call in a test file: its line, the function (first line) whose decorators hold it,
    and its arguments when they are literals."""

    def __init__(self, node: ast.Call, scope: int | None) -> None:
        self.line = node.lineno
        self.scope = scope
        try:
            self.args: tuple[Any, ...] | None = tuple(ast.literal_eval(arg) for arg in node.args)
            self.kwargs: dict[str, Any] | None = {
                str(k.arg): ast.literal_eval(k.value) for k in node.keywords if k.arg is not None
            }
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            self.args = self.kwargs = None

    def matches(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        return self.args is not None and self.args == tuple(args) and self.kwargs == dict(kwargs)


@functools.lru_cache(maxsize=64)
def _calls(path: str, _mtime: int, _size: int) -> list[_Call] | None:
    """Every `flop_budget(...)` call in the file (keyed by mtime and size, so an edited file is read again)."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls: list[_Call] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            for decorator in node.decorator_list:
                calls.extend(_Call(call, first) for call in _marker_calls(decorator))
    inside = {call.line for call in calls}
    calls.extend(_Call(call, None) for call in _marker_calls(tree) if call.lineno not in inside)
    return calls


def _marker_calls(node: ast.AST) -> Iterator[ast.Call]:
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            func = child.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == MARKER:
                yield child
