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
hook can be installed. Any other use of the stand-in (an attribute it does not have: the model calls
`torch._dynamo.mark_static_address`, a submodule that needs the package) imports the real Dynamo at once, takes the
stand-in out, and forgets every `fn` it returned, so from then on everything behaves as without this module. On
exit the stand-in is removed and every `_disable_dynamo` wrapper it answered forgets its cached answer, so a later
`torch.compile` in the same process builds the real `disable`. Only `torch._dynamo.config` (a plain settings module)
stays imported; the real package adopts it when it is imported.

The stand-in is process-wide for the duration of the count: a thread that imports Dynamo meanwhile gets the real
package too (through the same fallback), at the same cost as without it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any

_NAME = "torch._dynamo"
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

    def disable(self, fn: Any = None, recursive: bool = True, *, wrapping: bool = True, **kwargs: Any) -> Any:
        if fn is None or wrapping or kwargs or not callable(fn):
            return getattr(self._load_real(), "disable")(fn, recursive, wrapping=wrapping, **kwargs)
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
    sys.modules[_NAME] = stand_in
    try:
        yield
    finally:
        stand_in.release()
