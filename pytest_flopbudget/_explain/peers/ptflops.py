"""ptflops' `get_model_complexity_info` with its default backend (`pytorch`): module hooks plus patched functions.

Modules of the types in its table are priced by a hook (convolutions and linear layers in multiply-accumulates
with their bias, norms, pools, activations, nn.MultiheadAttention); `torch.nn.functional` activations, pools and
softmax and the tensor methods `matmul`, `mm`, `bmm`, `addmm`, `mul` and `add` are patched and priced wherever
they run, which ptflops sums into its total without saying where. Here each such call is attributed to the
module whose forward made it, so the per-layer figures add up to ptflops' total.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from pytest_flopbudget._explain.peers.protocol import PeerCount, PeerError, PeerFigure, Unit


class Ptflops:
    name = "ptflops"
    distribution = "ptflops"
    framework = "torch"
    unit: Unit = "macs"
    title = "ptflops' get_model_complexity_info (pytorch backend)"
    hooks = True
    no_grad = False  # get_model_complexity_info runs the forward in eval mode, gradients on

    def is_installed(self) -> bool:
        return importlib.util.find_spec("ptflops") is not None

    def version(self) -> str:
        return metadata.version(self.distribution)

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        from ptflops import pytorch_engine as engine

        from pytest_flopbudget._explain.peers.torch_tools import ModuleStack

        stack = ModuleStack(model)
        functional: dict[str, dict[str, int]] = {}

        def call(wrapper: Any, *call_args: Any, **call_kwargs: Any) -> Any:  # torch_function_wrapper.__call__
            flops = int(wrapper.handler(*call_args, **call_kwargs))
            wrapper.collector.append(flops)
            ops = functional.setdefault(stack.current(), {})
            name = f"F.{getattr(wrapper.op, '__name__', 'op')}"
            ops[name] = ops.get(name, 0) + flops
            return wrapper.op(*call_args, **call_kwargs)

        collector: list[int] = []
        counted = engine.add_flops_counting_methods(model)
        counted.eval()
        counted.start_flops_count(ost=None, verbose=False, ignore_list=[])
        original_call = engine.torch_function_wrapper.__call__
        engine.patch_functional(collector)
        engine.patch_tensor_ops(collector)
        engine.torch_function_wrapper.__call__ = call
        try:
            with stack.active():
                model(*args, **kwargs)
            priced = {
                path: int(module.__flops__)
                for path, module in model.named_modules()
                if engine.is_supported_instance(module) and module.__flops__
            }
            batches = max(int(model.__batch_counter__), 1)
        except Exception as exc:
            raise PeerError(f"ptflops failed on the model: {type(exc).__name__}: {exc}") from None
        finally:
            engine.torch_function_wrapper.__call__ = original_call
            engine.unpatch_functional()
            engine.unpatch_tensor_ops()
            counted.stop_flops_count()
        types = {path: type(module).__name__ for path, module in model.named_modules()}
        hooked = frozenset(path for path, module in model.named_modules() if engine.is_supported_instance(module))
        leaves = {path for path, module in model.named_modules() if next(module.children(), None) is None}
        unsupported = {path: {types[path]: 1} for path in sorted(leaves - hooked)}
        figures = [PeerFigure(path, types[path], value, module=True) for path, value in priced.items()]
        figures += [PeerFigure(path, op, value) for path, ops in functional.items() for op, value in ops.items()]
        total = sum(figure.value for figure in figures)
        notes: tuple[str, ...] = ()
        if batches > 1:
            notes = (
                f"ptflops divides its total by the batch size ({batches}): it prints {total // batches} per sample",
            )
        return PeerCount(
            self.name,
            self.version(),
            self.unit,
            tuple(figures),
            total,
            unsupported=unsupported,
            hooked=hooked,
            notes=notes,
        )


PEER = Ptflops()
