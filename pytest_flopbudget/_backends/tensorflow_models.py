"""The TensorFlow backend: Keras 3 models on the TensorFlow backend and `tf.function`s, counted from one traced
concrete function's graph (`counting/tensorflow/`).

Its targets are spelled as PyTorch's (`package.module:factory`), so it decides by the object (`by_object`): the
seam imports the target, calls a factory once, and this backend takes a Keras layer or model while Keras runs on
TensorFlow, a `tf.function` or a `ConcreteFunction`. Keras on the torch backend builds torch modules, which the
PyTorch backend counts: `keras.backend.backend()` tells them apart. Given to `count()`, it also takes any other
function whose arguments are TensorFlow tensors or `tf.TensorSpec`s. It looks at `sys.modules` only: an object
cannot be a Keras model or a tf.function unless keras or tensorflow is imported already, so a PyTorch, ONNX or JAX
user never imports tensorflow.

Inputs written in pyproject (shapes, dtypes, named dims) become `tf.TensorSpec`s: nothing is allocated and no
kernel runs. A table of inputs by name is one dict for a Keras model (its named inputs), keyword arguments for a
function. It honours `training` (forward and the gradient tape's backward) and input dtypes; any other option is
refused in one line.
"""

from __future__ import annotations

import inspect
import operator
import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import CountOptions, Loaded, problem
from pytest_flopbudget._backends.references import Reference, inputs_from_reference
from pytest_flopbudget._config.pyproject import DEFAULT_DTYPE, InputSpec, ModelEntry, elements_problem, is_reference
from pytest_flopbudget._config.target_kinds import honouring
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report

#: What a TensorFlow target must be, for messages.
_MODEL = "a Keras model on the TensorFlow backend or a tf.function"


def keras_layer(obj: object) -> bool:
    """A Keras 3 layer or model (keras imported already), found by class name so keras is not imported."""
    return "keras" in sys.modules and any(
        cls.__name__ == "Layer" and cls.__module__.startswith("keras.") for cls in type(obj).__mro__
    )


def keras_backend() -> str:
    """The backend Keras runs on in this process (`tensorflow`, `torch`, `jax`), or `` where keras is not loaded."""
    keras = sys.modules.get("keras")
    try:
        return str(keras.backend.backend()) if keras is not None else ""
    except Exception:  # a half-imported keras: not one of ours
        return ""


def tf_function(obj: object) -> bool:
    """A `tf.function` (`PolymorphicFunction`) or one of its `ConcreteFunction`s (tensorflow imported already)."""
    experimental = getattr(getattr(sys.modules.get("tensorflow"), "types", None), "experimental", None)
    if experimental is None:  # tensorflow not imported (or half-imported): nothing can be a tf.function
        return False
    return isinstance(obj, (experimental.PolymorphicFunction, experimental.ConcreteFunction))


def _tf_leaves(values: Any) -> bool:
    """Whether the arguments hold a TensorFlow tensor, variable or `tf.TensorSpec` (tensorflow imported already)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return False
    kinds = (tf.Tensor, tf.Variable, tf.TensorSpec)
    try:
        return any(isinstance(leaf, kinds) for leaf in tf.nest.flatten(values))
    except Exception:  # a structure tf.nest cannot flatten holds no TensorFlow leaves it could trace
        return False


def _torch_module(obj: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


class TensorflowModels:
    """Keras models on TensorFlow and `tf.function`s, traced once on specs (`counting/tensorflow/engine.py`)."""

    name = "tensorflow"
    framework = "TensorFlow"
    grammar = f'"package.module:factory" (returning {_MODEL})'
    #: Before PyTorch, which takes any object; it takes only what is TensorFlow's (and Keras on TensorFlow's).
    priority = 10
    files = False
    suffixes: tuple[str, ...] = ()
    directory_marker = ""
    honours = frozenset({"training", "dtype"})
    by_object = True

    def accepts(self, target: str) -> bool:
        return is_reference(target)

    def accepts_model(self, model: object) -> bool:
        if keras_layer(model):
            return keras_backend() == "tensorflow"  # on torch, a Keras model is a torch module: PyTorch's
        return tf_function(model)

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if self.accepts_model(model):
            return True
        plain = callable(model) and not isinstance(model, type) and not _torch_module(model) and not keras_layer(model)
        return plain and _tf_leaves((list(args), dict(kwargs)))

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        return self.load_object(entry, root, Reference(entry, root))

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        _refuse_unhonoured(entry)
        found = reference.imported()
        model = found if self.accepts_model(found) else reference.returned() if callable(found) else found
        if not self.accepts_model(model):
            what = f"{entry.target}()" if reference.called() else entry.target
            raise problem(entry.source_of("target"), f"{what} is {_kind(model)}, not {_MODEL}")
        args, kwargs = _inputs(entry, root, keras_layer(model))
        return Loaded(entry, model, args, kwargs)

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        args, kwargs = _inputs(entry, root, keras_layer(loaded.model))
        return Loaded(entry, loaded.model, args, kwargs)

    def count(self, loaded: Loaded) -> Report:
        options = CountOptions(training=loaded.entry.training)
        return self.count_model(loaded.model, loaded.args, dict(loaded.kwargs), options)

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        refused = [
            given
            for given, present in (
                ("execution=", options.execution != "fake"),
                ("method=", options.method != "forward"),
                ("loss_fn=", options.loss_fn is not None),
                ("dims=", options.dims is not None),
            )
            if present
        ]
        if refused:
            raise CountingError(
                f"{', '.join(refused)}: not for a TensorFlow model, traced once on its example inputs (arrays or "
                f"tf.TensorSpecs, unknown dims bound with inputs=)"
            )
        from pytest_flopbudget._counting.tensorflow.engine import count_tf, declared_specs, import_tf

        tf = import_tf()
        label = _label(model)
        given = list(args) if args or kwargs else declared_specs(model)  # a tf.function's own input_signature
        bound_args, bound_kwargs = _bound(tf, model, given, dict(kwargs), options.inputs, label)
        return count_tf(model, bound_args, bound_kwargs, training=options.training, model_name=label)

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        raise CountingError("a TensorFlow model counts one call; generate= applies to PyTorch models only")

    def input_names(self, path: str) -> list[str]:
        return []

    def formula_table(self) -> FormulaRegistry[Any]:
        from pytest_flopbudget._counting.tensorflow.ops import TF_OPS

        return TF_OPS

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        return tf_formula_key(op)


def tf_formula_key(op: object) -> tuple[Hashable, str]:
    """A TensorFlow op by its type, as graphs name it (`"Erf"`, `"MyFusedGelu"`)."""
    if not isinstance(op, str):
        raise TypeError(
            f"register_formula: a TensorFlow op is named by its op type (e.g. 'Erf'); got {type(op).__name__} "
            f"{op!r:.60}"
        )
    if not op.isidentifier() or not op[:1].isalpha():
        raise ValueError(f"register_formula: {op!r} is not a TensorFlow op type (e.g. 'Erf', 'MatrixInverse')")
    return op, f"TensorFlow op '{op}'"


def _refuse_unhonoured(entry: ModelEntry) -> None:
    """The entry keys a TensorFlow model does not honour, refused in one line naming the key (validation read
    PyTorch's backend, whose grammar TensorFlow targets share)."""
    given = (
        ("execution", entry.execution != "fake"),
        ("method", entry.method != "forward"),
        ("generate", bool(entry.generate)),
        ("decode-inputs", entry.decode_inputs is not None),
    )
    for key, present in given:
        if present:
            raise problem(
                entry.source_of(key), f"{key} applies to {honouring(key)} targets only, not to TensorFlow models"
            )


def _inputs(entry: ModelEntry, root: Path, keras: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The entry's inputs as `tf.TensorSpec`s (float32 unless a dtype is given), or what its
    `package.module:function` returns. A table by name is one dict argument for a Keras model (its named inputs)
    and keyword arguments for a function."""
    spec = entry.inputs
    source = entry.source_of("inputs")
    if spec is None:
        return (), {}
    if isinstance(spec, str):
        return inputs_from_reference(spec, root, source)
    for each in spec if isinstance(spec, list) else spec.values():
        too_many = elements_problem(each.shape)
        if too_many is not None:
            raise problem(source, f"an input cannot be made: {too_many}")
    try:
        import tensorflow as tf
    except ImportError:
        raise problem(
            source, "a TensorFlow model's inputs need tensorflow: pip install 'pytest-flopbudget[tensorflow]'"
        ) from None

    def tensor_spec(each: InputSpec, name: str | None = None) -> Any:
        try:
            dtype = tf.as_dtype(each.dtype or DEFAULT_DTYPE)
        except TypeError:
            raise problem(source, f"{each.dtype!r} is not a TensorFlow dtype") from None
        return tf.TensorSpec(tuple(each.shape), dtype, name=name)

    if isinstance(spec, list):
        return tuple(tensor_spec(each) for each in spec), {}
    named = {name: tensor_spec(each, name) for name, each in spec.items()}
    return ((named,), {}) if keras else ((), named)


def _bound(
    tf: Any,
    model: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    given: Mapping[str, Any] | None,
    label: str,
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments with every `tf.TensorSpec`'s unknown dims bound from `inputs=` (by the spec's name, else the
    Keras model's input name or the function's parameter name at its position, else a keyword's name); a dim
    left unknown is one line, never a count that drops it."""
    if given is not None and not isinstance(given, Mapping):
        raise CountingError(f"inputs= must map input names to shapes, e.g. inputs={{'x': [1, 16]}}; got {given!r:.60}")
    wanted = dict(given or {})
    positional = _positional_names(model, len(args))
    named: list[str] = []
    unknown: list[tuple[str, Any]] = []

    def bind(value: Any, fallback: str) -> Any:
        if not isinstance(value, tf.TensorSpec):
            return value
        name = value.name or fallback
        named.append(name)
        shape = wanted.pop(name, None)
        if shape is not None:
            sizes = _sizes(name, shape)
            if not value.shape.is_compatible_with(sizes):
                raise CountingError(f"{label}: inputs[{name!r}] = {list(sizes)} does not fit its spec's {value.shape}")
            return tf.TensorSpec(sizes, value.dtype, name=value.name)
        if value.shape.rank is None or None in value.shape.as_list():
            unknown.append((name, value.shape))
        return value

    def bound(value: Any, fallback: str) -> Any:
        if isinstance(value, Mapping):
            return {key: bind(item, str(key)) for key, item in value.items()}
        return bind(value, fallback)

    args = [bound(value, positional[index]) for index, value in enumerate(args)]
    kwargs = {key: bound(value, key) for key, value in kwargs.items()}
    if wanted:
        raise CountingError(
            f"{label}: inputs= names {sorted(wanted)[0]!r}, which no tf.TensorSpec argument is named; the specs are "
            f"{', '.join(repr(n) for n in named) or '(none)'}"
        )
    if unknown:
        name, shape = unknown[0]
        dims = "[unknown rank]" if shape.rank is None else _render(shape.as_list())
        raise CountingError(
            f"{label}: input {name!r} has unknown dims {dims}; bind them with inputs={{{name!r}: [...]}}, or give an "
            f"array or a fully shaped tf.TensorSpec"
        )
    return args, kwargs


def _positional_names(model: Any, count: int) -> list[str]:
    """A name for each positional argument: the Keras model's input names, else the function's parameters."""
    names: list[str] = []
    if keras_layer(model):
        names = [str(getattr(t, "name", "") or "") for t in getattr(model, "inputs", None) or ()]
    else:
        python = getattr(model, "python_function", model)
        try:
            names = [
                p.name
                for p in inspect.signature(python).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):  # a builtin or a ConcreteFunction: no Python signature to read
            names = []
    return [names[i] if i < len(names) and names[i] else f"args_{i}" for i in range(count)]


def _sizes(name: str, shape: Any) -> tuple[int, ...]:
    wrong = CountingError(f"inputs[{name!r}] must be a list of sizes such as [1, 16], got {shape!r:.60}")
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise wrong
    sizes = []
    for dim in shape:
        try:
            if isinstance(dim, bool):
                raise TypeError
            size = operator.index(dim)  # an int or a numpy integer, never a float that happens to be whole
        except TypeError:
            raise wrong from None
        if size < 0:
            raise wrong
        sizes.append(size)
    return tuple(sizes)


def _render(dims: list[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _label(model: Any) -> str:
    return str(
        getattr(model, "name", "")
        or getattr(model, "__name__", "")
        or getattr(getattr(model, "python_function", None), "__name__", "")
        or "model"
    )


def _kind(obj: Any) -> str:
    kind = type(obj).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"
