"""DeepSpeed's `FlopsProfiler` (`deepspeed.profiling.flops_profiler`), on one real forward.

Like calflops (its fork), it patches `torch.nn.functional`, a few tensor methods (`torch.matmul`, `Tensor.add`,
`@`) and `F.scaled_dot_product_attention`, and sums each module's own calls in a forward hook: FLOPs are 2 per
multiply-accumulate, and an op that reaches no patched function (`x + y`, `torch.rsqrt`) is not counted.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerError, PeerFigure, Unit


class DeepSpeed:
    name = "deepspeed"
    distribution = "deepspeed"
    framework = "torch"
    unit: Unit = "flops"
    title = "DeepSpeed's FlopsProfiler"
    hooks = True
    no_grad = False

    def is_installed(self) -> bool:
        return importlib.util.find_spec("deepspeed") is not None

    def version(self) -> str:
        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        import logging

        for name in ("DeepSpeed", "deepspeed"):
            logging.getLogger(name).setLevel(logging.ERROR)
        from deepspeed.profiling.flops_profiler import profiler

        from pytest_flopbudget._explain.peers.torch_tools import FrameCapture

        model.eval()
        flops_profiler = profiler.FlopsProfiler(model)
        flops_profiler.start_profile()
        capture = FrameCapture(model, profiler.module_flop_count, profiler.old_functions)
        try:
            with capture.active():
                model(*args, **kwargs)
            total = int(flops_profiler.get_total_flops())
        except Exception as exc:
            raise PeerError(f"DeepSpeed's profiler failed on the model: {type(exc).__name__}: {exc}") from None
        finally:
            flops_profiler.end_profile()
        figures = tuple(
            PeerFigure(path, f"F.{op}", value) for path, ops in capture.figures.items() for op, value in ops.items()
        )
        return PeerCount(self.name, self.version(), self.unit, figures, total)


PEER = DeepSpeed()
