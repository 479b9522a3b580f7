"""Counting without importing `torch._dynamo`, which would cost about as long as `import torch` itself (~1 s).

Nothing a count does compiles, yet three things import Dynamo in a fresh process (found with `python -X importtime`
and an import hook that prints the importing stack):

* `FakeTensorMode.__init__` reads `torch._dynamo.config`: importing that submodule runs the package's `__init__`,
  which imports the whole compiler.
* Every `TorchDispatchMode.__torch_dispatch__` (fake mode's and ours) and every Python reference that fake mode
  decomposes into (`torch._refs.add`, `cat`, `where`...) is wrapped by `torch._compile._disable_dynamo`, which on its
  first call runs `import torch._dynamo` to build `torch._dynamo.disable(fn)`, so that Dynamo will not trace it.
* `ShapeEnv()` imports `torch.fx.experimental.validator`, which imports `torch._dynamo` (see `lazy_shape_env.py`).

While a count runs, and only if Dynamo is not imported yet, `deferred_dynamo()` puts a stand-in package at
`sys.modules["torch._dynamo"]`: its `__path__` is the real package's, so real submodules such as `config` load under
it unchanged, and its `disable(fn, ..., wrapping=False)` (the call `_disable_dynamo` makes) returns `fn` itself.
That is exact, not an approximation: `disable` only stops Dynamo's frame hook, and without Dynamo imported no frame
hook can be installed. Any other use of the stand-in imports the real Dynamo at once, takes the stand-in out, and
forgets every `fn` it returned, so from then on everything behaves as without this module: an attribute it does
not have (the model calls `torch._dynamo.is_compiling()`), or a submodule other than `config` (a `ShapeEnv` made for
a data-dependent size imports `torch._dynamo.exc`); a finder at the front of `sys.meta_path` hands that import the
module the real package loaded, so no submodule is ever loaded twice. On
exit the stand-in is removed and every `_disable_dynamo` wrapper it answered forgets its cached answer, so a later
`torch.compile` in the same process builds the real `disable`. Only `torch._dynamo.config` (a plain settings module)
stays imported; the real package adopts it when it is imported.

The stand-in is process-wide for the duration of the count: a thread that imports Dynamo meanwhile gets the real
package too (through the same fallback), at the same cost as without it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any

_NAME = "torch._dynamo"
_LIGHT_SUBMODULES = frozenset({"torch._dynamo.config"})  # loaded under the stand-in: settings only
_CACHE_ATTRIBUTE = "__dynamo_disable"  # where torch._compile._disable_dynamo caches torch._dynamo.disable(fn)


class _DynamoStandIn(types.ModuleType):
    """`torch._dynamo` until something needs more than `disable(fn, wrapping=False)` and the `config` submodule."""

    def __init__(self, spec: Any) -> None:
        super().__init__(_NAME)
        self.__spec__ = spec
        self.__path__ = list(spec.submodule_search_locations)
        self.__file__ = spec.origin
        self.__package__ = _NAME
        self._answered: list[Any] = []
        for name in _LIGHT_SUBMODULES:  # loaded by an earlier count: `import` binds it to the parent only once
            if name in sys.modules:
                setattr(self, name.rpartition(".")[2], sys.modules[name])

    def disable(self, fn: Any = None, recursive: bool = True, *, wrapping: bool = True, **kwargs: Any) -> Any:
        if fn is None or wrapping or kwargs or not callable(fn):
            return self._load_real().disable(fn, recursive, wrapping=wrapping, **kwargs)
        self._answered.append(fn)
        return fn

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):  # probes (copy, pickle, inspect): not a reason to load
            raise AttributeError(name)
        return getattr(self._load_real(), name)

    def _load_real(self) -> types.ModuleType:
        self.release()
        return importlib.import_module(_NAME)

    def release(self) -> None:
        """Takes the stand-in out of `sys.modules` and `torch`, and drops the `disable` answers it gave."""
        if sys.modules.get(_NAME) is self:
            del sys.modules[_NAME]
        torch = sys.modules.get("torch")
        if torch is not None and torch.__dict__.get("_dynamo") is self:
            del torch.__dict__["_dynamo"]
        for fn in self._answered:
            if getattr(fn, "__dict__", {}).get(_CACHE_ATTRIBUTE) is fn:
                del fn.__dict__[_CACHE_ATTRIBUTE]
        self._answered.clear()


class _RealSubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """While the stand-in is in place: a submodule import other than `config` loads the real package first."""

    def __init__(self, stand_in: _DynamoStandIn) -> None:
        self._stand_in = stand_in
        self._specs: dict[str, Any] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not name.startswith(_NAME + ".") or name in _LIGHT_SUBMODULES:
            return None
        if sys.modules.get(_NAME) is not self._stand_in:
            return None
        self._stand_in._load_real()
        loaded = sys.modules.get(name)
        if loaded is None:  # not among what the package's __init__ imports: found and loaded as usual
            return None
        self._specs[name] = loaded.__spec__
        return importlib.machinery.ModuleSpec(name, self, is_package=hasattr(loaded, "__path__"))

    def create_module(self, spec: Any) -> Any:
        return sys.modules[spec.name]  # the module the real package already loaded, not a second copy

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__name__)  # the import machinery set ours: put back its own


@contextlib.contextmanager
def deferred_dynamo() -> Iterator[None]:
    """Runs the block with the stand-in in place of an unimported `torch._dynamo` (a no-op once it is imported)."""
    if _NAME in sys.modules:
        yield
        return
    spec = importlib.util.find_spec(_NAME)
    if spec is None or spec.submodule_search_locations is None:  # a torch without Dynamo: nothing to defer
        yield
        return
    stand_in = _DynamoStandIn(spec)
    finder = _RealSubmodules(stand_in)
    sys.modules[_NAME] = stand_in
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        stand_in.release()
