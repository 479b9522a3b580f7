"""What a backend is: the `Backend` protocol, the `Loaded` model it hands from loading to counting, and the one-line
error helpers its loaders share.

A backend turns one kind of target into a `Report`: it says whether it takes a target string (a pyproject or
command-line `target`) or a model object (given to the public `count()`), loads a configured entry into a model and
its example inputs, and counts it. `dispatch.py` asks each backend in turn; nothing else tells the kinds apart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Protocol

from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._report import Report


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A configured entry made ready to count: the model and its example inputs (positional and keyword), as the
    backend's own `count` takes them (an ONNX file's are its resolved path and `inputs=` shapes)."""

    entry: ModelEntry
    model: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: `decode-inputs`: the function that builds a decode step's inputs (PyTorch generation), imported on load.
    decode_inputs: Any = None


@dataclasses.dataclass(frozen=True)
class CountOptions:
    """The keyword options of the public `count()`, each for the backends it applies to (the others refuse them)."""

    training: bool = False
    execution: str = "fake"
    loss_fn: Callable[[Any], Any] | None = None
    #: Input shapes by name, for a model whose inputs are named graph inputs (ONNX).
    inputs: Any = None
    method: str = "forward"
    #: Sizes of a model file's symbolic dims by name (ONNX `batch`, `sequence`).
    dims: Any = None


class Backend(Protocol):
    """One kind of model: a Python object built by user code (PyTorch), a model file (ONNX), ..."""

    #: The backend's name, as `register_formula(..., backend=NAME)` spells it.
    name: str
    #: Targets are model files: `init` finds them in folders, they are resolved against the project root, import
    #: no Python module, fix their own mode and dtypes, and bind input shapes by name (`input_names`).
    files: bool

    def accepts(self, target: str) -> bool:
        """Whether `target` (a pyproject or command-line target string) is this backend's to load."""
        ...

    def accepts_model(self, model: object) -> bool:
        """Whether `model` (the object given to the public `count()`) is this backend's to count."""
        ...

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        """The entry's model and example inputs; raises `LocatedError` naming the pyproject key to fix."""
        ...

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        """`loaded`'s model with `entry`'s inputs: the same entry at other sizes of its named dims (a curve's
        points), without loading the model again."""
        ...

    def count(self, loaded: Loaded) -> Report:
        """Count a loaded entry as its configuration says (mode, execution, method)."""
        ...

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        """The public `count(model, *args, **kwargs)` for a model this backend accepts."""
        ...

    def input_names(self, path: str) -> list[str]:
        """The named inputs a model file declares, in order (a file backend's); a Python target has none."""
        ...


def problem(source: Location, message: str) -> LocatedError:
    """One located line, `pyproject.toml:5: tool.flopbudget.models.x.target: message`."""
    return LocatedError([Problem(source, message)])


def describe(exc: BaseException) -> str:
    """`ValueError: the first line of the message`: user code failed, and one line says how."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
