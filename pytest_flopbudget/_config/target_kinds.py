"""The kinds of target configuration knows: what validating an entry asks of the backend that will run it.

Configuration sits below the backends, so it never imports them: it sees each backend through `TargetKind`, the
few members of the `Backend` protocol (`_backends/protocol.py`) that validation reads (which targets it accepts,
how they are spelled, whether they are model files, which entry keys and options it honours). The package root
plugs the backend registry in with `use_target_kinds`, as it plugs the Report's text renderer in; every import of
the package runs the root first, so validation always sees the bundled and the installed backends.

The messages that refuse an option name the frameworks that honour it (`honouring`), read from the backends, so a
third party's backend is named where it honours one, and no message names a framework by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Protocol

#: Entry keys (and their command-line options and `count()` arguments) a backend may honour or refuse: refused
#: ones are errors, never silently ignored. `dtype` is an input's dtype (`{shape = [1, 16], dtype = "int64"}`,
#: `--dtype`, `--input 1,16:int64`); `decode-inputs` goes with `generate`.
OPTIONS = ("training", "execution", "method", "generate", "decode-inputs", "dtype")


class TargetKind(Protocol):
    """What validation reads of a backend (every `Backend` is a `TargetKind`)."""

    #: The backend's name (`torch`, `onnx`): the entry point's name, and `register_formula(backend=NAME)`.
    name: str
    #: The framework's name as messages say it (`PyTorch`, `ONNX`).
    framework: str
    #: How its targets are spelled, for `expected ...` (`a path to an .onnx file`).
    grammar: str
    #: Asked before the backends of lower priority (higher first; ties by name).
    priority: int
    #: Its targets are model files (or directories): resolved against the project root, inputs bound by the names
    #: the file gives them (a table of name = shape, optional), its symbolic dims named by the file itself.
    files: bool
    #: Its models are directories holding this file (`saved_model.pb`); empty: the target string alone tells.
    directory_marker: str
    #: The `OPTIONS` it honours; an entry of this backend that sets another is refused.
    honours: frozenset[str]
    #: It shares another backend's target grammar and is chosen by the object a target loads, not by the string:
    #: validation and the messages that list frameworks read the others.
    by_object: bool

    def accepts(self, target: str) -> bool: ...


def _none() -> Sequence[TargetKind]:
    return ()


_kinds: Callable[[], Sequence[TargetKind]] = _none


def use_target_kinds(kinds: Callable[[], Sequence[TargetKind]]) -> None:
    """Plug in the backends, in the order they are asked (the package root plugs the backend registry in)."""
    global _kinds
    _kinds = kinds


def target_kinds() -> Sequence[TargetKind]:
    """Every backend, in the order they are asked: the first that accepts a target loads it."""
    return _kinds()


def kind_of(target: str, root: Path | None = None) -> TargetKind | None:
    """The backend that will load `target` (relative to `root`, else the current directory); None: no backend
    takes it."""
    return next((kind for kind in target_kinds() if not kind.by_object and takes(kind, target, root)), None)


def takes(kind: TargetKind, target: str, root: Path | None = None) -> bool:
    """Whether `kind` takes `target`: its `accepts` says so, or the target names a directory, relative to `root`
    (else the current directory), that holds the kind's `directory_marker` (a SavedModel's `saved_model.pb`)."""
    if kind.accepts(target):
        return True
    return bool(kind.directory_marker) and is_model_directory(Path(root or ".") / target.strip(), kind)


def is_model_directory(path: Path, kind: TargetKind) -> bool:
    """Whether `path` is a directory holding `kind`'s `directory_marker`."""
    try:
        return bool(kind.directory_marker) and (path / kind.directory_marker).is_file()
    except (OSError, ValueError):  # a path the system cannot even look at is no model
        return False


def _general_first() -> list[TargetKind]:
    """The backends from the most general to the most specific (lowest priority first): the order they are
    listed in messages, so `module:factory` comes before a file suffix. A backend that decides by the object
    (`by_object`) spells its targets as another does, and is not listed."""
    kinds = [kind for kind in target_kinds() if not kind.by_object]
    return sorted(kinds, key=lambda kind: (kind.priority, kind.name))


def target_grammar() -> str:
    """Every spelling of a target: `"package.module:factory" (...) or a path to an .onnx file`."""
    return joined([kind.grammar for kind in _general_first()])


def honouring(option: str) -> str:
    """The frameworks that honour `option`, as messages name them (`PyTorch`, `PyTorch, JAX or TensorFlow`): every
    backend, those that decide by the object included (a JAX model honours `training`)."""
    kinds = sorted(target_kinds(), key=lambda kind: (kind.priority, kind.name))
    frameworks = [kind.framework for kind in kinds if option in kind.honours]
    return joined(list(dict.fromkeys(frameworks))) or "no"


def model_phrase(kind: TargetKind) -> str:
    """`an ONNX graph`, `a toy model`: what a refusal says fixes its own mode and dtypes."""
    return f"{article(kind.framework)} {'graph' if kind.files else 'model'}"


def refusing(option: str) -> str:
    """`not an ONNX graph`: the models of every backend that does not honour `option`."""
    return ", ".join(f"not {model_phrase(kind)}" for kind in _general_first() if option not in kind.honours)


def article(word: str) -> str:
    """`an ONNX`, `a PyTorch`, `a toy`: the indefinite article a framework's name takes (an acronym is spelled
    out: `an ONNX`, `an MLX`)."""
    acronym = word[:2].isupper()
    vowel = word[:1].upper() in ("AEFHILMNORSX" if acronym else "AEIOU")
    return f"{'an' if vowel else 'a'} {word}"


def joined(items: list[str]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    return " or ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)
