"""Named library composites: a call of `jax.nn.gelu`, `jnp.mean` or `nnx.LayerNorm` priced by what it means.

JAX writes a named operation as several primitives (`jax.nn.silu` is `logistic` then `mul`; `jnp.mean` is
`reduce_sum` then `div`; `nnx.LayerNorm` a dozen), where the PyTorch engine prices one op by the shared rule
(`formulas.py`: an activation 1 per element, softmax 5, a mean 1 per input element, a norm per the norm rules). So
that the same architecture counts the same in both, each call of a composite listed in `COMPOSITES` is priced by
its formula in the JAX table (`ops.py`, under the composite's name: `"jax.nn.gelu"`, and its backward under
`"jax.nn.gelu_backward"`), and the primitives it is made of are not counted. Math a user writes by hand
(`x * jax.nn.sigmoid(x)`) is not a composite: its primitives count.

A composite is found in the jaxpr one of two ways, whichever its library allows:

- a **jitted** function (`jax.nn.silu`, `jax.nn.log_softmax`, ...) is one `jit` equation whose body jax traced
  from that function (`debug_info.func_src_info`, which names the function's file and line): the walk prices the
  equation and does not enter its body. Its backward is the same jitted function transposed (the `transpose`
  transform in the name stack), priced by the backward formula.
- a **plain function or a module's `__call__`** (`jax.nn.gelu`, `jnp.mean`, `nnx.LayerNorm.__call__`, ...) leaves
  no trace of its own, so while a count traces (`hooked`), the function object itself calls through a hook: its
  code is swapped for a trampoline, so every reference to it (`jax.nn.gelu`, `nnx.gelu`, `from jax.nn import
  gelu`, one stored on an object) goes through the hook, and restored afterwards. The hook runs the original under
  the named scope `ABSORBED_SCOPE` (the walk skips every equation under it, the backward ones too) and passes its
  results through `flopbudget_composite`, an identity primitive whose params name the composite, the shapes of its
  array arguments and what its formula reads (`info`). That equation is priced by the formula. Its derivative
  (the JVP's tangent, transposed in the backward) is the same primitive with `derivative=True`, priced by the
  backward formula, so a training count charges the composite's backward by the rule, as PyTorch's
  `aten.gelu_backward`. The array arguments enter through the same primitive (`side=INPUT`, free), so the gradient
  of an argument also used elsewhere is summed outside the composite, as PyTorch's `aten.add`. A composite called
  inside another (softmax inside `jax.nn.dot_product_attention`, a mean inside a LayerNorm) is part of the outer
  one.

The marker primitive is an identity: it lowers to nothing, so a function traced during a count still runs. The
count traces under XLA metadata of its own (`_isolated`), which jax's trace caches key on: a `jax.jit` function
traced before the count (without the hooks) is traced again, and the count's traces are not handed to later
callers, so a count never depends on what ran before it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_flopbudget._counting.jax.names import ABSORBED_SCOPE
from pytest_flopbudget._counting.jax.ops import ACTIVATIONS, BACKWARD, COMPOSITE_PRIMITIVE, EqnContext

#: The sides of a hooked composite's marker: its array arguments enter through one (`side=INPUT`, free), its
#: results leave through the other (`side=OUTPUT`), which is priced.
INPUT, OUTPUT = "input", "output"

#: Reads a call's static facts (`info`) from its arguments bound by name (`self` included, for a module).
Info = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def _no_info(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    return {}


def _norm_info(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    module = arguments["self"]
    return {"weight": bool(getattr(module, "use_scale", True)), "bias": bool(getattr(module, "use_bias", True))}


def _batch_norm_info(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """Batch statistics are computed unless the running averages are used (the call's argument wins over the
    module's, as NNX's `first_from` and Linen's `merge_param` decide)."""
    running = arguments.get("use_running_average")
    if running is None:
        running = getattr(arguments["self"], "use_running_average", False)
    return {**_norm_info(arguments), "stats": not running}


def _attention_info(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"masked": arguments.get("bias") is not None or arguments.get("mask") is not None}


@dataclass(frozen=True)
class Composite:
    """One named composite: its op name, where its function (or module class) lives, the arguments whose shapes
    its formula reads (`arrays`, in order) and the static facts it reads (`info`)."""

    name: str
    module: str
    attribute: str
    arrays: tuple[str, ...] = ("x",)
    info: Info = field(default=_no_info)
    method: str = ""  # "__call__" for a module class

    def target(self, load: bool = False) -> Any:
        """The function object (for a module class, its `__call__` as written, under any wrapper), or None when
        its library is not imported (`load`: import it), not installed, or no longer has it. A count hooks only
        the libraries already imported: a model that uses flax has imported it, and one that does not never
        pays for importing it."""
        try:
            library = importlib.import_module(self.module) if load else sys.modules.get(self.module)
            owner = getattr(library, self.attribute, None)
        except ImportError:
            return None
        if owner is None:
            return None
        if self.method:
            owner = inspect.unwrap(owner.__dict__.get(self.method)) if self.method in owner.__dict__ else None
        return owner


def _activations(*names: str) -> list[Composite]:
    return [Composite(f"jax.nn.{name}", "jax.nn", name) for name in names]


def _module(library: str, cls: str, arrays: tuple[str, ...], info: Info = _no_info) -> Composite:
    return Composite(f"flax.{library}.{cls}", f"flax.{library}", cls, arrays, info, method="__call__")


#: Every composite priced by rule, with its formula in `ops.py` under `name` (and `name + BACKWARD`).
COMPOSITES: tuple[Composite, ...] = (
    *_activations(*ACTIVATIONS, "softmax", "log_softmax"),
    Composite(
        "jax.nn.dot_product_attention", "jax.nn", "dot_product_attention", ("query", "key", "value"), _attention_info
    ),
    Composite("jax.numpy.mean", "jax.numpy", "mean", ("a",)),
    Composite("jax.numpy.arange", "jax.numpy", "arange", ()),
    *(
        entry
        for library in ("nnx", "linen")
        for entry in (
            _module(library, "LayerNorm", ("x",), _norm_info),
            _module(library, "RMSNorm", ("x",), _norm_info),
            _module(library, "GroupNorm", ("x",), _norm_info),
            _module(library, "BatchNorm", ("x",), _batch_norm_info),
            _module(library, "Embed", ("inputs",)),
        )
    ),
)


# --- the jaxpr side: which equation is a composite, and what its formula sees ------------------------------------


def composite_call(eqn: Any, backward: bool) -> tuple[str, EqnContext] | None:
    """The op name and formula context of `eqn` when it is a composite's call (a `flopbudget_composite` marker, or
    the `jit` equation of a jitted composite), else None. `backward`: the equation is in the backward phase."""
    name = eqn.primitive.name
    if name == COMPOSITE_PRIMITIVE:
        params = eqn.params
        if params["side"] != OUTPUT:
            return None  # the arguments' side: free (`ops.py`)
        op = params["composite"] + (BACKWARD if params["derivative"] else "")
        return op, EqnContext(op, params["in_shapes"], _shapes(eqn.invars), dict(params["info"]))
    if name not in ("pjit", "jit"):
        return None
    source = getattr(
        getattr(getattr(eqn.params.get("jaxpr"), "jaxpr", None), "debug_info", None), "func_src_info", None
    )
    composite = _jitted().get(source) if isinstance(source, str) else None
    if composite is None:
        return None
    op = composite + (BACKWARD if backward else "")
    return op, EqnContext(op, _shapes(eqn.invars), _shapes(eqn.outvars))


def _shapes(variables: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    return tuple(_shape_of(v.aval) for v in variables)


_JITTED: dict[str, str] | None = None


def _jitted() -> dict[str, str]:
    """`func_src_info` (jax's "name at file:line" of the traced function) -> composite name, for the composites
    that are jitted functions in this jax (jax's own functions: their modules load with jax)."""
    global _JITTED
    if _JITTED is None:
        found = {}
        for composite in COMPOSITES:
            target = None if composite.method else composite.target(load=True)
            if target is not None and _is_jitted(target):
                found[_source_info(inspect.unwrap(target))] = composite.name
        _JITTED = found
    return _JITTED


def _is_jitted(target: Any) -> bool:
    return callable(getattr(target, "lower", None)) and hasattr(target, "__wrapped__")


def _source_info(function: Any) -> str:
    """What jax records as a traced function's `func_src_info` (`api_util.fun_sourceinfo`)."""
    code = function.__code__
    return f"{function.__name__} at {code.co_filename}:{code.co_firstlineno}"


# --- the tracing side: hooks on plain functions and module methods -----------------------------------------------


class _State(threading.local):
    #: > 0 while this thread traces a count; > 0 depth while inside a composite (its inner composites are its own)
    counting: int = 0
    depth: int = 0


_STATE = _State()
_LOCK = threading.Lock()
#: How many counts (in any thread) are tracing now: the hooks are installed while it is above 0.
_USERS = 0
#: composite name -> its hook, built the first time a count finds its library imported
_HOOKS: dict[str, _Hook] = {}


def _trampoline(*args: Any, __flopbudget_call__: Callable[..., Any], **kwargs: Any) -> Any:
    """The code a hooked function runs while a count traces: the hook, which the function's keyword-only default
    supplies (so the code needs no closure and no global of the library's module)."""
    return __flopbudget_call__(*args, **kwargs)


class _Hook:
    """One composite's function object, its code swapped for `_trampoline` while installed."""

    def __init__(self, composite: Composite, function: Any) -> None:
        self.composite = composite
        self.function = function
        self.code = function.__code__
        self.defaults = function.__defaults__
        self.kwdefaults = function.__kwdefaults__
        # the original, as a separate function object the hook calls
        self.original = type(function)(
            self.code, function.__globals__, function.__name__, self.defaults, function.__closure__
        )
        self.original.__kwdefaults__ = self.kwdefaults
        self.signature = inspect.signature(self.original)

    def install(self) -> None:
        self.function.__code__ = _trampoline.__code__
        self.function.__defaults__ = None
        self.function.__kwdefaults__ = {"__flopbudget_call__": self.call}

    def remove(self) -> None:
        self.function.__code__ = self.code
        self.function.__defaults__ = self.defaults
        self.function.__kwdefaults__ = self.kwdefaults

    def call(self, *args: Any, **kwargs: Any) -> Any:
        if not _STATE.counting or _STATE.depth:
            return self.original(*args, **kwargs)
        import jax

        try:
            arguments = self.signature.bind(*args, **kwargs)
        except TypeError:  # the original says what is wrong with the call, in its own words
            return self.original(*args, **kwargs)
        arguments.apply_defaults()
        composite = self.composite
        in_shapes = tuple(_shape_of(arguments.arguments.get(name)) for name in composite.arrays)
        info = tuple(sorted(composite.info(arguments.arguments).items()))
        # the arguments enter through the marker too: the gradient of an argument used elsewhere as well is summed
        # at that boundary, outside the composite (PyTorch's `aten.add`), not inside it
        if composite.method:  # a layer's call: its arguments after the module (whose weights it reads itself)
            inputs, kwargs = _marked(jax, (args[1:], kwargs), composite.name, side=INPUT)
            args = (args[0], *inputs)
        else:
            args, kwargs = _marked(jax, (args, kwargs), composite.name, side=INPUT)
        _STATE.depth += 1
        try:
            with jax.named_scope(ABSORBED_SCOPE):
                result = self.original(*args, **kwargs)
        finally:
            _STATE.depth -= 1
        return _marked(jax, result, composite.name, in_shapes, info)


def _shape_of(value: Any) -> tuple[int, ...]:
    """A shape as plain ints; a dimension that is not a constant (a symbolic one) stays as jax gives it."""
    return tuple(_dim(d) for d in getattr(value, "shape", ()))


def _dim(size: Any) -> Any:
    try:
        return int(size)
    except Exception:  # a symbolic dimension: its formula computes with it as it is
        return size


def _marked(jax: Any, tree: Any, name: str, in_shapes: Any = (), info: Any = (), side: str = OUTPUT) -> Any:
    """`tree` with its traced arrays passed through the composite's marker (arrays computed eagerly, outside the
    trace, are not in the jaxpr and stay as they are)."""
    leaves, structure = jax.tree_util.tree_flatten(tree)
    traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.core.Tracer)]
    if not traced:
        return tree
    marked = _primitive().bind(
        *(leaves[i] for i in traced), composite=name, in_shapes=in_shapes, info=info, side=side, derivative=False
    )
    for i, leaf in zip(traced, marked):
        leaves[i] = leaf
    return jax.tree_util.tree_unflatten(structure, leaves)


@contextlib.contextmanager
def hooked() -> Iterator[None]:
    """While a count traces: every hookable composite calls through its hook (installed by the first count that
    enters, removed by the last that leaves; other threads calling a hooked function get the original)."""
    global _USERS
    with _LOCK:
        if _USERS == 0:
            for hook in _hooks():
                hook.install()
        _USERS += 1
    _STATE.counting += 1
    try:
        with _isolated():
            yield
    finally:
        _STATE.counting -= 1
        with _LOCK:
            _USERS -= 1
            if _USERS == 0:
                for hook in _hooks():
                    hook.remove()


def _isolated() -> contextlib.AbstractContextManager[Any]:
    """A trace context of its own for the count, so that `jax.jit`'s caches neither hand the count a function
    traced without the hooks (it would count the composite's primitives, or not, by what ran before) nor keep one
    traced with them for later traces outside a count: jax keys its trace caches by the XLA metadata in force,
    so the count traces under metadata of its own (`flopbudget_count`). Without that API (older jax), none."""
    try:
        from jax.experimental.xla_metadata import set_xla_metadata
    except ImportError:
        return contextlib.nullcontext()
    return set_xla_metadata(flopbudget_count="1")


def _hooks() -> list[_Hook]:
    """A hook for every composite that is a plain Python function (or method) without closure cells, each built
    once: a jitted one is found by its `jit` equation instead, and one that cannot take the trampoline counts its
    primitives (`recognised` says which is which)."""
    for composite in COMPOSITES:
        if composite.name not in _HOOKS:
            target = composite.target()
            if _hookable(target):
                _HOOKS[composite.name] = _Hook(composite, target)
    return list(_HOOKS.values())


def _hookable(target: Any) -> bool:
    return inspect.isfunction(target) and not target.__code__.co_freevars


def recognised() -> dict[str, str]:
    """How each composite is found in this jax and flax: `"jit"`, `"hook"`, or `"primitives"` (neither: it counts
    the primitives it is made of); the tests check that every composite is found."""
    found = {}
    for composite in COMPOSITES:
        target = composite.target(load=True)
        if target is not None and _is_jitted(target):
            found[composite.name] = "jit"
        elif _hookable(target):
            found[composite.name] = "hook"
        else:
            found[composite.name] = "primitives"
    return found


# --- the marker primitive -----------------------------------------------------------------------------------------

_PRIMITIVE: Any = None


def _primitive() -> Any:
    """`flopbudget_composite`, defined on first use: identity on its operands, with the rules jax needs to
    differentiate (its tangent is the same primitive with `derivative=True`, which transposes to itself), batch
    (the recorded argument shapes gain the batch axis) and lower (to its operands). jax's own
    `xla_metadata_value` primitive is an identity of the same kind."""
    global _PRIMITIVE
    if _PRIMITIVE is not None:
        return _PRIMITIVE
    from jax.extend.core import Primitive
    from jax.interpreters import ad, batching, mlir

    primitive = Primitive(COMPOSITE_PRIMITIVE)
    primitive.multiple_results = True
    primitive.def_impl(lambda *operands, **params: list(operands))
    primitive.def_abstract_eval(lambda *avals, **params: list(avals))

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        outs = primitive.bind(*primals, **params)
        if all(type(t) is ad.Zero for t in tangents):
            return outs, list(tangents)
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        return outs, primitive.bind(*tangents, **{**params, "derivative": True})

    def transpose(cotangents: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
        if all(type(ct) is ad.Zero for ct in cotangents):
            return list(cotangents)
        cotangents = [ad.instantiate_zeros(ct) for ct in cotangents]
        return list(primitive.bind(*cotangents, **{**params, "derivative": True}))

    def batch(operands: Sequence[Any], dims: Sequence[Any], *, in_shapes: Any, **params: Any) -> tuple[Any, Any]:
        size = next(x.shape[d] for x, d in zip(operands, dims) if d is not None)
        shapes = tuple((size, *shape) for shape in in_shapes)
        return primitive.bind(*operands, in_shapes=shapes, **params), list(dims)

    ad.primitive_jvps[primitive] = jvp
    ad.primitive_transposes[primitive] = transpose
    batching.primitive_batchers[primitive] = batch
    mlir.register_lowering(primitive, lambda ctx, *operands, **params: list(operands))
    _PRIMITIVE = primitive
    return primitive
