"""What the PyTorch peers share: module paths by object, the module whose forward is running, the ops a real
forward ran per module, and layer figures made exclusive of their children.

Every peer reports per module in its own way (fvcore and FlopCounterMode inclusive of the children, hooks on
leaves only, a global list for patched functions); these helpers bring each to this package's shape: the dotted
module path (`layer1.0.conv1`, `""` for the root) and the figure of the module's own forward, children excluded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_flopbudget._explain.peers.protocol import ModelFacts


def module_paths(model: Any) -> dict[int, str]:
    """Each module's dotted path by its id (a module reachable twice keeps its first path)."""
    paths: dict[int, str] = {}
    for path, module in model.named_modules(remove_duplicate=True):
        paths.setdefault(id(module), path)
    return paths


class ModuleStack:
    """The path of the module whose forward is running (`current`), kept by global forward hooks while entered."""

    def __init__(self, model: Any) -> None:
        self.paths = module_paths(model)
        self.stack: list[str] = []

    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    @contextlib.contextmanager
    def active(self) -> Iterator[ModuleStack]:
        from torch.nn.modules import module as torch_module

        def enter(module: Any, _args: Any) -> None:
            self.stack.append(self.paths.get(id(module), self.current()))

        def leave(module: Any, _args: Any, _output: Any) -> None:
            if self.stack:
                self.stack.pop()

        handles = [
            torch_module.register_module_forward_pre_hook(enter),
            torch_module.register_module_forward_hook(leave, always_call=True),
        ]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()


def model_facts(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ModelFacts:
    """The ops one real forward ran per layer, and the layers that hold other modules."""
    containers = frozenset(path for path, module in model.named_modules() if next(module.children(), None) is not None)
    return ModelFacts(ops_seen(model, args, kwargs), containers)


def ops_seen(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The ATen ops one real forward ran (in the caller's grad mode), per module path and call count
    (`aten._native_multi_head_attention`: a fused kernel shows as the one op it is); views and metadata ops
    included."""
    from torch.utils._python_dispatch import TorchDispatchMode

    stack = ModuleStack(model)
    seen: dict[str, dict[str, int]] = {}

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = f"aten.{func.overloadpacket.__name__}" if func.namespace == "aten" else str(func.overloadpacket)
            ops = seen.setdefault(stack.current(), {})
            ops[name] = ops.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with stack.active(), Recorder():
        model(*args, **kwargs)
    return seen


def exclusive(inclusive: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Per-module figures inclusive of the children (fvcore, FlopCounterMode) made exclusive: each module's minus
    its direct children's, op by op. Zeros are left out."""
    own: dict[str, dict[str, int]] = {}
    for path, ops in inclusive.items():
        own[path] = {op: value for op, value in ops.items() if value}
    for path, ops in inclusive.items():
        if path == "":
            continue
        parent = _parent(path, inclusive)
        if parent is None:
            continue
        for op, value in ops.items():
            own[parent][op] = own[parent].get(op, 0) - value
    return {path: {op: value for op, value in ops.items() if value} for path, ops in own.items()}


def _parent(path: str, known: Mapping[str, object]) -> str | None:
    """The nearest ancestor of `path` among `known` paths (`""`, the root, is everyone's)."""
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return "" if "" in known else None


class FrameCapture:
    """The per-function figures of DeepSpeed's flops profiler and calflops (its fork), per module.

    Both patch `torch.nn.functional` and a few tensor methods to append `(function, flops)` to the innermost
    module's frame, then sum each frame into `module.__flops__` in a forward hook. A hook registered ahead of
    theirs (`prepend`) copies the frame first, so each module's figure is also known function by function.
    """

    def __init__(self, model: Any, frames: list[Any], functions: Mapping[Any, Any]) -> None:
        self.model = model
        self.frames = frames
        self.functions = functions
        self.paths = module_paths(model)
        self.figures: dict[str, dict[str, int]] = {}

    @contextlib.contextmanager
    def active(self) -> Iterator[FrameCapture]:
        handles = [module.register_forward_hook(self._copy, prepend=True) for module in self.model.modules()]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def _copy(self, module: Any, _args: Any, _output: Any) -> None:
        if not self.frames or not hasattr(module, "__pre_hook_handle__"):
            return  # a module priced by a module hook of theirs has no frame of its own
        ops = self.figures.setdefault(self.paths.get(id(module), ""), {})
        for key, flops in self.frames[-1]:
            function = self.functions.get(key)
            name = getattr(function, "__name__", None) or str(key)
            ops[name] = ops.get(name, 0) + int(flops)
