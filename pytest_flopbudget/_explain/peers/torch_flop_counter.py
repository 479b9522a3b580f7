"""PyTorch's own `torch.utils.flop_counter.FlopCounterMode`: a dispatch mode over one real forward.

It counts FLOPs (2 per multiply-accumulate) of the ops in its registry only: matmuls, convolutions and the
scaled-dot-product attention kernels; every other op, fused kernels without a formula included
(`aten._native_multi_head_attention`, nn.MultiheadAttention's inference fast path on CPU), counts as zero.
"""

from __future__ import annotations

from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerFigure, Unit


class TorchFlopCounter:
    name = "torch"
    distribution = "torch"
    framework = "torch"
    unit: Unit = "flops"
    title = "torch.utils.flop_counter.FlopCounterMode"
    hooks = False
    no_grad = True  # counted as inference usually is, under torch.no_grad()

    def is_installed(self) -> bool:
        import importlib.util

        return importlib.util.find_spec("torch") is not None

    def version(self) -> str:
        from importlib import metadata

        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        from torch.utils.flop_counter import FlopCounterMode

        from pytest_flopbudget._explain.peers.torch_tools import exclusive

        with FlopCounterMode(display=False) as counter:
            model(*args, **kwargs)
        root = type(model).__name__
        inclusive: dict[str, dict[str, int]] = {}
        for name, ops in counter.get_flop_counts().items():
            if name == "Global":
                continue
            path = "" if name == root else name.removeprefix(root + ".")
            inclusive[path] = {f"aten.{op.__name__}": int(value) for op, value in ops.items()}
        total = int(counter.get_total_flops())
        outside = total - sum(inclusive.get("", {}).values())  # ops run outside the root's forward
        own = exclusive(inclusive)
        figures = [PeerFigure(path, op, value) for path, ops in own.items() for op, value in ops.items()]
        if outside:
            figures.append(PeerFigure("", None, outside))
        return PeerCount(self.name, self.version(), self.unit, tuple(figures), total)


PEER = TorchFlopCounter()
