"""The SavedModel backend: a TensorFlow SavedModel directory (one holding `saved_model.pb`), counted from that
file alone: its serving signature's graph is walked, and nothing in `variables/` is read.

A SavedModel is a directory, not a file with a suffix, so it says so with `directory_marker`: a target naming a
directory that holds `saved_model.pb` (relative to the project root) is this backend's, and `flopbudget init`
takes such a directory in a folder as one model. Like an ONNX file, the model fixes its own mode and dtypes; the
only thing a user gives is the shape of each signature input the model leaves open, by name. tensorflow is
imported only when a model is counted or its inputs are read.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import CountOptions, Loaded, problem
from pytest_flopbudget._backends.tensorflow_models import tf_formula_key
from pytest_flopbudget._config.pyproject import ModelEntry, dim_names
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report

#: The file that makes a directory a SavedModel.
MARKER = "saved_model.pb"


def _is_saved_model(path: str | os.PathLike[str]) -> bool:
    try:
        return (Path(path) / MARKER).is_file()
    except (OSError, ValueError):  # a path the system cannot look at is no model
        return False


class SavedModels:
    """SavedModel directories (a path to one, given to `count()` or as a target). The serving signature is what
    is counted: one inference call, its dtypes fixed by the model."""

    name = "savedmodel"
    framework = "TensorFlow SavedModel"
    grammar = "a path to a SavedModel directory"
    #: Before PyTorch and beside ONNX: a directory path never spells a `module:attribute` reference, but it is
    #: checked on disk, so it is asked before the grammar that takes any string with a colon.
    priority = 90
    files = True
    suffixes: tuple[str, ...] = ()
    directory_marker = MARKER
    #: A signature fixes its own mode and dtypes: no option applies.
    honours: frozenset[str] = frozenset()
    by_object = False

    def accepts(self, target: str) -> bool:
        """A directory (relative to the current directory, or absolute) that holds `saved_model.pb`; the seam
        also asks relative to the project root (`directory_marker`)."""
        return _is_saved_model(target.strip())

    def accepts_model(self, model: object) -> bool:
        return isinstance(model, (str, os.PathLike)) and _is_saved_model(model)

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return self.accepts_model(model)

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        """The directory's resolved path (read when counted) and the entry's shapes by signature input name."""
        path = (root / entry.target.strip()).resolve()
        if not _is_saved_model(path):
            raise problem(entry.source_of("target"), f"no SavedModel directory (holding {MARKER}) at {path}")
        own = [name for name in entry.dims if name not in dim_names(entry.inputs)]
        if own:
            raise problem(
                entry.source_of("dims"),
                f"a SavedModel names no dims of its own ({own[0]!r}); write the dim in an input's shape, e.g. "
                f'inputs = {{ x = ["{own[0]}", 16] }}',
            )
        inputs = {name: list(s.shape) for name, s in entry.inputs.items()} if isinstance(entry.inputs, dict) else None
        return Loaded(entry, str(path), kwargs={"inputs": inputs})

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        return self.load(entry, root)

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        return self.load(entry, root)  # a path and shapes: the graph is read when counted

    def count(self, loaded: Loaded) -> Report:
        try:
            return self.count_model(loaded.model, (), {}, CountOptions(inputs=loaded.kwargs["inputs"]))
        except CountingError as exc:
            # the entry's location already names the model: the counter's own label, its path, would say it twice
            text, label = str(exc), f"{loaded.model}: "
            if not text.startswith(label):
                raise
            raise CountingError(text[len(label) :]) from exc

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        given = [
            name
            for name, present in (
                ("positional example inputs", bool(args)),
                ("keyword arguments", bool(kwargs)),
                ("training=True", options.training),
                ("method=", options.method != "forward"),
                ("execution=", options.execution != "fake"),
                ("loss_fn=", options.loss_fn is not None),
                ("dims=", options.dims is not None),
            )
            if present
        ]
        if given:
            raise CountingError(
                f"a SavedModel takes its signature's input shapes as inputs={{'name': [dims]}}, not "
                f"{', '.join(given)} (its serving signature fixes the mode and dtypes)"
            )
        from pytest_flopbudget._counting.tensorflow.saved_model import count_saved_model

        return count_saved_model(os.fspath(model), inputs=options.inputs)

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        raise CountingError("a SavedModel counts one call of its signature; generate= applies to PyTorch models only")

    def input_names(self, path: str) -> list[str]:
        """The serving signature's inputs by name, read from `saved_model.pb` (no variable is read)."""
        from pytest_flopbudget._counting.tensorflow.saved_model import signature_inputs

        return [each.name for each in signature_inputs(path)]

    def formula_table(self) -> FormulaRegistry[Any]:
        """The TensorFlow engine's table: a formula registered for either TensorFlow backend prices both."""
        from pytest_flopbudget._counting.tensorflow.ops import TF_OPS

        return TF_OPS

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        return tf_formula_key(op)
