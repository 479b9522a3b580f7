"""Where a file belongs, for the count cache: the installed libraries (site-packages: a fact is a file's size and
mtime), the standard library (covered by the Python version in the cache key, never a fact), kernel files (never a
fact) or the project (a fact is its content)."""

from __future__ import annotations

import contextlib
import os
import site
import sysconfig
from collections.abc import Iterable


def library_roots() -> tuple[str, ...]:
    """site-packages directories: files there change only when a package is installed or upgraded."""
    roots = set()
    for key in ("purelib", "platlib"):
        with contextlib.suppress(KeyError):
            roots.add(sysconfig.get_paths()[key])
    with contextlib.suppress(AttributeError):
        roots.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        user = site.getusersitepackages()
        if isinstance(user, str):
            roots.add(user)
    return tuple(sorted({os.path.realpath(r) + os.sep for r in roots if r}))


def stdlib_roots() -> tuple[str, ...]:
    """The standard library (covered by the Python version in the cache key), site-packages excepted."""
    roots = set()
    for key in ("stdlib", "platstdlib"):
        with contextlib.suppress(KeyError):
            roots.add(os.path.realpath(sysconfig.get_paths()[key]) + os.sep)
    return tuple(sorted(roots))


#: Kernel files (`/proc/self/maps`): they describe the process, not the model, and differ on every run.
VIRTUAL_ROOTS = ("/proc/", "/sys/", "/dev/")

#: Under `/dev/` but ordinary files: a model's data staged in shared memory (`/dev/shm/config.json`) is an input.
SHARED_MEMORY_ROOTS = ("/dev/shm/",)


def is_virtual(path: str) -> bool:
    """Whether `path` (real, or a directory ending in a separator) is a kernel file, never a fact."""
    return under(path, VIRTUAL_ROOTS) and not under(path, SHARED_MEMORY_ROOTS)


_REAL_DIRECTORIES: dict[str, str] = {}


def real_path(path: str) -> str:
    """`os.path.realpath`, resolving each directory once: thousands of module files share a few hundred."""
    directory, name = os.path.split(path)
    real = _REAL_DIRECTORIES.get(directory)
    if real is None:
        real = _REAL_DIRECTORIES[directory] = os.path.realpath(directory)
    joined = os.path.join(real, name)
    return os.path.realpath(joined) if os.path.islink(joined) else joined


def is_bytecode(path: str) -> bool:
    """A `__pycache__` file is derived from its source, which is recorded; Python itself checks it against it."""
    return path.endswith(".pyc") and f"{os.sep}__pycache__{os.sep}" in path


_ROOTS: list[tuple[tuple[str, ...], tuple[str, ...]]] = []


def python_roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(`library_roots()`, `stdlib_roots()`), found once per process."""
    if not _ROOTS:
        _ROOTS.append((library_roots(), stdlib_roots()))
    return _ROOTS[0]


def under(path: str, roots: Iterable[str]) -> bool:
    return any(path.startswith(root) for root in roots)
