"""What a backend is: the `Backend` protocol, the `Loaded` model it hands from loading to counting, and the one-line
error helpers its loaders share.

A backend turns one kind of target into a `Report`: it says whether it takes a target string (a pyproject or
command-line `target`) or a model object (given to the public `count()`), loads a configured entry into a model and
its example inputs, and counts it. `dispatch.py` asks each backend in turn; nothing else tells the kinds apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, Callable, Protocol

from pytest_flopbudget._config.location import LocatedError, Location, Problem
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._errors import CountingError
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
    """The keyword options of the public `count()`, each for the backends that honour it (the others refuse it)."""

    training: bool = False
    execution: str = "fake"
    loss_fn: Callable[[Any], Any] | None = None
    #: Input shapes by name, for a model whose inputs are named graph inputs (ONNX).
    inputs: Any = None
    method: str = "forward"
    #: Sizes of a model file's symbolic dims by name (ONNX `batch`, `sequence`).
    dims: Any = None
    #: `generate=N`: new tokens of a generation (`count_generated`), and the function building a decode step's
    #: inputs (`decode_inputs=`).
    generate: int = 0
    decode_inputs: Callable[..., Any] | None = None


class Backend(Protocol):
    """One kind of model: a Python object built by user code (PyTorch), a model file (ONNX), ...

    Every member is read by the seam, never probed: a backend says what it accepts (`accepts`, `accepts_model`,
    `grammar`, `files`, `suffixes`, `directory_marker`), which entry keys and options it honours (`honours`),
    where it is asked among the others (`priority`), whether it counts generations (`generate` in `honours`,
    `count_generated`) and whether it owns a formula table (`formula_table`). A class that subclasses `Backend`
    inherits the defaults written here (no file suffixes, no model directories, no options honoured, priority 50,
    deciding by the string, `accepts_call` as `accepts_model`, `reload` and `load_object` loading again, no
    generation, no formula table, no named inputs).

    Optional members (`registry.OPTIONAL_MEMBERS`, each described by a protocol of its own below) came after
    backends that lack them: the seam reads one with `getattr` and does without where a backend does not have it,
    so adding one breaks no third party and no class has to declare it.
    """

    #: The backend's name: its entry point's name, and `register_formula(..., backend=NAME)`.
    name: str
    #: The framework as messages name it (`PyTorch`, `ONNX`): `training = true applies to PyTorch targets only`.
    framework: str
    #: How its targets are spelled, for `expected ...` (`a path to an .onnx file`).
    grammar: str
    #: Asked before backends of lower priority (ties by name): the first whose `accepts` says yes takes a target,
    #: and `accepts_model` an object. The PyTorch backend is 0, last, as it takes any object that is not a builtin
    #: value; the ONNX backend is 100, as a `.onnx` path could also spell a `module:attribute` reference. A third
    #: party's backend is 50 unless it says otherwise: after a file suffix, before PyTorch.
    priority: int = 50
    #: Targets are model files (or directories): resolved against the project root, import no Python module, bind
    #: input shapes by the names the file gives them (`input_names`, a table of name = shape) and name their own
    #: symbolic dims.
    files: bool = False
    #: The suffixes of its model files (`(".onnx",)`): what `flopbudget init` looks for in a folder.
    suffixes: tuple[str, ...] = ()
    #: Its models are directories, not files (a TensorFlow SavedModel): the file inside that marks one
    #: (`saved_model.pb`). A target naming a directory that holds it, relative to the project root, is this
    #: backend's whatever `accepts` says of the string, and `flopbudget init` takes such a directory in a folder as
    #: one model. Empty (the default): the string alone tells.
    directory_marker: str = ""
    #: The entry keys, and their command-line options and `count()` arguments, it honours, out of
    #: `target_kinds.OPTIONS` (`training`, `execution`, `method`, `generate`, `decode-inputs`, `dtype`): one it
    #: does not honour is refused in one line (pyproject, command line, `count()`), never ignored.
    honours: frozenset[str] = frozenset()
    #: Its targets are spelled in a grammar another backend owns (`package.module:factory`, PyTorch's), and the
    #: object decides: the seam imports the reference (calling a factory once, `references.Reference`) and this
    #: backend loads the entry (`load_object`) where `accepts_model` takes what was found. Validation and the
    #: messages that list frameworks read the backends that decide by the string; this one refuses an option it
    #: does not honour when it loads, in one line naming the key.
    by_object: bool = False

    def accepts(self, target: str) -> bool:
        """Whether `target` (a pyproject or command-line target string) is this backend's to load."""
        ...

    def accepts_model(self, model: object) -> bool:
        """Whether `model` (the object given to the public `count()`) is this backend's to count."""
        ...

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether `count(model, *args, **kwargs)` is this backend's: `accepts_model` unless the arguments tell
        (a plain function is JAX's when its arguments are jax arrays)."""
        return self.accepts_model(model)

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        """The entry's model and example inputs; raises `LocatedError` naming the pyproject key to fix (`problem`)."""
        ...

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        """`load` for a `package.module:factory` target the seam imported (`reference`, a `references.Reference`:
        its `imported()` object and what its factory `returned()`, each computed once), where `by_object` backends
        share the grammar."""
        return self.load(entry, root)

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        """`loaded`'s model with `entry`'s inputs: the same entry at other sizes of its named dims (a curve's
        points), without loading the model again where the backend can."""
        return self.load(entry, root)

    def count(self, loaded: Loaded) -> Report:
        """Count a loaded entry as its configuration says (mode, execution, method, generation)."""
        ...

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        """The public `count(model, *args, **kwargs)` for a model this backend accepts; an option in `options` the
        backend does not honour is refused (`CountingError`), never ignored."""
        ...

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        """The public `count(model, *args, generate=N)` (`options.generate`, `options.decode_inputs`): called only
        for a backend that honours `generate`."""
        raise CountingError(f"the {self.name} backend does not count generations")

    def input_names(self, path: str) -> list[str]:
        """The named inputs a model file declares, in order (a file backend's); a Python target has none."""
        return []

    def formula_table(self) -> FormulaRegistry[Any] | None:
        """The formula table `register_formula(..., backend=NAME)` adds to; None: this backend has none."""
        return None

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        """`op` as `formula_table()` keys it, and its label in messages (`torch op 'mylib.gelu'`); raises
        `TypeError` or `ValueError` for an op this backend cannot name. Called only where there is a table."""
        raise TypeError(f"register_formula: the {self.name} backend has no formula table")


class SymbolicCount(Protocol):
    """The optional member `count_symbolic` (JAX's): every size of a curve's dims in one count."""

    def count_symbolic(self, loaded: Loaded, dims: Sequence[str]) -> Report:
        """The loaded entry counted once for every size of its named `dims` (a curve's), each figure an exact
        polynomial in them (`counting.symbolic.Symbolic`, an `int` where constant), per layer as a count holds it.
        The curve checks it against point counts and uses it in place of interpolating them (docs/curves.md).
        Raises `NotPolynomial` saying why it cannot; the curve then interpolates point counts and says so. A
        backend without the member counts at points only."""
        ...


def problem(source: Location, message: str) -> LocatedError:
    """One located line, `pyproject.toml:5: tool.flopbudget.models.x.target: message`."""
    return LocatedError([Problem(source, message)])


def describe(exc: BaseException) -> str:
    """`ValueError: the first line of the message`: user code failed, and one line says how."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
