"""Files opened by compiled code, which raises no `open` audit event: the ones the recorder can still name.

Python's `open` audit event covers every file opened through Python, but a C library opens its files itself:
`h5py.File` (HDF5), `safetensors.safe_open`, `numpy.fromfile`, `torch.from_file`. Two ways recover them:

- the Python functions through which those libraries receive the path are wrapped while a count is recorded, so
  the path is noted as a read like any other (and so becomes an ordinary file fact: its sha256);
- when recording ends, every project file that the process holds open or mapped and did not before (a
  memory-mapped weights file, an HDF5 file left open) is noted too.

A native reader that is not listed here and closes its file before the count ends stays invisible; the docs
(docs/cli.md, the count cache) say so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

#: module -> attributes that take a file's path as their first argument and read it natively.
READERS: dict[str, tuple[str, ...]] = {
    "h5py._hl.files": ("make_fid",),
    "safetensors": ("safe_open",),
    "safetensors.torch": ("safe_open", "load_file"),
    "numpy": ("fromfile",),
    "torch": ("from_file",),
}

_WRAPPED: dict[tuple[str, str], Any] = {}


def wrap_loaded(note: Callable[[Any], None]) -> None:
    """Wrap the readers of every listed module already imported; `note(path)` is called before each read."""
    for module_name in READERS:
        module = sys.modules.get(module_name)
        if module is not None:
            wrap_module(module, note)


def wrap_module(module: Any, note: Callable[[Any], None]) -> None:
    for attribute in READERS.get(getattr(module, "__name__", ""), ()):
        key = (module.__name__, attribute)
        original = getattr(module, attribute, None)
        if original is None or key in _WRAPPED:
            continue
        _WRAPPED[key] = original
        with contextlib.suppress(AttributeError, TypeError):
            setattr(module, attribute, _noting(original, note))


def unwrap_all() -> None:
    for (module_name, attribute), original in list(_WRAPPED.items()):
        module = sys.modules.get(module_name)
        if module is not None:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(module, attribute, original)
        del _WRAPPED[(module_name, attribute)]


#: The names under which the readers take their path as a keyword (`numpy.fromfile(file=...)`,
#: `safetensors.safe_open(filename=...)`, `h5py`'s `make_fid(name, ...)`).
PATH_KEYWORDS = ("file", "filename", "name", "path")


def _noting(original: Any, note: Callable[[Any], None]) -> Any:
    @functools.wraps(original)
    def reader(*args: Any, **kwargs: Any) -> Any:  # the call is passed on untouched, however the path is given
        path = args[0] if args else next((kwargs[key] for key in PATH_KEYWORDS if key in kwargs), None)
        if isinstance(path, (str, bytes, os.PathLike)):
            note(path)
        return original(*args, **kwargs)

    return reader


def held_files() -> set[str]:
    """Every file this process has open or mapped now (Linux; elsewhere nothing)."""
    held: set[str] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("/") and _read_only(name):  # a log the model writes is not an input
                    held.add(target)
    with contextlib.suppress(OSError), open("/proc/self/maps", "rb") as maps:
        for line in maps.read().decode("utf-8", "surrogateescape").splitlines():
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/"):
                held.add(fields[5])
    return {path for path in held if not path.endswith(" (deleted)")}


def _read_only(fd: str) -> bool:
    with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
        for line in info.read().decode("ascii", "replace").splitlines():
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE == os.O_RDONLY
    return False
