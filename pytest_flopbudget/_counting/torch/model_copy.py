"""A private structural copy of the caller's model, made before anything of it runs.

The count runs the model's own Python `forward`, and forward is free to write to the module it runs on: caches
(`self.cache[key] = ...`), anchors (`self.anchors = ...`), flags (`self.layers_are_rescaled = True`), in-place
weight updates, `module.to(dtype)`. If the count ran the caller's module objects, every such write would land in the
caller's model, holding fake tensors or out of step with the weights. Patching writes case by case cannot be
complete, so the count never runs the caller's modules at all: it runs a copy.

The copy has new module objects (same classes, same tree, shared submodules still shared, same names), new hook
and state containers, and for every parameter and buffer the stand-in the count would use anyway (a fake tensor,
or in real execution a private clone), so it costs no weight memory in fake mode. Parameters stay `nn.Parameter`
(`isinstance` checks in user code keep working), tied weights stay tied, a module reachable under two names is one
object in the copy too. Other attributes are copied too: immutable values are shared, tensors get their stand-in,
plain containers are rebuilt, and any other object goes through `copy.deepcopy` with the same memo, so an object
that refers to a module or a weight refers to its copy. An object that cannot be deep-copied (a Python module, a
lock, an open file) is shared as it is and listed in `shared`: it is the one way state can still leave the count.

Why not `copy.deepcopy(model)` alone: it walks every attribute generically and costs about half a ResNet-50 count;
this copy walks only what can hold state and adds a few percent.

The inputs get the same guarantee the same way (`copy_inputs`): forward is as free to write to what it is passed
(a Hugging Face cache grows by the new token's keys and values, a tensor is updated in place) as to its module, so
the count calls the copy with a private copy of the inputs too, never with the caller's objects.
"""

from __future__ import annotations

import contextlib
import copy
import types
from collections import OrderedDict, deque
from typing import Any, Callable

import torch

#: Values that cannot hold state of the model: shared between the model and its copy.
_ATOMS = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    range,
    type,
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.MethodWrapperType,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.Size,
    torch.finfo,
    torch.iinfo,
    types.ModuleType,
)

_ATOM_TYPES = frozenset(_ATOMS)


class ModelCopy:
    """Copies one model; `stand_in_parameter` and `stand_in_tensor` decide what each tensor becomes."""

    def __init__(
        self,
        stand_in_parameter: Callable[[torch.nn.Parameter], Any],
        stand_in_tensor: Callable[[torch.Tensor], Any],
    ) -> None:
        self._stand_in_parameter = stand_in_parameter
        self._stand_in_tensor = stand_in_tensor
        self.memo: dict[int, Any] = {}
        self._keep_alive: list[Any] = []
        self.shared: list[str] = []

    def copy(self, model: torch.nn.Module) -> torch.nn.Module:
        originals: list[tuple[str, torch.nn.Module]] = list(model.named_modules())  # each once, first path
        # Shells first: an attribute anywhere that refers to a module then finds its copy in the memo.
        for _, module in originals:
            self.memo[id(module)] = type(module).__new__(type(module))
        for path, module in originals:
            self._fill(module, self.memo[id(module)], path)
        copied: torch.nn.Module = self.memo[id(model)]
        return copied

    def copy_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A private copy of forward's arguments, made after the model's (the same memo: an input that is a module
        or weight of the model, or one tensor passed twice, maps to the one copy).

        Every tensor reachable from the inputs, at any depth (a `DynamicCache`'s per-layer keys, a dataclass field,
        an object's attribute, a namedtuple), gets its stand-in first, so the deep copy of the objects that hold them
        never copies a real tensor and the copy holds nothing of the caller's. Containers and objects are new;
        an object that cannot be deep-copied is shared and listed in `shared` under `args[i]` / `kwargs['name']`.
        """
        self._seed_reachable((args, kwargs))
        copied_args = tuple(self._value(value, f"args[{index}]") for index, value in enumerate(args))
        copied_kwargs = {name: self._value(value, f"kwargs[{name!r}]") for name, value in kwargs.items()}
        return copied_args, copied_kwargs

    def _fill(self, module: torch.nn.Module, shell: torch.nn.Module, path: str) -> None:
        state: dict[str, Any] = {}
        for key, value in module.__dict__.items():
            if key == "_parameters":
                state[key] = {name: self._tensor(p) for name, p in value.items()}
            elif key == "_buffers":
                state[key] = {name: self._tensor(b) for name, b in value.items()}
            elif key == "_modules":
                state[key] = {name: (self.memo[id(m)] if m is not None else None) for name, m in value.items()}
            else:
                state[key] = self._value(value, f"{path}.{key}" if path else key)
        shell.__dict__.update(state)

    def _tensor(self, value: Any) -> Any:
        if value is None:
            return None
        found = self.memo.get(id(value))
        if found is None:
            if isinstance(value, torch.nn.Parameter):
                found = self._stand_in_parameter(value)
            else:
                found = self._stand_in_tensor(value)
            self.memo[id(value)] = found
            self._keep_alive.append(value)  # ids stay unique while the memo lives
        return found

    def _value(self, value: Any, where: str) -> Any:
        kind = type(value)
        if kind in _ATOM_TYPES or isinstance(value, _ATOMS):  # the exact-type lookup answers most attributes
            return value
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        found = self.memo.get(id(value))
        if found is not None:
            return found
        if kind in (dict, OrderedDict):
            out: dict[Any, Any] = kind()
            self.memo[id(value)] = out
            self._keep_alive.append(value)
            for key, item in value.items():
                out[key] = self._value(item, f"{where}[{key!r}]")
            return out
        if kind is list:
            out_list: list[Any] = []
            self.memo[id(value)] = out_list
            self._keep_alive.append(value)
            out_list.extend(self._value(item, f"{where}[{i}]") for i, item in enumerate(value))
            return out_list
        if kind is tuple:
            return tuple(self._value(item, f"{where}[{i}]") for i, item in enumerate(value))
        if isinstance(value, tuple) and isinstance(getattr(kind, "_fields", None), tuple) and hasattr(kind, "_make"):
            return kind._make(self._value(item, f"{where}.{name}") for name, item in zip(kind._fields, value))
        if kind is set:
            return {self._value(item, where) for item in value}
        if isinstance(value, types.MethodType):
            return types.MethodType(value.__func__, self._value(value.__self__, where))
        if isinstance(value, types.FunctionType):
            return self._function(value, where)
        return self._deepcopy(value, where)

    def _function(self, function: types.FunctionType, where: str) -> types.FunctionType:
        """A function stored on a module (a lambda forward, a hook) that closes over a module or a tensor of the
        model gets a twin whose closure holds their copies; any other function is shared as it is."""
        cells = function.__closure__ or ()
        if not any(self._holds_model_state(cell) for cell in cells):
            return function
        closure = tuple(
            types.CellType(self._value(cell.cell_contents, where)) if self._holds_model_state(cell) else cell
            for cell in cells
        )
        twin = types.FunctionType(
            function.__code__, function.__globals__, function.__name__, function.__defaults__, closure
        )
        twin.__kwdefaults__ = function.__kwdefaults__
        twin.__dict__.update(function.__dict__)
        self.memo[id(function)] = twin
        self._keep_alive.append(function)
        return twin

    def _holds_model_state(self, cell: Any) -> bool:
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            return False
        return isinstance(contents, (torch.nn.Module, torch.Tensor)) or id(contents) in self.memo

    def _deepcopy(self, value: Any, where: str) -> Any:
        # Tensors inside other objects are stand-ins too: deepcopy finds them in the memo.
        self._seed_tensors(value)
        try:
            return copy.deepcopy(value, self.memo)
        except Exception:
            self.shared.append(f"{where} ({type(value).__name__})")
            self.memo[id(value)] = value
            return value

    def _seed_reachable(self, root: Any) -> None:
        """Stand-ins for every tensor reachable from `root` through containers, attributes (`__dict__` and
        `__slots__`) and closures, at any depth: the deep copy that follows then finds each in the memo."""
        seen: set[int] = set()
        stack = [root]
        while stack:
            value = stack.pop()
            if type(value) in _ATOM_TYPES or isinstance(value, _ATOMS) or id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, torch.Tensor):
                self._tensor(value)
                continue
            if id(value) in self.memo:  # a module of the model, or an object copied already
                continue
            stack.extend(_references(value))

    def _seed_tensors(self, value: Any, depth: int = 0) -> None:
        """Stand-ins for tensors one or two object levels down (`obj.anchors`, `obj.cache[k]`) before deepcopy
        reaches them, so that no real tensor is copied for real."""
        if depth > 2:
            return
        attrs = getattr(value, "__dict__", None)
        items = attrs.values() if isinstance(attrs, dict) else ()
        for item in items:
            if isinstance(item, torch.Tensor):
                self._tensor(item)
            elif isinstance(item, (list, tuple)):
                for element in item:
                    if isinstance(element, torch.Tensor):
                        self._tensor(element)
            elif isinstance(item, dict):
                for element in item.values():
                    if isinstance(element, torch.Tensor):
                        self._tensor(element)
            elif not isinstance(item, _ATOMS) and hasattr(item, "__dict__") and not isinstance(item, torch.nn.Module):
                self._seed_tensors(item, depth + 1)


def _references(value: Any) -> list[Any]:
    """What `value` holds: items of containers, attributes in `__dict__` and `__slots__`, a function's closure and
    defaults, a bound method's object."""
    found: list[Any] = []
    if isinstance(value, dict):
        found.extend(value.keys())
        found.extend(value.values())
    elif isinstance(value, (list, tuple, set, frozenset, deque)):
        found.extend(value)
    elif isinstance(value, types.FunctionType):
        cells = []
        for cell in value.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                cells.append(cell.cell_contents)
        return [*cells, *(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
    elif isinstance(value, types.MethodType):
        return [value.__self__, value.__func__]
    try:
        attrs = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        attrs = None
    if isinstance(attrs, dict):
        found.extend(attrs.values())
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__"):
                with contextlib.suppress(AttributeError, TypeError):  # an unset slot
                    found.append(object.__getattribute__(value, slot))
    return found
