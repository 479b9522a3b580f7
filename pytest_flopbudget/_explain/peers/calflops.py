"""calflops' `calculate_flops`: DeepSpeed's flops profiler, reworked for Hugging Face models.

It patches `torch.nn.functional` (linear, conv, norms, activations, pools, softmax) and a few tensor methods
(`torch.matmul`, `Tensor.add`, `torch.mul`, ...) and sums what they cost in the innermost module's forward: an op
that reaches no patched function (`x + y`, `x * y`, `torch.rsqrt`, `aten` kernels called directly) is not
counted. Its FLOPs are 2 per multiply-accumulate, so its matmuls agree with ours.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerError, PeerFigure, Unit


class Calflops:
    name = "calflops"
    distribution = "calflops"
    framework = "torch"
    unit: Unit = "flops"
    title = "calflops' calculate_flops"
    hooks = True
    no_grad = False  # calculate_flops runs the forward as it is (eval mode, gradients on)

    def is_installed(self) -> bool:
        return importlib.util.find_spec("calflops") is not None

    def version(self) -> str:
        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        from calflops import calculate_pipline
        from calflops.calculate_pipline import CalFlopsPipline
        from calflops.utils import get_module_flops

        from pytest_flopbudget._explain.peers.torch_tools import FrameCapture

        pipeline = CalFlopsPipline(model=model, include_backPropagation=False, compute_bp_factor=2.0)
        model.eval()
        pipeline.start_flops_calculate(ignore_list=None)
        capture = FrameCapture(model, calculate_pipline.module_flop_count, calculate_pipline.old_functions)
        try:
            with capture.active():
                model(*args, **kwargs)
            total = int(get_module_flops(model))
        except Exception as exc:
            raise PeerError(f"calflops failed on the model: {type(exc).__name__}: {exc}") from None
        finally:
            pipeline.end_flops_calculate()
        figures = tuple(
            PeerFigure(path, f"F.{op}", value) for path, ops in capture.figures.items() for op, value in ops.items()
        )
        return PeerCount(self.name, self.version(), self.unit, figures, total)


PEER = Calflops()
