"""Every backend: the bundled ones and those installed packages register, in the order they are asked.

A backend registers through the entry-point group `pytest_flopbudget.backends`, the bundled ones too
(pyproject.toml: `torch`, `jax`, `onnx`, `tensorflow`, `savedmodel`): the entry point's name is the backend's
name, and its value names a class (or any function taking no arguments) that returns the backend. They are asked
by `priority`, highest first, ties by name, and the first that accepts a target or a model takes it.

A third party's entry point that cannot be loaded (an import error, a factory that raises, an object that is no
`Backend`, a name already taken) costs that backend only: one line on stderr names the distribution and the entry
point, and the others are used as usual. The bundled backends are there even where the package's metadata is not
(a source checkout on `sys.path`).
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Callable

from pytest_flopbudget._backends.jax_models import JaxModels
from pytest_flopbudget._backends.onnx_files import OnnxFiles
from pytest_flopbudget._backends.protocol import Backend, describe
from pytest_flopbudget._backends.saved_models import SavedModels
from pytest_flopbudget._backends.tensorflow_models import TensorflowModels
from pytest_flopbudget._backends.torch_models import TorchModels

#: The entry-point group a package registers a backend in.
GROUP = "pytest_flopbudget.backends"
#: This package's own backends, by entry-point name (created here, whatever the metadata says).
BUNDLED: dict[str, Callable[[], Backend]] = {
    "jax": JaxModels,
    "onnx": OnnxFiles,
    "savedmodel": SavedModels,
    "tensorflow": TensorflowModels,
    "torch": TorchModels,
}
#: What the seam reads of every backend (`protocol.Backend`): an object without one of them is refused.
MEMBERS = (
    "name", "framework", "grammar", "priority", "files", "suffixes", "directory_marker", "honours", "by_object",
    "accepts", "accepts_model", "accepts_call", "load", "load_object", "reload", "count", "count_model",
    "count_generated", "input_names", "formula_table", "formula_key",
)  # fmt: skip
#: Members added after third parties wrote backends, read where a backend has them and never required (each has a
#: protocol of its own in `protocol.py`): `count_symbolic`, every size of a curve's dims in one count
#: (`SymbolicCount`; without it a curve interpolates point counts).
OPTIONAL_MEMBERS = ("count_symbolic",)

_backends: tuple[Backend, ...] | None = None


def backends() -> tuple[Backend, ...]:
    """Every backend, in the order they are asked (loaded once per process)."""
    global _backends
    if _backends is None:
        _backends = _ordered(_load())
    return _backends


def backend_named(name: str) -> Backend | None:
    return next((backend for backend in backends() if backend.name == name), None)


def general_first() -> list[Backend]:
    """The backends as messages list them: the most general first (lowest priority), so `module:factory` comes
    before a file suffix."""
    return sorted(backends(), key=lambda backend: (backend.priority, backend.name))


def _ordered(found: list[Backend]) -> tuple[Backend, ...]:
    return tuple(sorted(found, key=lambda backend: (-backend.priority, backend.name)))


def _load() -> list[Backend]:
    found: dict[str, Backend] = {name: kind() for name, kind in BUNDLED.items()}
    values = {name: _reference(kind) for name, kind in BUNDLED.items()}
    for point in sorted(_entry_points(), key=lambda point: (point.name, point.value)):
        if values.get(point.name) == point.value:
            continue  # ours, made above, or the same entry point listed twice (a stale egg-info on sys.path)
        values.setdefault(point.name, point.value)
        backend = _loaded(point, found)
        if backend is not None:
            found[point.name] = backend
    return list(found.values())


def _entry_points() -> list[EntryPoint]:
    points = entry_points()
    if hasattr(points, "select"):  # Python 3.10 and later
        return list(points.select(group=GROUP))
    return list(points.get(GROUP, ()))  # Python 3.9: a dict by group


def _loaded(point: EntryPoint, found: dict[str, Backend]) -> Backend | None:
    """The backend `point` names, or None after one line saying why not."""
    try:
        if point.name in found:
            raise ValueError(f"the name {point.name!r} is taken by another backend")
        made = point.load()()
        missing = [member for member in MEMBERS if not hasattr(made, member)]
        if missing:
            raise TypeError(f"{type(made).__name__} is no Backend: it lacks {', '.join(missing)}")
        if made.name != point.name:
            raise ValueError(f"the backend calls itself {made.name!r}; name the entry point so")
        if type(made.priority) is not int:
            raise TypeError(f"its priority is {made.priority!r}, not an integer")
        return made
    except (Exception, SystemExit) as exc:  # a third party's bug must not stop the bundled backends
        print(f"flopbudget: backend entry point {_named(point)}: not loaded: {describe(exc)}", file=sys.stderr)
        return None


def _named(point: EntryPoint) -> str:
    """`'toy = toy_flopbudget:ToyBackend' (pytest_flopbudget.backends) of toy-flopbudget 0.1`."""
    dist = getattr(point, "dist", None)
    owner = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"'{point.name} = {point.value}' ({GROUP}) of {owner}"


def _reference(kind: Callable[[], Backend]) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"
