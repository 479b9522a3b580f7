"""Counting a SavedModel directory from its `saved_model.pb` alone: the variables are never read.

`tf.saved_model.load` restores every variable from `variables/` (and builds the Python objects around them); a
count needs none of that. The `SavedModel` proto holds the serving signature (its inputs' names, dtypes and
shapes, and the tensors it returns) and the graph with its function library; the variables there are
`VarHandleOp`s whose `shape` attribute gives their sizes, and the functions declare the shape of each variable
they receive. So the graph is imported with the signature's inputs replaced by placeholders of the bound shapes,
and the ops the signature's outputs depend on are walked (`walk.Walker`), each function body rebuilt with its
caller's shapes. A directory whose `variables/` data files are deleted counts the same.

A SavedModel keeps no layer objects: its ops are named by the name scopes saved in its graph (a Keras export's
`functional_1/fc_1/MatMul` is in layer `functional_1.fc_1`), and each variable is charged to the layer of the
first op that reads it.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_flopbudget._counting.graph_memory import measure_memory
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._counting.tensorflow.engine import (
    TF_CONVENTIONS,
    charge_variables,
    finish_memory,
    import_tf,
    versions,
)
from pytest_flopbudget._counting.tensorflow.memory import BYTES_CONVENTION
from pytest_flopbudget._counting.tensorflow.walk import Walker
from pytest_flopbudget._errors import CountingError, MissingInputSizes
from pytest_flopbudget._metrics import PARAM_BYTES
from pytest_flopbudget._report import Report

#: The file that makes a directory a SavedModel.
MARKER = "saved_model.pb"
#: The signature counted: what TensorFlow Serving calls when none is named.
SERVING = "serving_default"
#: The meta graph counted, by its tag, when the file holds several.
SERVE_TAG = "serve"
#: The scope the placeholders standing in for the signature's inputs are made under (free ops, never a layer).
_INPUT_SCOPE = "flopbudget_inputs"


@dataclasses.dataclass(frozen=True)
class SignatureInput:
    """One input of the serving signature: its name (`inputs=` binds it), dtype and dims (None: unknown size;
    `dims` None: unknown rank), and the graph tensor it feeds."""

    name: str
    dtype: str
    dims: list[int | None] | None
    tensor: str


def is_saved_model(path: str | Path) -> bool:
    """Whether `path` is a directory holding a `saved_model.pb`."""
    try:
        return (Path(path) / MARKER).is_file()
    except (OSError, ValueError):  # an unreadable or impossible path is no model
        return False


def signature_inputs(path: str | Path) -> list[SignatureInput]:
    """The serving signature's inputs, in name order (the order `inputs=` lists them in messages)."""
    tf = import_tf()
    _, signature, label = _signature(tf, Path(path))
    return _inputs(tf, signature, label)


def count_saved_model(
    path: str | Path,
    inputs: Mapping[str, Sequence[int]] | None = None,
    *,
    model_name: str = "",
) -> Report:
    """Count one call of the SavedModel's serving signature at the shapes `inputs` binds (by input name), without
    loading the model: nothing in `variables/` is read, and no kernel runs."""
    tf = import_tf()
    directory = Path(path)
    meta, signature, label = _signature(tf, directory)
    declared = _inputs(tf, signature, label)
    bound = bind(declared, inputs, label)
    graph = tf.Graph()
    with graph.as_default():
        with tf.name_scope(_INPUT_SCOPE):
            feeds = {
                each.tensor: tf.compat.v1.placeholder(tf.as_dtype(each.dtype), bound[each.name], name=each.name)
                for each in declared
            }
        outputs = [info.name for _, info in sorted(signature.outputs.items()) if info.name]
        try:
            returned = tf.graph_util.import_graph_def(meta.graph_def, input_map=feeds, return_elements=outputs, name="")
        except Exception as exc:  # a graph this TensorFlow cannot import (a custom op it lacks, a newer op)
            text = " ".join(str(exc).split())[:300]
            raise CountingError(f"{label}: the graph cannot be imported ({type(exc).__name__}: {text})") from None
    tally = Tally()
    walker = Walker(tf, graph)
    walker.walk(graph, tally, outputs=returned)
    charge_variables(tally, walker.readers, walker.variable_sizes)
    memory = walker.memory
    sized = {name: nbytes for name, nbytes in memory.variable_bytes.items() if nbytes is not None}
    charge_variables(tally, walker.readers, sized, PARAM_BYTES)
    finish_memory(tally, memory)
    report = Report(
        **tally.report_fields(),
        training=False,
        backend="tensorflow",
        model=model_name or directory.resolve().name or str(directory),
        inputs=[{"name": each.name, "shape": list(bound[each.name]), "dtype": each.dtype} for each in declared],
        versions=versions(),
    )
    report.conventions.update(TF_CONVENTIONS)
    held = (PARAM_BYTES,) if len(sized) == len(memory.variable_bytes) else ()  # a variable without a size: none
    measure_memory(report, memory.unsized, memory.recorder.peak(), bytes_convention=BYTES_CONVENTION, held=held)
    return report


def _signature(tf: Any, directory: Path) -> tuple[Any, Any, str]:
    """The meta graph and serving signature of the SavedModel in `directory`, read from `saved_model.pb` only."""
    from tensorflow.core.protobuf import saved_model_pb2

    label = str(directory)
    file = directory / MARKER
    if not file.is_file():
        raise CountingError(f"{label}: not a SavedModel directory (no {MARKER} in it)")
    proto = saved_model_pb2.SavedModel()
    try:
        proto.ParseFromString(file.read_bytes())
    except Exception as exc:  # OSError, or a DecodeError for a file that is no SavedModel proto
        raise CountingError(f"{label}: {MARKER} cannot be read ({type(exc).__name__}: {exc})") from None
    metas = list(proto.meta_graphs)
    if not metas:
        raise CountingError(f"{label}: {MARKER} holds no meta graph")
    meta = next((m for m in metas if SERVE_TAG in m.meta_info_def.tags), metas[0])
    signatures = {key: value for key, value in meta.signature_def.items() if not key.startswith("__")}
    if SERVING in signatures:
        return meta, signatures[SERVING], label
    if len(signatures) == 1:
        return meta, next(iter(signatures.values())), label
    named = ", ".join(repr(key) for key in sorted(signatures)) or "none"
    raise CountingError(f"{label}: no {SERVING!r} signature to count; the signatures are {named}")


def _inputs(tf: Any, signature: Any, label: str) -> list[SignatureInput]:
    found = []
    for name, info in sorted(signature.inputs.items()):
        if info.WhichOneof("encoding") != "name":
            raise CountingError(f"{label}: signature input {name!r} is a sparse or composite tensor; not counted")
        shape = info.tensor_shape
        dims = None if shape.unknown_rank else [d.size if d.size >= 0 else None for d in shape.dim]
        found.append(SignatureInput(name, tf.as_dtype(info.dtype).name, dims, info.name))
    return found


def bind(
    declared: Sequence[SignatureInput], inputs: Mapping[str, Sequence[int]] | None, label: str
) -> dict[str, tuple[int, ...]]:
    """Each input's shape: the one `inputs` gives it (it must fit the signature), else the signature's own when
    every dim is known; an unknown dim nobody gives is `MissingInputSizes`, never dropped."""
    names = [each.name for each in declared]
    if inputs is not None and not isinstance(inputs, Mapping):
        raise CountingError(
            f"inputs= must map signature input names to shapes, e.g. inputs={{'{names[0] if names else 'x'}': "
            f"[1, 16]}}; got {type(inputs).__name__}"
        )
    given = dict(inputs or {})
    for name in given:
        if name not in names:
            raise CountingError(
                f"{label}: inputs= names {name!r}, which is not a signature input; the signature inputs are "
                f"{', '.join(repr(n) for n in names) or '(none)'}"
            )
    bound: dict[str, tuple[int, ...]] = {}
    missing: list[str] = []
    for each in declared:
        if each.name in given:
            bound[each.name] = _fitted(each, _sizes(each.name, given[each.name]), label)
        elif each.dims is not None and all(d is not None for d in each.dims):
            bound[each.name] = tuple(int(d) for d in each.dims if d is not None)
        else:
            missing.append(each.name)
    if missing:
        listed = "; ".join(f"'{each.name}' {_render(each.dims)}" for each in declared)
        templates = [(name, _template(next(e for e in declared if e.name == name).dims)) for name in missing]
        raise MissingInputSizes(label, listed, templates, label)
    return bound


def _sizes(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise CountingError(f"inputs[{name!r}] must be a list of sizes such as [1, 16], got {shape!r:.60}")
    sizes = []
    for d in shape:
        try:
            if isinstance(d, bool):
                raise TypeError
            size = operator.index(d)
        except TypeError:
            raise CountingError(f"inputs[{name!r}] must hold whole sizes such as [1, 16], got {d!r:.40}") from None
        if size < 0:
            raise CountingError(f"inputs[{name!r}] has size {size}; a size cannot be negative")
        sizes.append(size)
    if math.prod(sizes) > 2**63 - 1:
        raise CountingError(f"inputs[{name!r}] = {sizes} has more elements than an int64 can index")
    return tuple(sizes)


def _fitted(each: SignatureInput, shape: tuple[int, ...], label: str) -> tuple[int, ...]:
    if each.dims is None:
        return shape
    if len(each.dims) != len(shape):
        raise CountingError(
            f"{label}: inputs[{each.name!r}] has {len(shape)} dims {list(shape)} but the signature input has "
            f"{len(each.dims)}: {_render(each.dims)}"
        )
    for axis, (declared, size) in enumerate(zip(each.dims, shape)):
        if declared is not None and declared != size:
            raise CountingError(
                f"{label}: inputs[{each.name!r}] gives {size} at axis {axis}, where the signature fixes {declared}: "
                f"{_render(each.dims)}"
            )
    return shape


def _render(dims: Sequence[int | None] | None) -> str:
    return "[unknown rank]" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _template(dims: Sequence[int | None] | None) -> list[str]:
    return ["<sizes>"] if dims is None else ["<?>" if d is None else str(d) for d in dims]
