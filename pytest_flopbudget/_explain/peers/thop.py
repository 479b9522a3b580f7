"""thop's `profile` (pytorch-OpCounter): forward hooks on modules, priced by module type.

Only modules of the types in its table are counted (convolutions, linear, norms, pools, a few activations); a
module of another type counts as zero, and an op a module's own forward runs outside a hooked child (the residual
`out += identity` of a ResNet block, attention written in a block's forward) is never seen. Convolutions and
linear layers are counted in multiply-accumulates, without the bias.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerError, PeerFigure, Unit


class Thop:
    name = "thop"
    distribution = "thop"
    framework = "torch"
    unit: Unit = "macs"
    title = "thop's profile"
    hooks = True
    no_grad = True  # profile runs the forward under torch.no_grad()

    def is_installed(self) -> bool:
        return importlib.util.find_spec("thop") is not None

    def version(self) -> str:
        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        import contextlib
        import io

        from thop import profile
        from thop.profile import register_hooks

        from pytest_flopbudget._explain.peers.torch_tools import exclusive

        if kwargs:
            raise PeerError("thop calls the model with positional inputs only; give the inputs by position")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                total, _params, layers = profile(model, inputs=args, verbose=False, ret_layer_info=True)
        except Exception as exc:
            raise PeerError(f"thop failed on the model: {type(exc).__name__}: {exc}") from None
        types = {path: type(module) for path, module in model.named_modules()}
        inclusive: dict[str, dict[str, int]] = {"": {"": round(total)}}

        def walk(prefix: str, children: dict[str, Any]) -> None:
            for name, (ops, _params, grandchildren) in children.items():
                path = f"{prefix}.{name}" if prefix else name
                inclusive[path] = {"": round(ops)}
                walk(path, grandchildren)

        walk("", layers)
        figures = tuple(
            PeerFigure(path, types[path].__name__ if path in types else None, value, module=True)
            for path, ops in exclusive(inclusive).items()
            for value in ops.values()
        )
        leaves = {path for path, module in model.named_modules() if next(module.children(), None) is None}
        hooked = frozenset(path for path, kind in types.items() if kind in register_hooks)
        unsupported = {path: {types[path].__name__: 1} for path in sorted(leaves - hooked)}
        return PeerCount(
            self.name, self.version(), self.unit, figures, round(total), unsupported=unsupported, hooked=hooked
        )


PEER = Thop()
