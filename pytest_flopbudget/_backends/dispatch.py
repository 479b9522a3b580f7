"""Which backend loads and counts a target or a model: the one place that tells the kinds of model apart.

The backends (`registry.backends()`) are asked in order of priority and the first that accepts wins: specific
kinds first (a `.onnx` path could also spell a `module:attribute` reference, and an `onnx.ModelProto` is an object
like any other), PyTorch last, as it takes any object that is not a builtin value. Adding a backend is one class
implementing `protocol.Backend`, registered as an entry point (`registry.py`); nothing here names one.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from pytest_flopbudget._backends.protocol import Backend, CountOptions, Loaded, describe, problem
from pytest_flopbudget._backends.references import Reference
from pytest_flopbudget._backends.registry import backends
from pytest_flopbudget._config.pyproject import ModelEntry, generate_problem
from pytest_flopbudget._config.target_kinds import article, honouring, takes, target_grammar
from pytest_flopbudget._counting.symbolic import PointsOnly
from pytest_flopbudget._errors import CountingError, FlopBudgetError
from pytest_flopbudget._report import Report


def backend_for_target(target: str, root: Path | None = None) -> Backend | None:
    """The backend of a target string (pyproject or command line, a path relative to `root`, else the current
    directory); None: no backend takes it (a model name?). A backend that decides by the object (`by_object`) is
    chosen when the target is loaded (`load_entry`)."""
    return next((b for b in backends() if not b.by_object and takes(b, target, root)), None)


def backend_for(entry: ModelEntry, root: Path | None = None) -> Backend:
    """The backend of a configured entry, its target resolved against `root` (else the directory of the
    pyproject.toml that declares it, else the current directory); a target no backend takes is located as
    configuration checks it."""
    backend = backend_for_target(entry.target, root if root is not None else entry_root(entry))
    if backend is None:
        raise problem(entry.source_of("target"), f"{entry.target!r} is not a target; expected {target_grammar()}")
    return backend


def entry_root(entry: ModelEntry) -> Path | None:
    """The directory an entry's target is relative to: its pyproject.toml's (None, the current directory, for one
    made on the command line)."""
    declared = entry.source.file
    return Path(declared).parent if declared else None


def backend_for_model(model: object) -> Backend | None:
    """The backend of an object given to the public `count()`; None: no backend counts it."""
    return next((backend for backend in backends() if backend.accepts_model(model)), None)


def backend_for_call(model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Backend | None:
    """The backend of `count(model, *args, **kwargs)`: the arguments may tell (`accepts_call`)."""
    return next((backend for backend in backends() if backend.accepts_call(model, args, kwargs)), None)


def load_entry(entry: ModelEntry, root: Path) -> tuple[Backend, Loaded]:
    """The backend that loads `entry`, and what it loaded.

    The backend is the string's (`backend_for`), unless backends that decide by the object (`by_object`) share
    its grammar: then the reference is imported once (`Reference`), a plain function or class called once as a
    factory, and the first of them whose `accepts_model` takes the object (or what the factory returned) loads it;
    otherwise the string's backend loads it from the same `Reference`.
    """
    backend = backend_for(entry, root)
    deciders = [b for b in backends() if b.by_object and b.accepts(entry.target)]
    if not deciders:
        return backend, backend.load(entry, root)
    reference = Reference(entry, root)
    chosen = _by_object(deciders, reference) or backend
    return chosen, chosen.load_object(entry, root, reference)


def _by_object(deciders: list[Backend], reference: Reference) -> Backend | None:
    found = reference.imported()
    chosen = next((b for b in deciders if b.accepts_model(found)), None)
    if chosen is None and (inspect.isfunction(found) or inspect.isclass(found)):
        # a factory: every backend of this grammar calls it (PyTorch too); called here once, kept for the loader
        returned = reference.returned()
        chosen = next((b for b in deciders if b.accepts_model(returned)), None)
    return chosen


def count_entry(entry: ModelEntry, root: Path) -> Report:
    """Count one configured model with its backend.

    Raises `LocatedError` for a bad target or inputs and `CountingError` (prefixed with the model's table) when
    the model itself fails to run.
    """
    backend, loaded = load_entry(entry, root)
    return _counted(entry, lambda: backend.count(loaded))


def entry_counter(entry: ModelEntry, root: Path) -> EntryCounter:
    """A function that counts `entry` at other sizes of its named dims (`entry.at(...)`), as `count_entry` would,
    loading the model once (a curve counts it at many sizes); its `symbolic` counts every size at once where the
    backend can."""
    return EntryCounter(root)


class EntryCounter:
    """`count_at(entry.at(values))`: the entry at other sizes, loaded once and reloaded with new inputs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.held: tuple[Backend, Loaded] | None = None

    def __call__(self, at: ModelEntry) -> Report:
        if self.held is not None:
            backend = self.held[0]
            loaded = backend.reload(self.held[1], at, self.root)
        else:
            backend, loaded = load_entry(at, self.root)
        self.held = (backend, loaded)
        return _counted(at, lambda: backend.count(loaded))

    def symbolic(self, at: ModelEntry, dims: Sequence[str]) -> Report:
        """The entry counted once for every size of `dims`, by its backend's optional `count_symbolic`
        (`protocol.SymbolicCount`: figures that are exact polynomials in the dims). Raises `PointsOnly` where the
        backend has no such member, `NotPolynomial` saying why where this model is no polynomial there."""
        if self.held is None:
            self(at)
        assert self.held is not None
        backend, loaded = self.held
        count_symbolic = getattr(backend, "count_symbolic", None)  # optional: `protocol.SymbolicCount`
        if not callable(count_symbolic):
            raise PointsOnly(f"the {backend.name} backend counts at points only")
        report: Report = count_symbolic(backend.reload(loaded, at, self.root), tuple(dims))
        return report


def _counted(entry: ModelEntry, run: Callable[[], Report]) -> Report:
    try:
        return run()
    except FlopBudgetError as exc:
        raise CountingError(f"{entry.source.where()}: {exc}") from None
    except (Exception, SystemExit) as exc:  # a backend bug must still read as one line naming the model
        raise CountingError(f"{entry.source.where()}: counting failed: {describe(exc)}") from None


def count(
    model: Any,
    *example_inputs: Any,
    training: bool = False,
    execution: str = "fake",
    loss_fn: Callable[[Any], Any] | None = None,
    inputs: Mapping[str, Sequence[int]] | None = None,
    method: str = "forward",
    generate: int | None = None,
    decode_inputs: Callable[..., Any] | None = None,
    **forward_kwargs: Any,
) -> Report:
    """Count the FLOPs, MACs, parameters and skipped ops of one forward pass (or one training step).

    `model` is a `torch.nn.Module` (called with `example_inputs` and `forward_kwargs`), an ONNX model given as a
    path or an `onnx.ModelProto` (with `inputs=` binding input names to shapes where the graph leaves them open),
    or a Flax NNX or Linen module, or a JAX function given jax arrays or `jax.ShapeDtypeStruct`s (docs/jax.md), or
    a Keras model on TensorFlow, a `tf.function` or a function given TensorFlow tensors or `tf.TensorSpec`s (unknown
    dims bound by name with `inputs=`), or a path to a SavedModel directory (`inputs=` by signature input name;
    docs/tensorflow.md).
    `method="decode"` counts that method of the model instead of forward (run on the count's private copy).
    `generate=N` counts a greedy generation of N new tokens phase by phase (docs/generation.md; `method` and
    `decode_inputs` give the decode step of a model without Hugging Face's `generate`).
    """
    backend = backend_for_call(model, example_inputs, forward_kwargs)
    if backend is None:
        raise CountingError(
            f"count() needs a torch.nn.Module, a Flax module or JAX function, a Keras model or tf.function, a path "
            f"to an .onnx file or a SavedModel directory, or an onnx.ModelProto; got {type(model).__name__} "
            f"{model!r:.60}"
        )
    options = CountOptions(training=training, execution=execution, loss_fn=loss_fn, inputs=inputs, method=method)
    if generate is not None or decode_inputs is not None:
        if "generate" not in backend.honours or training or not generate:
            raise CountingError(
                f"generate=N (N >= 1) counts {article(honouring('generate'))} model's inference, not training or a file"
            )
        if decode_inputs is not None and "decode-inputs" not in backend.honours:
            raise CountingError(f"decode_inputs= applies to {honouring('decode-inputs')} models only")
        if generate_problem(generate) is not None:
            raise CountingError(f"generate={generate}: {generate_problem(generate)}")
        options = dataclasses.replace(options, generate=generate, decode_inputs=decode_inputs)
        return backend.count_generated(model, example_inputs, forward_kwargs, options)
    return backend.count_model(model, example_inputs, forward_kwargs, options)
