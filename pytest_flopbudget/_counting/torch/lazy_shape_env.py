"""The fake mode's `ShapeEnv`, made only when an op needs one.

A `ShapeEnv` is what lets fake tensors have data-dependent sizes (`nonzero`, a boolean mask, `.item()`): fake mode
allocates unbacked symbols in it. Most models never run such an op, and constructing one is expensive in a fresh
process: `ShapeEnv.__init__` imports `torch.fx.experimental.validator`, which imports all of `torch._dynamo`
(about 1 s, as long as `import torch` itself). So the count starts fake mode without one and installs one on the
first op that fails without it; that op is then run again. An op that fails without a `ShapeEnv` has no effect
(fake tensors carry no data), so the retried op, and everything after it, runs exactly as it would have had the
`ShapeEnv` been there from the start. Ops that succeed without one do not look at it.
"""

from __future__ import annotations

from typing import Any


class LazyShapeEnv:
    """Owns `fake_mode.shape_env`: None until `install()` or `get()` makes it."""

    def __init__(self, fake_mode: Any) -> None:
        self._fake_mode = fake_mode

    @property
    def installed(self) -> bool:
        return self._fake_mode.shape_env is not None

    def install(self) -> bool:
        """Makes the `ShapeEnv` if there is none yet; whether this call made it (so a failed op is worth a retry)."""
        if self.installed:
            return False
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self._fake_mode.shape_env = ShapeEnv()
        return True

    def get(self) -> Any:
        self.install()
        return self._fake_mode.shape_env
