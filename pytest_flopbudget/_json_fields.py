"""Checked reads of JSON documents this tool wrote and reads back (baselines, cached counts, curve records).

Such a file may have been edited by hand, merged badly or cut short, so nothing in it is trusted: every field is
checked for its type before use, and a wrong one is a `ValueError` naming the field's path and what it holds
(`layers['fc'].metrics must be an object, got an array`), one line that the caller prefixes with the file's name.
Nothing is coerced, and the value shown is short and ASCII-escaped, so a hostile file cannot put a newline or an
escape sequence into the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: How much of a wrong value an error shows.
SHOWN = 60
MISSING: Any = object()


def show(value: object) -> str:
    """`value` for a one-line error message: its repr, ASCII-escaped (no newline or control character), and short."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {len(str(value)) if value.bit_length() < 10_000 else 'thousands of'} digits"
    text = ascii(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def joined(where: str, key: str) -> str:
    """The path of `key` inside the field at `where` (the document's root when `where` is empty)."""
    return f"{where}.{key}" if where else key


def field_of(data: Mapping[str, Any], key: str, where: str, default: Any = MISSING) -> Any:
    value = data.get(key, default)
    if value is MISSING:
        raise ValueError(f"missing field {joined(where, key)!r}")
    return value


def an_object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object, got {show(value)}")
    for name in value:
        if not isinstance(name, str):  # JSON keys are strings; a Mapping from elsewhere may not be
            raise ValueError(f"{where} has a key that is not a string: {show(name)}")
    return value


def a_bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {show(value)}")
    return value


def a_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {show(value)}")
    return value


def a_list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be an array, got {show(value)}")
    return value
