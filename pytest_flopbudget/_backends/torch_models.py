"""The PyTorch backend: a `package.module:factory` target is imported and called, and counted on fake tensors.

This is where the user's code runs, so every failure is caught and rephrased as one line naming the pyproject
key to fix (`pyproject.toml:5: tool.flopbudget.models.x.target: cannot import 'pkg.models': ...`). torch is
imported only inside the functions, and this backend's only when a PyTorch target is loaded or counted, so an
ONNX-only project never loads it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

from pytest_flopbudget._backends.protocol import CountOptions, Loaded
from pytest_flopbudget._backends.protocol import problem as _problem
from pytest_flopbudget._backends.references import Reference, import_object, inputs_from_reference
from pytest_flopbudget._config.pyproject import DEFAULT_DTYPE, InputSpec, ModelEntry, elements_problem, is_reference
from pytest_flopbudget._config.target_kinds import OPTIONS
from pytest_flopbudget._counting.registry import FormulaRegistry
from pytest_flopbudget._counting.user_formulas import torch_formula_key
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Report


class TorchModels:
    """`package.module:factory` targets and `torch.nn.Module` objects. Inference models are loaded and counted in
    eval() under no_grad, as they would be served; training ones as they are."""

    name = "torch"
    framework = "PyTorch"
    grammar = '"package.module:factory" (returning a torch.nn.Module, or the module itself)'
    #: Last: it takes any object that is not a builtin value.
    priority = 0
    files = False
    suffixes: tuple[str, ...] = ()
    directory_marker = ""
    honours = frozenset(OPTIONS)
    by_object = False

    def accepts(self, target: str) -> bool:
        return is_reference(target)

    def accepts_model(self, model: object) -> bool:
        """Any object but a builtin value: torch is not imported to look, and `count_torch` names what is not a
        module."""
        return not (type(model).__module__.split(".")[0] in ("builtins",) or isinstance(model, (str, bytes)))

    def accepts_call(self, model: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return self.accepts_model(model)

    def load(self, entry: ModelEntry, root: Path) -> Loaded:
        return self.load_object(entry, root, Reference(entry, root))

    def load_object(self, entry: ModelEntry, root: Path, reference: Any) -> Loaded:
        model = load_model(entry, root, reference)
        with contextlib.nullcontext() if entry.training else _inference(model):
            args, kwargs = build_inputs(entry, root, model)
        return Loaded(entry, model, args, kwargs, _decode_inputs(entry, root))

    def reload(self, loaded: Loaded, entry: ModelEntry, root: Path) -> Loaded:
        with contextlib.nullcontext() if entry.training else _inference(loaded.model):
            args, kwargs = build_inputs(entry, root, loaded.model)
        return Loaded(entry, loaded.model, args, kwargs, _decode_inputs(entry, root))

    def count(self, loaded: Loaded) -> Report:
        entry = loaded.entry
        options = CountOptions(training=entry.training, execution=entry.execution, method=entry.method)
        with contextlib.nullcontext() if entry.training else _inference(loaded.model):
            if entry.generate:
                return self.count_generation(loaded, entry)
            return self.count_model(loaded.model, loaded.args, dict(loaded.kwargs), options)

    def count_generation(self, loaded: Loaded, entry: ModelEntry) -> Report:
        """`generate = N`: Hugging Face's own greedy generate, or the decode-step protocol (`decode-inputs`)."""
        from pytest_flopbudget._counting.torch.backend import count_torch
        from pytest_flopbudget._counting.torch.generation import Generation

        generation = Generation(entry.generate, entry.method, loaded.decode_inputs)
        return count_torch(
            loaded.model, loaded.args, dict(loaded.kwargs), execution=entry.execution, generation=generation
        )

    def count_generated(
        self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions
    ) -> Report:
        """The public `count(model, ids, generate=N)`: the whole generation under no_grad, with its phases."""
        import torch

        from pytest_flopbudget._counting.torch.backend import count_torch
        from pytest_flopbudget._counting.torch.generation import Generation

        generation = Generation(options.generate, options.method, options.decode_inputs)
        with torch.no_grad():
            return count_torch(model, args, kwargs, execution=options.execution, generation=generation)

    def count_model(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: CountOptions) -> Report:
        from pytest_flopbudget._counting.torch.backend import count_torch

        if options.inputs is not None:
            kwargs["inputs"] = options.inputs
        return count_torch(
            model,
            args,
            kwargs,
            training=options.training,
            execution=options.execution,
            loss_fn=options.loss_fn,
            method=options.method,
        )

    def input_names(self, path: str) -> list[str]:
        return []

    def formula_table(self) -> FormulaRegistry[Any]:
        from pytest_flopbudget._counting.torch.ops import TORCH_OPS

        return TORCH_OPS

    def formula_key(self, op: object) -> tuple[Hashable, str]:
        return torch_formula_key(op)


def _decode_inputs(entry: ModelEntry, root: Path) -> Any:
    """The `decode-inputs` function of a generation entry (None without one)."""
    if entry.decode_inputs is None:
        return None
    function = import_object(entry.decode_inputs, root, entry.source_of("decode-inputs"))
    if not callable(function):
        raise _problem(entry.source_of("decode-inputs"), f"{entry.decode_inputs} is not a function")
    return function


def load_model(entry: ModelEntry, root: Path, reference: Reference | None = None) -> Any:
    """The nn.Module of a PyTorch target (calling a factory, once: `reference` may hold its result already).

    An object that holds its network in `.model` (Ultralytics' `YOLO`, Lightning-style wrappers) is unwrapped to
    it: that module is what runs. A `method` other than forward must be a method of the module.
    """
    source = entry.source_of("target")
    reference = reference or Reference(entry, root)
    obj = reference.imported()
    model = held_module(obj)
    if model is None:
        if not callable(obj):
            raise _problem(source, f"{entry.target} is {_kind(obj)}, not {_MODULE_OR_WRAPPER} or a factory")
        returned = reference.returned()
        model = held_module(returned)
        if model is None:
            raise _problem(source, f"{entry.target}() returned {_kind(returned)}, not {_MODULE_OR_WRAPPER}")
    _check_method(entry, model)
    return model


_MODULE_OR_WRAPPER = "a torch.nn.Module (or an object whose .model is one, as Ultralytics' YOLO)"


def held_module(obj: Any) -> Any:
    """`obj` if it is a torch.nn.Module, its `.model` if that is one (and `obj` is not a class), else None."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, type):
        return None
    try:
        inner = getattr(obj, "model", None)
    except Exception:  # a property of user code that raises
        return None
    return inner if isinstance(inner, torch.nn.Module) else None


def _check_method(entry: ModelEntry, model: Any) -> None:
    from pytest_flopbudget._counting.torch.backend import check_method

    try:
        check_method(model, entry.method)
    except CountingError as exc:
        raise _problem(entry.source_of("method"), str(exc)) from None


def _kind(obj: Any) -> str:
    kind = type(obj).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def build_inputs(entry: ModelEntry, root: Path, model: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword example inputs for a PyTorch target.

    Generated inputs are meta tensors under fake execution (no memory, whatever the batch size) and zeros
    under real execution: FLOPs depend on shapes, not values. Integer and boolean ones (token ids, masks) are
    real zeros under fake execution too, so that fake mode knows what a model derives from their values. With
    the `model` at hand, shapes given without a dtype get the one the model wants (see `_typed_specs`).
    """
    spec = entry.inputs
    source = entry.source_of("inputs")
    if spec is None:
        return (), {}
    if isinstance(spec, str):
        return inputs_from_reference(spec, root, source)
    device = "meta" if entry.execution == "fake" else "cpu"
    for each in spec if isinstance(spec, list) else spec.values():  # sized by dims at a point: checked here
        too_many = elements_problem(each.shape)
        if too_many is not None:
            raise _problem(source, f"an input cannot be made: {too_many}")
    positional, named = _typed_specs(entry, model) if model is not None else _as_given(spec)
    return (
        tuple(_tensor(s, device) for s in positional),
        {name: _tensor(s, device) for name, s in named.items()},
    )


def _as_given(spec: list[InputSpec] | dict[str, InputSpec]) -> tuple[list[InputSpec], dict[str, InputSpec]]:
    return ([], dict(spec)) if isinstance(spec, dict) else (list(spec), {})


def _typed_specs(entry: ModelEntry, model: Any) -> tuple[list[InputSpec], dict[str, InputSpec]]:
    """The specs with every missing dtype decided; a given dtype always wins.

    A Hugging Face model (one with `main_input_name`) counted through forward takes positional shapes by keyword:
    the first is its main input, the others its forward's next parameters; `*_ids` and `*_mask` arguments are
    int64, others the model's float dtype. For any other model, an input whose first reader is an embedding
    lookup is int64 token ids, and the rest float32.
    """
    from pytest_flopbudget._counting.torch import input_roles as roles

    assert entry.inputs is not None and not isinstance(entry.inputs, str)
    positional, named = _as_given(entry.inputs)
    main = roles.main_input_name(model) if entry.method == "forward" else None
    if main is not None:
        names = roles.argument_names(model, main)
        if len(positional) > len(names):
            raise _problem(
                entry.source_of("inputs"),
                f"{len(positional)} shapes for {type(model).__name__}, whose forward takes {len(names)} arguments; "
                f"name them, e.g. {{ {main} = [1, 16] }}",
            )
        named = {**dict(zip(names, positional)), **named}
        positional = []
        floating = roles.float_dtype_name(model) or DEFAULT_DTYPE
        return [], {
            name: s if s.dtype else InputSpec(s.shape, "int64" if roles.integer_argument(name) else floating)
            for name, s in named.items()
        }
    candidates: set[Any] = {i for i, s in enumerate(positional) if s.dtype is None}
    candidates |= {name for name, s in named.items() if s.dtype is None}
    ids = roles.token_id_inputs(
        model,
        tuple(_tensor(s, "meta") for s in positional),
        {name: _tensor(s, "meta") for name, s in named.items()},
        candidates,
        entry.method,
    )
    return (
        [InputSpec(s.shape, s.dtype or ("int64" if i in ids else DEFAULT_DTYPE)) for i, s in enumerate(positional)],
        {name: InputSpec(s.shape, s.dtype or ("int64" if name in ids else DEFAULT_DTYPE)) for name, s in named.items()},
    )


@contextlib.contextmanager
def _inference(model: Any) -> Iterator[None]:
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _tensor(spec: InputSpec, device: str) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype or DEFAULT_DTYPE)
    if device == "meta" and not (dtype.is_floating_point or dtype.is_complex) and _small(spec.shape):
        # Token ids and masks are real zeros even under fake execution: fake mode then knows the values a model
        # derives from them (lengths, masks; counting/torch/known_inputs.py), as a real forward would see them.
        device = "cpu"
    return torch.zeros(spec.shape, dtype=dtype, device=device)


def _small(shape: Any) -> bool:
    from pytest_flopbudget._counting.torch.known_inputs import INPUT_LIMIT

    return math.prod(shape) <= INPUT_LIMIT
