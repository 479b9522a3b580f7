"""`package.module:factory` targets: the reference imported, and its factory called, once per load.

Several backends spell their targets this way (PyTorch, JAX): the object decides which one loads it. The seam
(`dispatch.py`) imports the reference, calls a factory at most once, and asks the backends that decide by the
object (`Backend.by_object`) whether they take what it found; the backend that loads the entry reads the same
`Reference`, so a factory never runs twice and its failures read as one line naming the pyproject key.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import describe, problem
from pytest_flopbudget._config.location import Location
from pytest_flopbudget._config.pyproject import ModelEntry

_UNSET: Any = object()


def import_object(reference: str, root: Path, source: Location) -> Any:
    """`"package.module:attr.attr"` -> the object, importing with `root` on `sys.path` as a user would expect."""
    module_name, _, attributes = reference.partition(":")
    root_text = str(root)
    if root_text not in sys.path:
        sys.path.insert(0, root_text)
    importlib.invalidate_caches()  # files written since the last import (generated models) must be found
    try:
        obj: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # any import failure (sys.exit too) is the user's to fix, in one line
        raise problem(source, f"cannot import {module_name!r}: {describe(exc)}") from None
    for attribute in attributes.split("."):
        try:
            obj = getattr(obj, attribute)
        except AttributeError:
            raise problem(source, f"{module_name!r} has no attribute {attributes!r}") from None
    return obj


class Reference:
    """An entry's `package.module:factory` target: `imported()` is the object it names, `returned()` what calling
    it returns; each is computed once."""

    def __init__(self, entry: ModelEntry, root: Path) -> None:
        self.entry = entry
        self.root = root
        self._imported: Any = _UNSET
        self._returned: Any = _UNSET

    def imported(self) -> Any:
        if self._imported is _UNSET:
            self._imported = import_object(self.entry.target, self.root, self.entry.source_of("target"))
        return self._imported

    def returned(self) -> Any:
        """What the factory returns; it raising is one line naming the target."""
        if self._returned is _UNSET:
            try:
                self._returned = self.imported()()
            except (Exception, SystemExit) as exc:  # the factory is user code
                raise problem(self.entry.source_of("target"), f"{self.entry.target}() raised {describe(exc)}") from None
        return self._returned

    def called(self) -> bool:
        """Whether the factory has been called (by the seam, choosing the backend)."""
        return self._returned is not _UNSET


def inputs_from_reference(spec: str, root: Path, source: Location) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`inputs = "pkg.module:make_inputs"`: the positional and keyword inputs the function (or value) gives, as
    every Python-target backend reads them: a mapping is keyword inputs, a tuple or list positional ones, anything
    else the one positional input."""
    function = import_object(spec, root, source)
    try:
        value = function() if callable(function) else function
    except (Exception, SystemExit) as exc:  # user code
        raise problem(source, f"{spec}() raised {describe(exc)}") from None
    if isinstance(value, Mapping):
        return (), dict(value)
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    return (value,), {}
