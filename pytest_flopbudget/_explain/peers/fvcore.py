"""fvcore's `FlopCountAnalysis`: a JIT trace of one real forward, priced op by op from its handle table.

It counts one multiply-accumulate as one "flop", prices convolutions, matmuls, norms and a few pools, ignores a
list of ops it deems free (`relu`, `cat`, ...) and warns about the rest (`aten::add_`, `aten::max_pool2d`): those
it names per module, which is how a zero is told apart from an op it does not support.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerError, PeerFigure, Unit


class Fvcore:
    name = "fvcore"
    distribution = "fvcore"
    framework = "torch"
    unit: Unit = "macs"
    title = "fvcore's FlopCountAnalysis"
    hooks = False
    no_grad = False  # FlopCountAnalysis traces the forward as it is (eval mode, gradients on)

    def is_installed(self) -> bool:
        return importlib.util.find_spec("fvcore") is not None

    def version(self) -> str:
        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        import logging
        import warnings

        from pytest_flopbudget._explain.peers.torch_tools import exclusive

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # importing fvcore scripts a function: torch.jit's deprecation warning
            from fvcore.nn import FlopCountAnalysis

        if kwargs:
            raise PeerError("fvcore traces positional inputs only; give the inputs by position")
        analysis = FlopCountAnalysis(model, args)
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings("none")
        logging.getLogger("fvcore").setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the JIT tracer's deprecation and tracer warnings, not ours to show
                counts = analysis.by_module_and_operator()
            unsupported = {path: dict(analysis.unsupported_ops(path)) for path in counts}
        except Exception as exc:  # a model the JIT tracer cannot trace
            raise PeerError(f"fvcore could not trace the model: {type(exc).__name__}: {exc}") from None
        own = exclusive({path: {op: int(value) for op, value in ops.items()} for path, ops in counts.items()})
        figures = tuple(PeerFigure(path, op, value) for path, ops in own.items() for op, value in ops.items())
        return PeerCount(
            peer=self.name,
            version=self.version(),
            unit=self.unit,
            figures=figures,
            total=int(analysis.total()),
            unsupported=exclusive(unsupported),
        )


PEER = Fvcore()
