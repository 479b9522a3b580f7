"""Which module is running: attribution of every dispatched op, forward and backward, to a dotted module path.

Forward ops go to the innermost module whose forward is on the stack. Backward ops run on the autograd engine,
outside any module's forward; they are attributed through the autograd sequence number. Every autograd node takes
the next sequence number when it is created, so we record the number at each change of the innermost module and
look up which module was innermost when the node being executed was created.

Keras 3 layers (torch backend) are torch modules whose `__call__` runs `nn.Module.__call__`, so the same hooks see
them, but they are not registered as torch submodules: the caller passes them in `extra` with their Keras paths.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import torch

from pytest_flopbudget._report import ROOT


class ModulePathTracker:
    """Forward hooks on every submodule of one model, removed on `close()`; no global hooks."""

    def __init__(self, model: torch.nn.Module, extra: Sequence[tuple[str, torch.nn.Module]] = ()) -> None:
        self.paths: dict[int, str] = {}
        for path, module in model.named_modules():
            self.paths.setdefault(id(module), path)
        hooked = list(model.modules())
        for path, module in extra:
            if id(module) not in self.paths:
                hooked.append(module)
            self.paths[id(module)] = path
        self._stack: list[str] = []
        self._seq_starts: list[int] = []
        self._seq_paths: list[str] = []
        self.error_path: str | None = None
        self._handles: list[Any] = []
        for module in hooked:
            self._handles.append(module.register_forward_pre_hook(self._enter))
            self._handles.append(module.register_forward_hook(self._leave, always_call=True))
        self._mark()

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def current(self) -> str:
        return self._stack[-1] if self._stack else ROOT

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        self._stack.append(self.paths.get(id(module), ROOT))
        self._mark()

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.error_path is None and sys.exc_info()[1] is not None:
            # always_call hooks run inside the except clause of Module.__call__: the innermost one sees it first.
            self.error_path = self.current
        if self._stack:
            self._stack.pop()
        self._mark()

    def _mark(self) -> None:
        seq = torch._C._autograd._get_sequence_nr()
        path = self.current
        if self._seq_starts and self._seq_starts[-1] == seq:
            self._seq_paths[-1] = path
        else:
            self._seq_starts.append(seq)
            self._seq_paths.append(path)

    def path_for_node(self, node: Any) -> str:
        """The module whose forward created the autograd node now running backward."""
        try:
            seq = node._sequence_nr()
        except (AttributeError, RuntimeError):
            return ROOT
        index = bisect_right(self._seq_starts, seq) - 1
        if index < 0 or seq >= 2**63:
            return ROOT
        return self._seq_paths[index]
