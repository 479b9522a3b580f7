"""Counting a JAX function from abstract arguments: trace with `jax.make_jaxpr`, walk the jaxpr, build a `Report`.

Nothing is compiled and no weight is allocated: arguments become `jax.ShapeDtypeStruct`s, Flax NNX modules are
built under `nnx.eval_shape` and Linen variables come from `jax.eval_shape(module.init, ...)`. A training count
(`training=True`) traces `jax.value_and_grad` of a scalar loss (the sum of every output leaf) with respect to
argument `argnums` (the parameters, for the module helpers): equations jax derived by transposition (the name
stack's `transpose` transform) are the backward phase, the rest the forward. While it traces, named library
composites (`jax.nn.gelu`, `nnx.LayerNorm`, ...) are marked so the walk prices them by rule (`composites.hooked`).

The memory metrics come from the same trace (`memory.py`, `graph_memory.py`): `bytes` per equation, unfused, and
`peak-memory` by liveness over the equations (the arguments, parameters included, alive throughout); `param-bytes`
and `buffer-bytes` from the abstract state's dtypes, attributed to layers as the parameters are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from math import prod
from typing import Any

from pytest_flopbudget._counting.graph_memory import measure_memory
from pytest_flopbudget._counting.jax.composites import hooked
from pytest_flopbudget._counting.jax.memory import BYTES_CONVENTION, aval_bytes
from pytest_flopbudget._counting.jax.names import NNX_SCOPE, LayerNamer, linen_layer, plain_layer
from pytest_flopbudget._counting.jax.symbolic import SymbolicWalker
from pytest_flopbudget._counting.jax.walk import Walker
from pytest_flopbudget._counting.symbolic import NotPolynomial
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BUFFER_BYTES, BYTES, PARAM_BYTES, PARAMS
from pytest_flopbudget._report import LayerCost, Report

#: What a JAX count adds to a report's conventions (docs/jax.md).
JAX_CONVENTIONS = {
    "jax_control_flow": (
        "scan bodies count length times; while loops with a static trip count trip times, else skipped; cond "
        "counts its costliest branch; remat and custom_jvp/custom_vjp count the body that runs, once per call"
    ),
    "jax_composites": (
        "named library composites (jax.nn activations, softmax, dot_product_attention; jnp.mean, jnp.arange; Flax "
        "norm and Embed layers) are priced by the shared rule of the op they name, forward and backward, not by "
        "their primitives"
    ),
    "jax_pallas": (
        "a Pallas kernel (pallas_call) counts the FLOPs its CostEstimate declares (flops + transcendentals, no "
        "MACs), listed in estimated; one without a cost_estimate is skipped"
    ),
}


def _import_jax() -> Any:
    try:
        import jax
    except ImportError:
        raise CountingError("counting a JAX function needs jax: pip install 'pytest-flopbudget[jax]'") from None
    return jax


#: While `captured_traces` is entered, each count appends the jaxpr it walked and its layer namer here, so that
#: `flopbudget explain --vs xla` prices the very equations this count priced, by XLA's rules, in the same layers.
_CAPTURED: ContextVar[list[tuple[Any, LayerNamer]] | None] = ContextVar("flopbudget_jax_traces", default=None)


@contextlib.contextmanager
def captured_traces() -> Iterator[list[tuple[Any, LayerNamer]]]:
    """The jaxprs (and their layer namers) of the counts made inside the block, in order."""
    found: list[tuple[Any, LayerNamer]] = []
    token = _CAPTURED.set(found)
    try:
        yield found
    finally:
        _CAPTURED.reset(token)


def abstract(jax: Any, tree: Any) -> Any:
    """Every array leaf of `tree` as a `ShapeDtypeStruct` (shape and dtype only); other leaves stay."""

    def leaf(value: Any) -> Any:
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return jax.ShapeDtypeStruct(tuple(value.shape), value.dtype)
        return value

    return jax.tree_util.tree_map(leaf, tree)


def count_jax(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    training: bool = False,
    model_name: str = "",
    argnums: int = 0,
    namer: LayerNamer = plain_layer,
    params: Mapping[str, int] | None = None,
    state_args: int = 0,
    symbolic_dims: Sequence[str] = (),
    symbolic_ranges: Mapping[str, tuple[int, int]] | None = None,
    param_bytes: Mapping[str, int] | None = None,
    buffer_bytes: Mapping[str, int] | None = None,
) -> Report:
    """Count `fn(*args, **kwargs)` (arrays or `ShapeDtypeStruct`s) from its jaxpr; `params` are parameter counts by
    layer path, `param_bytes` and `buffer_bytes` their bytes and the buffers' (batch statistics) by layer (not
    measured where `params` is given without them), and the first `state_args` arguments the module's variables,
    not inputs (the module helpers fill them).

    With `symbolic_dims`, the arguments' shapes hold jax symbolic dims of those names (`jax.export.symbolic_shape`)
    and every figure of the Report is an exact polynomial in them (`counting.symbolic.Symbolic`, an `int` where
    constant); a size or formula that is no polynomial raises `NotPolynomial`, as does a function that cannot be
    traced at every size (it branches on a size). `symbolic_ranges`: the sizes each dim takes (a curve's range),
    over which the peak of live bytes compares polynomials."""
    jax = _import_jax()
    args = tuple(abstract(jax, list(args)))
    kwargs = dict(abstract(jax, dict(kwargs or {})))
    label = model_name or getattr(fn, "__name__", "") or "model"
    try:
        with hooked():  # named library composites (jax.nn.gelu, nnx.LayerNorm, ...) are priced by rule
            if training:
                traced = jax.make_jaxpr(jax.value_and_grad(_summed(jax, fn, kwargs), argnums=argnums))(*args)
            else:
                traced = jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args)
    except CountingError:
        raise
    except Exception as exc:  # a function that does not trace gives one line, not a traceback into jax
        text = " ".join(str(exc).split())[:300]
        if symbolic_dims:  # jax's first line says which comparison; the rest is its general advice
            first = str(exc).strip().split("\n")[0][:200]
            raise NotPolynomial(f"it does not trace at every size ({type(exc).__name__}: {first})") from None
        raise CountingError(f"{label}: the function could not be traced ({type(exc).__name__}: {text})") from None
    sink = _CAPTURED.get()
    if sink is not None:
        sink.append((traced, namer))
    tally = Tally()
    walker = SymbolicWalker(namer, symbolic_dims, symbolic_ranges) if symbolic_dims else Walker(namer)
    walker.walk(traced, tally)
    memory = walker.memory
    if memory.unsized is not None:  # part of the traffic has no size: no figure at all rather than a low one
        tally.forget(BYTES, memory.free_ops)
    for metric, figures in ((PARAMS, params), (PARAM_BYTES, param_bytes), (BUFFER_BYTES, buffer_bytes)):
        for path, count in (figures or {}).items():
            if count:
                tally.layers.setdefault(path, LayerCost()).add(metric, count)
    report = Report(
        **tally.report_fields(),
        training=training,
        backend="jax",
        model=label,
        inputs=[_describe(leaf) for leaf in jax.tree_util.tree_leaves(list(args[state_args:]))],
        versions=_versions(),
    )
    report.conventions.update(JAX_CONVENTIONS)
    # a module's parameter and buffer bytes are measured where its helper gives them; a plain function holds none
    held = [
        metric
        for metric, given in ((PARAM_BYTES, param_bytes), (BUFFER_BYTES, buffer_bytes))
        if given is not None or params is None
    ]
    measure_memory(report, memory.unsized, memory.recorder.peak(), bytes_convention=BYTES_CONVENTION, held=held)
    return report


def _summed(jax: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Callable[..., Any]:
    """The default loss of a training count: the sum of every floating output leaf, as the torch backend's."""

    def loss(*args: Any) -> Any:
        leaves = [leaf for leaf in jax.tree_util.tree_leaves(fn(*args, **kwargs)) if _floating(jax, leaf)]
        if not leaves:
            raise CountingError("a training count needs a floating-point output to sum into a loss")
        total = leaves[0].sum()
        for leaf in leaves[1:]:
            total = total + leaf.sum()
        return total

    return loss


def _floating(jax: Any, leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and bool(jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact))


def _describe(leaf: Any) -> dict[str, Any]:
    if hasattr(leaf, "shape"):
        shape = [d if isinstance(d, int) else str(d) for d in leaf.shape]  # a symbolic dim by its name
        return {"shape": shape, "dtype": str(getattr(leaf, "dtype", ""))}
    return {"value": repr(leaf)[:80]}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("jax", "jaxlib", "flax"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _path_text(key: Any) -> str:
    """One component of a pytree or NNX path as it reads in a dotted layer path (`layers`, `3`)."""
    for attribute in ("key", "idx", "name"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _variable_field(jax: Any, key: Any) -> bool:
    return isinstance(key, jax.tree_util.GetAttrKey) and key.name == "value"


def params_by_layer(jax: Any, tree: Any) -> dict[str, int]:
    """Elements of each parameter leaf of `tree`, summed by the layer that owns it (its path without the leaf)."""
    counts: dict[str, int] = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not hasattr(leaf, "shape"):
            continue
        # an NNX Variable's own field is the attribute `value` (a GetAttrKey); a submodule named `value` (the value
        # projection of `nnx.MultiHeadAttention`) is a dict key, and stays in the path
        parts = [_path_text(key) for key in path if not _variable_field(jax, key)]
        layer = ".".join(parts[:-1])
        counts[layer] = counts.get(layer, 0) + prod(int(d) for d in leaf.shape)
    return counts


class _Bytes:
    """An array leaf's stand-in whose one dimension is the array's bytes, so that `params_by_layer` sums bytes."""

    def __init__(self, nbytes: int) -> None:
        self.shape = (nbytes,)


def bytes_by_layer(jax: Any, tree: Any) -> dict[str, int]:
    """Bytes of each array leaf of `tree` at its dtype's size (sub-byte types packed), summed by the layer that owns
    it exactly as `params_by_layer` sums its elements. Raises `CountingError` for a leaf without a fixed size."""

    def leaf(value: Any) -> Any:
        if not hasattr(value, "shape"):
            return value
        nbytes = aval_bytes(value)
        if nbytes is None:
            raise CountingError(f"a {getattr(value, 'dtype', '')}{list(value.shape)} variable has no fixed size")
        return _Bytes(nbytes)

    return params_by_layer(jax, jax.tree_util.tree_map(leaf, tree))


def _summed_by_layer(figures: Sequence[Mapping[str, int]]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for each in figures:
        for layer, figure in each.items():
            summed[layer] = summed.get(layer, 0) + figure
    return summed


# --- Flax NNX ---------------------------------------------------------------------------------------------------


def count_nnx(
    module: Any,
    *args: Any,
    training: bool = False,
    model_name: str = "",
    symbolic_dims: Sequence[str] = (),
    symbolic_ranges: Mapping[str, tuple[int, int]] | None = None,
    **kwargs: Any,
) -> Report:
    """Count a Flax NNX module's call on `args`. `module` is an `nnx.Module` (built abstractly with
    `nnx.eval_shape(lambda: Model(...))`, so no weight is allocated) or a function that builds one.
    `symbolic_dims`: as `count_jax`'s."""
    jax = _import_jax()
    from flax import nnx

    if not isinstance(module, nnx.Module):
        module = nnx.eval_shape(module)
    graphdef, weights, rest = _split(nnx, module)
    params = params_by_layer(jax, weights)
    # buffers: every variable but the parameters and the RNG state (batch statistics, caches), as torch's buffers
    buffers = nnx.state(module, nnx.Not(nnx.Any(nnx.Param, nnx.RngState)))
    paths = _module_paths(nnx, module)

    def forward(weights: Any, rest: Any, *call_args: Any, **call_kwargs: Any) -> Any:
        # fresh Variables in this trace (a training count's gradient trace): NNX refuses to update batch statistics
        # held by Variables that an outer trace built
        weights, rest = jax.tree_util.tree_map(lambda leaf: leaf, (weights, rest))
        merged = nnx.merge(graphdef, weights, rest)
        with _scoped_calls(jax, nnx, merged, paths):
            return merged(*call_args, **call_kwargs)

    # the parameters first: a training count differentiates them alone (not the RNG keys, not batch statistics)
    return count_jax(
        forward,
        (weights, rest, *args),
        kwargs,
        training=training,
        model_name=model_name or type(module).__name__,
        params=params,
        state_args=2,
        symbolic_dims=symbolic_dims,
        symbolic_ranges=symbolic_ranges,
        param_bytes=bytes_by_layer(jax, weights),
        buffer_bytes=bytes_by_layer(jax, buffers),
    )


def _split(nnx: Any, module: Any) -> tuple[Any, Any, Any]:
    """The graph, the `nnx.Param` state and every other variable (RNG keys, batch statistics)."""
    graphdef, weights, rest = nnx.split(module, nnx.Param, ...)
    return graphdef, weights, rest


def _module_paths(nnx: Any, module: Any) -> dict[tuple[Any, ...], str]:
    """Each submodule's dotted path, keyed by its graph path (the same in every merge of the same graphdef)."""
    paths = {}
    for path, node in nnx.iter_graph(module):
        if isinstance(node, nnx.Module) and path:
            paths[tuple(path)] = ".".join(_path_text(key) for key in path)
    return paths


@contextlib.contextmanager
def _scoped_calls(jax: Any, nnx: Any, merged: Any, paths: Mapping[tuple[Any, ...], str]) -> Iterator[None]:
    """While tracing, every call of a submodule of `merged` runs under the named scope `nnx:<its path>`.

    The scope is entered by wrapping `__call__` on the module classes for the duration of the trace (a call's
    name must be in the name stack, and NNX adds none). Instances are matched by identity; an instance NNX built
    inside a transform (the layer `nnx.scan` merges from a stacked module in each step) is matched to the one
    module of its class whose parameters are its own with one more leading axis (`StackedPaths`).
    """
    modules = [(tuple(path), node) for path, node in nnx.iter_graph(merged) if isinstance(node, nnx.Module)]
    known = StackedPaths(jax, nnx, [(paths[path], node) for path, node in modules if path in paths])
    with scoped_class_calls(jax, {type(node) for _, node in modules}, known.path):
        yield


@contextlib.contextmanager
def scoped_class_calls(jax: Any, classes: Iterable[type], path_of: Callable[[Any], str | None]) -> Iterator[None]:
    """While in the block, a call of an instance of `classes` runs under the named scope `nnx:<path_of(instance)>`
    (no scope where it gives None): `__call__` is wrapped on each class of their MROs that defines one, and put
    back after. The scope marks a module's layer for the JAX namer (`names.plain_layer`), whatever scopes the
    library itself enters (Equinox's `eqx.nn.Linear` names a class)."""
    patched: list[tuple[type, Any]] = []
    for cls in classes:
        for owner in cls.__mro__:
            original = owner.__dict__.get("__call__")
            if original is None or any(owner is done for done, _ in patched):
                continue
            patched.append((owner, original))
            type.__setattr__(owner, "__call__", _scoped(jax, original, path_of))
    try:
        yield
    finally:
        for owner, original in patched:
            type.__setattr__(owner, "__call__", original)


class StackedPaths:
    """The dotted path of a module instance met while tracing: the submodule itself, or for an instance built
    inside a transform, the one module of its class whose parameter shapes are its own behind a leading (stacked)
    axis; None (no scope: the caller's layer) when none or several match.

    Once an instance built inside a transform is placed, its own submodules (built with it) are placed by their
    attribute path within it: a scanned block's `q_proj` and `o_proj` have the same class and shapes, so shapes
    alone could not tell them apart.
    """

    def __init__(self, jax: Any, nnx: Any, modules: Sequence[tuple[str, Any]]) -> None:
        self.jax, self.nnx = jax, nnx
        self.by_id: dict[int, str | None] = {id(node): path for path, node in modules}
        self.seen: list[Any] = []  # every instance keyed by its id stays alive, so no id is reused in the trace
        self.by_class: dict[type, list[tuple[str, Any]]] = {}
        for path, node in modules:
            self.by_class.setdefault(type(node), []).append((path, node))

    def path(self, instance: Any) -> str | None:
        key = id(instance)
        if key not in self.by_id:
            self.seen.append(instance)
            shapes = self._shapes(instance)
            found = [
                path
                for path, node in self.by_class.get(type(instance), [])
                if [s[1:] for s in self._shapes(node)] == shapes and all(self._shapes(node))
            ]
            self.by_id[key] = found[0] if len(found) == 1 else None
            if len(found) == 1:
                self._place_submodules(instance, found[0])
        return self.by_id[key]

    def _place_submodules(self, instance: Any, path: str) -> None:
        for sub_path, node in self.nnx.iter_graph(instance):
            if sub_path and isinstance(node, self.nnx.Module) and id(node) not in self.by_id:
                self.seen.append(node)
                self.by_id[id(node)] = ".".join([path, *(_path_text(part) for part in sub_path)])

    def _shapes(self, module: Any) -> list[tuple[int, ...]]:
        leaves = self.jax.tree_util.tree_leaves(self.nnx.state(module, self.nnx.Param))
        return [tuple(leaf.shape) for leaf in leaves if hasattr(leaf, "shape")]


def _scoped(jax: Any, original: Callable[..., Any], path_of: Callable[[Any], str | None]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = path_of(self)
        if path is None:
            return original(self, *args, **kwargs)
        with jax.named_scope(NNX_SCOPE + path):
            return original(self, *args, **kwargs)

    return call


# --- Flax Linen -------------------------------------------------------------------------------------------------


def count_linen(
    module: Any,
    *args: Any,
    training: bool = False,
    model_name: str = "",
    rng_seed: int = 0,
    symbolic_dims: Sequence[str] = (),
    symbolic_ranges: Mapping[str, tuple[int, int]] | None = None,
    **kwargs: Any,
) -> Report:
    """Count a Flax Linen module's `apply` on `args`; its variables come from `jax.eval_shape(module.init, ...)`,
    so none is allocated. Parameters are the `params` collection; other collections (batch statistics) are state.
    `symbolic_dims`: as `count_jax`'s."""
    jax = _import_jax()
    inputs = abstract(jax, list(args))
    variables = jax.eval_shape(lambda *a: module.init(jax.random.key(rng_seed), *a, **kwargs), *inputs)
    params = params_by_layer(jax, variables.get("params", {}))
    root = module.name or type(module).__name__

    weights = variables.get("params", {})
    rest = {collection: value for collection, value in variables.items() if collection != "params"}

    def forward(weights: Any, rest: Any, *call_args: Any) -> Any:
        variables = {"params": weights, **rest}
        if not rest:
            return module.apply(variables, *call_args, **kwargs)
        # batch statistics and other state update as the call runs (that arithmetic counts); the output alone is
        # the result, so a training count's loss never sums the updated statistics
        return module.apply(variables, *call_args, mutable=list(rest), **kwargs)[0]

    return count_jax(
        forward,
        (weights, rest, *inputs),
        training=training,
        model_name=model_name or type(module).__name__,
        namer=linen_layer(root),
        params=params,
        state_args=2,
        symbolic_dims=symbolic_dims,
        symbolic_ranges=symbolic_ranges,
        param_bytes=bytes_by_layer(jax, weights),
        # every collection but the parameters (batch statistics, caches), by layer within each collection
        buffer_bytes=_summed_by_layer([bytes_by_layer(jax, collection) for collection in rest.values()]),
    )
