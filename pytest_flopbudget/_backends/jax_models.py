"""The JAX backend: Flax NNX and Linen modules, Keras 3 models on the JAX backend, and JAX functions, counted from
their jaxpr (`counting/jax/`).

Its targets are spelled as PyTorch's (`package.module:factory`), so it decides by the object (`by_object`): the
seam imports the target, calls a factory once, and this backend takes an `nnx.Module`, a `flax.linen.Module`, a
Keras 3 model while Keras runs on JAX (`keras.backend.backend() == "jax"`), an Equinox module or a `jax.jit`
function. Given to
`count()`, it takes those, and any other function whose arguments are jax arrays or `jax.ShapeDtypeStruct`s (the
caller saying it is JAX). It looks at `sys.modules` only: an object cannot be a Flax module, a Keras model or a jax
array unless flax, keras or jax is imported already, so a PyTorch or ONNX user never imports jax.

Inputs written in pyproject (shapes, dtypes such as `int32`, named dims) become `jax.ShapeDtypeStruct`s: nothing is
allocated and nothing runs. It honours `training` (forward and backward phases, as the engine traces them) and
input dtypes; any other option is refused in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import CountOptions, Loaded, describe, problem
from pytest_flopbudget._backends.references import Reference, inputs_from_reference
from pytest_flopbudget._config.pyproject import (
    DEFAULT_DTYPE,
    InputSpec,
    ModelEntry,
    dim_names,
    elements_problem,
    is_reference,
)
from pytest_flopbudget._config.target_kinds import honouring
from pytest_flopbudget._counting.keras_layers import is_keras_layer
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._counting.symbolic import NotPolynomial
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report

#: What a JAX target must be, for messages.
_MODEL = "a Flax NNX or Linen module, a Keras 3 model (JAX backend) or a jax.jit function"


def _flax_module(obj: object) -> str:
    """`nnx` or `linen` where `obj` is a module of that Flax API (flax imported already), else ``."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(obj, nnx.Module):
        return "nnx"
    linen = sys.modules.get("flax.linen")
    if linen is not None and isinstance(obj, linen.Module):
        return "linen"
    return ""


def _equinox_module(obj: object) -> bool:
    """An `eqx.Module` (equinox imported already)."""
    equinox = sys.modules.get("equinox")
    return equinox is not None and isinstance(obj, equinox.Module)


def _keras_on_jax(obj: object) -> bool:
    """A Keras 3 model (or layer) while Keras runs on JAX (keras imported already; its backend is fixed then)."""
    keras = sys.modules.get("keras")
    return keras is not None and is_keras_layer(obj) and keras.backend.backend() == "jax"


def _jitted(obj: object) -> bool:
    """A function wrapped by `jax.jit` (its type is jax's own)."""
    return "jax" in sys.modules and callable(obj) and type(obj).__module__.split(".")[0] in ("jax", "jaxlib")


def _jax_leaves(args: Any) -> bool:
    """Whether the arguments hold a jax array or a `jax.ShapeDtypeStruct` (jax imported already)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    kinds = (jax.Array, jax.ShapeDtypeStruct)
    return any(isinstance(leaf, kinds) for leaf in jax.tree_util.tree_leaves(args))


def _torch_module(obj: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


class JaxModels:
    """Flax NNX and Linen modules and JAX functions, traced abstractly (`counting/jax/engine.py`)."""

    name = "jax"
    framework = "JAX"
    grammar = f'"package.module:factory" (returning {_MODEL})'
    #: Before PyTorch, which takes any object; it takes only what is JAX's, so its place among the others matters
    #: no more than that.
    priority = 10
    files = False
    suffixes: tuple[str, ...] = ()
    directory_marker = ""
    honours = frozenset({"training", "dtype"})
    by_object = True

    def accepts(self, target: str) -> bool:
        return is_reference(target)

    def accepts_model(self, model: object) -> bool:
        return bool(_flax_module(model)) or _keras_on_jax(model) or _jitted(model) or _equinox_module(model)

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if self.accepts_model(model):
            return True
        plain = callable(model) and not isinstance(model, type) and not _torch_module(model)
        return plain and _jax_leaves((args, kwargs))

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        return self.load_object(entry, root, Reference(entry, root))

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        _refuse_unhonoured(entry)
        found = reference.imported()
        model = found if self.accepts_model(found) else reference.returned() if callable(found) else found
        if not self.accepts_model(model):
            what = f"{entry.target}()" if reference.called() else entry.target
            raise problem(entry.source_of("target"), f"{what} is {_kind(model)}, not {_MODEL}")
        args, kwargs = _inputs(entry, root)
        return Loaded(entry, model, args, kwargs)

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        args, kwargs = _inputs(entry, root)
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
                ("inputs=", options.inputs is not None),
                ("dims=", options.dims is not None),
            )
            if present
        ]
        if refused:
            raise CountingError(
                f"{', '.join(refused)}: not for a JAX model, traced abstractly from its example inputs (arrays or "
                f"jax.ShapeDtypeStructs)"
            )
        from pytest_flopbudget._counting.jax.engine import count_jax, count_linen, count_nnx

        if _keras_on_jax(model):
            from pytest_flopbudget._counting.jax.keras_models import count_keras

            return count_keras(model, *args, training=options.training, **kwargs)
        if _equinox_module(model):
            from pytest_flopbudget._counting.jax.equinox_models import count_equinox

            return count_equinox(model, *args, training=options.training, **kwargs)
        kind = _flax_module(model)
        if kind == "nnx":
            return count_nnx(model, *args, training=options.training, **kwargs)
        if kind == "linen":
            return count_linen(model, *args, training=options.training, **kwargs)
        return count_jax(model, args, kwargs, training=options.training, model_name=_function_name(model))

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        raise CountingError("a JAX model counts one call; generate= applies to PyTorch models only")

    def count_symbolic(self, loaded: Loaded, dims: Sequence[str]) -> Report:
        """The entry counted once for every size of `dims`: its inputs' named axes become jax symbolic dims
        (`jax.export.symbolic_shape`), one `jax.make_jaxpr` traces the model on them, and the walk prices each
        equation with the shared formulas on exact polynomials (`counting.symbolic.Symbolic`). Raises
        `NotPolynomial` saying why where it cannot (inputs from a function, a size that is no polynomial, a
        model that branches on a size): the curve then interpolates point counts."""
        entry = loaded.entry
        if not isinstance(entry.inputs, (list, dict)):
            raise NotPolynomial("the inputs come from a function, whose shapes are numbers: no dim to trace")
        named = set(dim_names(entry.inputs))
        missing = [dim for dim in dims if dim not in named]
        if missing:
            raise NotPolynomial(f"no input shape names {', '.join(missing)}")
        import jax

        from pytest_flopbudget._counting.jax.engine import count_jax, count_linen, count_nnx
        from pytest_flopbudget._counting.jax.symbolic import symbols

        ranges = {dim: entry.curve[dim] for dim in dims if dim in entry.curve}
        args, kwargs = _structs(entry, entry.inputs, symbols(jax, dims, ranges))
        model, training = loaded.model, entry.training
        try:
            kind = _flax_module(model)
            if kind == "nnx":
                return count_nnx(model, *args, training=training, symbolic_dims=dims, symbolic_ranges=ranges, **kwargs)
            if kind == "linen":
                return count_linen(
                    model, *args, training=training, symbolic_dims=dims, symbolic_ranges=ranges, **kwargs
                )
            return count_jax(
                model,
                args,
                kwargs,
                training=training,
                model_name=_function_name(model),
                symbolic_dims=dims,
                symbolic_ranges=ranges,
            )
        except NotPolynomial:
            raise
        except Exception as exc:  # whatever failed on symbolic sizes, the point counts say it or succeed
            raise NotPolynomial(f"the symbolic count failed ({describe(exc)})") from None

    def input_names(self, path: str) -> list[str]:
        return []

    def formula_table(self) -> FormulaRegistry[Any]:
        from pytest_flopbudget._counting.jax.ops import JAX_OPS

        return JAX_OPS

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        """A jaxpr primitive by name (`"erf"`, `"mylib_fused_gelu"`) or the `Primitive` object itself (its
        `.name`); or a named composite priced by rule, by its dotted name (`"jax.nn.gelu"`,
        `"flax.nnx.LayerNorm_backward"`: docs/jax.md)."""
        from pytest_flopbudget._counting.jax.ops import JAX_OPS

        name = op if isinstance(op, str) else getattr(op, "name", None) if hasattr(op, "bind") else None
        if not isinstance(name, str):
            raise TypeError(
                f"register_formula: a JAX primitive is named by its jaxpr name (e.g. 'erf') or given as the "
                f"Primitive object; got {type(op).__name__} {op!r:.60}"
            )
        if "." in name and name in JAX_OPS:
            return name, f"JAX composite '{name}'"
        if not name or any(part.isspace() for part in name) or "." in name:
            raise ValueError(
                f"register_formula: JAX primitive {op!r} is not a jaxpr primitive name (e.g. 'erf') nor a named "
                f"composite (e.g. 'jax.nn.gelu', 'flax.nnx.LayerNorm'; docs/jax.md lists them)"
            )
        return name, f"JAX primitive '{name}'"


def _refuse_unhonoured(entry: ModelEntry) -> None:
    """The entry keys a JAX model does not honour, refused in one line naming the key (validation read PyTorch's
    backend, whose grammar JAX targets share)."""
    given = (
        ("execution", entry.execution != "fake"),
        ("method", entry.method != "forward"),
        ("generate", bool(entry.generate)),
        ("decode-inputs", entry.decode_inputs is not None),
    )
    for key, present in given:
        if present:
            raise problem(entry.source_of(key), f"{key} applies to {honouring(key)} targets only, not to JAX models")


def _inputs(entry: ModelEntry, root: Path) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The entry's inputs as `jax.ShapeDtypeStruct`s (float32 unless a dtype is given), or what its
    `package.module:function` returns."""
    spec = entry.inputs
    if spec is None:
        return (), {}
    if isinstance(spec, str):
        return inputs_from_reference(spec, root, entry.source_of("inputs"))
    return _structs(entry, spec)


def _structs(
    entry: ModelEntry, spec: list[InputSpec] | dict[str, InputSpec], symbols: Mapping[str, Any] | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Written input shapes as `jax.ShapeDtypeStruct`s; an axis named by a dim in `symbols` gets that jax symbolic
    dim instead of its size at the point (`count_symbolic`)."""
    source = entry.source_of("inputs")
    for each in spec if isinstance(spec, list) else spec.values():
        too_many = elements_problem(each.shape)
        if too_many is not None:
            raise problem(source, f"an input cannot be made: {too_many}")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise problem(source, "a JAX model's inputs need jax: pip install 'pytest-flopbudget[jax]'") from None

    def struct(each: InputSpec) -> Any:
        try:
            dtype = jnp.dtype(each.dtype or DEFAULT_DTYPE)
        except TypeError:
            raise problem(source, f"{each.dtype!r} is not a JAX dtype") from None
        names = each.names or (None,) * len(each.shape)
        shape = tuple((symbols or {}).get(name, size) if name else size for size, name in zip(each.shape, names))
        return jax.ShapeDtypeStruct(shape, dtype)

    if isinstance(spec, list):
        return tuple(struct(each) for each in spec), {}
    return (), {name: struct(each) for name, each in spec.items()}


def _function_name(fn: Any) -> str:
    return str(getattr(fn, "__name__", "") or getattr(getattr(fn, "__wrapped__", None), "__name__", "") or "")


def _kind(obj: Any) -> str:
    kind = type(obj).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"
