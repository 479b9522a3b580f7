"""The ONNX backend: a path to an `.onnx` file (or an `onnx.ModelProto` given to `count()`), counted by walking its
graph without reading the weights.

Nothing here imports torch, and onnx only when a model is counted or its inputs are read, so an ONNX-only project
never loads torch.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import CountOptions, Loaded, problem
from pytest_flopbudget._config.pyproject import ModelEntry, dim_names
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._counting.user_formulas import onnx_formula_key
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report


class OnnxFiles:
    """`.onnx` paths and `onnx.ModelProto` objects. A graph fixes its own mode and dtypes; the only thing a user
    gives is the shape of each graph input the file leaves open, by name."""

    name = "onnx"
    framework = "ONNX"
    grammar = "a path to an .onnx file"
    #: Before PyTorch: a `.onnx` path could also spell a `module:attribute` reference.
    priority = 100
    files = True
    suffixes: tuple[str, ...] = (".onnx",)
    directory_marker = ""
    #: A graph fixes its own mode, dtypes and method: no option applies.
    honours: frozenset[str] = frozenset()
    by_object = False

    def accepts(self, target: str) -> bool:
        return target.lower().endswith(self.suffixes)

    def accepts_model(self, model: object) -> bool:
        if isinstance(model, (str, os.PathLike)):
            return self.accepts(str(model))
        return type(model).__name__ == "ModelProto" and type(model).__module__.startswith("onnx")

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return self.accepts_model(model)

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        """The file's resolved path (read when counted) and the entry's shapes by input name."""
        path = (root / entry.target).resolve()
        if not path.is_file():
            raise problem(entry.source_of("target"), f"no such {self.framework} file: {path}")
        inputs = {name: list(s.shape) for name, s in entry.inputs.items()} if isinstance(entry.inputs, dict) else None
        # the graph's own symbolic dims, by name (a dim the shapes name is in them already)
        symbols = {name: size for name, size in entry.dims.items() if name not in dim_names(entry.inputs)}
        dims = {"dims": symbols} if symbols else {}
        return Loaded(entry, str(path), kwargs={"inputs": inputs, **dims})

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        return self.load(entry, root)

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        return self.load(entry, root)  # a path and shapes: the graph is read when counted

    def count(self, loaded: Loaded) -> Report:
        try:
            options = CountOptions(inputs=loaded.kwargs["inputs"], dims=loaded.kwargs.get("dims"))
            return self.count_model(loaded.model, (), {}, options)
        except CountingError as exc:
            # the entry's location (`m.onnx`, or the pyproject key of its target) already names the file: the
            # counter's own label, its resolved path, would say it a second time
            text, label = str(exc), f"{loaded.model}: "
            if not text.startswith(label):
                raise
            raise CountingError(text[len(label) :]) from None

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        if args or kwargs or options.training or options.method != "forward":
            raise CountingError(
                "an ONNX model takes input shapes as inputs={'name': [dims]}; positional example inputs, "
                "forward keyword arguments, training=True and method= apply to PyTorch models only"
            )
        from pytest_flopbudget._counting.onnx.backend import count_onnx

        return count_onnx(model, inputs=options.inputs, dims=options.dims)

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        raise CountingError("an ONNX graph counts one call; generate= applies to PyTorch models only")

    def formula_table(self) -> FormulaRegistry[Any]:
        from pytest_flopbudget._counting.onnx.ops import ONNX_OPS

        return ONNX_OPS

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        return onnx_formula_key(op)

    def input_names(self, path: str) -> list[str]:
        """The graph's real inputs (initializers excluded), read without the weights."""
        from pytest_flopbudget._counting.onnx.load import load_model

        proto, _ = load_model(path)
        graph = proto.graph
        initializers = {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
        return [vi.name for vi in graph.input if vi.name not in initializers]
