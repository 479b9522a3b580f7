"""Peak memory of the counted call: the most bytes of tensor storage alive at once, and the layer running then.

Fake tensors have no memory, but they have storages with sizes and lifetimes exactly as the real run would: a view
shares its base's storage, an op's output gets a new one, and a storage dies when its last tensor (or the autograd
graph's saved copy) lets go of it. So the count can follow the real run's live bytes without allocating any:

- at the start, the storages of the (copied) model's parameters and buffers and of the inputs are alive;
- every storage an op creates is added when the op returns (`LiveBytes.observe`, called by the counting mode), and
  subtracted when the storage dies (its last tensor, view or saved copy is gone): its weak reference's callback is
  a builtin (`list.append` of the dead reference), and the next `observe` subtracts what died. A callback written in
  Python would run Python code at any moment, where a signal's exception (Ctrl-C, a harness's `SIGALRM` timeout)
  raised inside it is printed and ignored: one count in four outlived its signal. A builtin runs no bytecode, so
  the signal's handler runs in the count's own code and ends the count every time;
- a storage first seen as an op's input (a tensor held somewhere the start did not look: a plain tensor attribute
  of a module, a constant in a closure) is taken to have been alive from the start: it raises the current figure
  and the peak seen so far.

The peak is taken after each op, i.e. with the op's outputs alive and its inputs not yet released, as an allocator
would see it. Its layer is the module whose forward was innermost when the peak was reached, or, in the backward,
the module whose forward created the autograd node running then (`ModulePathTracker.path_for_node`).

What is in: parameters, buffers, inputs, every intermediate and output, and for a training count (forward, loss,
backward of one step) the activations autograd saves for the backward and the gradients the backward produces
(one per parameter, alive until the step ends). The step is a training loop that backpropagates a loss and keeps
no output (backend.py): the model's own loss where its output carries one (`output.loss`, a Hugging Face model
given `labels`), else `loss_fn(output)` or the sum of the outputs, with the output let go of before the backward,
so only what the backward saved of it (a log-softmax, never the logits themselves) stays alive. That is the step
MemTracker measures as `model(x).sum().backward()` or `model(**batch).loss.backward()`, and the Trainer's
`compute_loss` then `backward`; the count equals it to the byte on the tests' models. A loop that keeps the output
(`out = model(x); loss = f(out); loss.backward()` with `out` alive) peaks higher by the output's bytes.
In inference, whatever the caller's grad mode keeps is in: under `no_grad` (how configured inference models are
counted) nothing is saved for a backward. What is out: optimizer state (no optimizer runs), the allocator's
rounding of sizes and the blocks its cache keeps, kernels' workspaces (cuBLAS, cuDNN, attention scratch), the CUDA
context and anything allocated outside tensors. Real CUDA peaks are therefore higher (README, "Counting conventions").
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker
from pytest_flopbudget._report import ROOT, MemoryTimeline


@dataclass(frozen=True)
class PeakMemory:
    """The peak of live tensor bytes and where it happened (`layer` is a module path, `""` the model itself)."""

    bytes: int
    layer: str
    #: whether the peak was reached in the backward pass (a training count)
    backward: bool = False
    #: storages whose size is symbolic (a data-dependent shape): left out of the figures
    unsized: int = 0


class LiveBytes:
    """Follows the live bytes of tensor storages through one counted call.

    The counting mode (dispatch_mode.py) hands it every op it dispatches (`observe`), so following memory costs no
    dispatch mode of its own: a second Python mode around each op would cost more than the bookkeeping. It keeps
    the live bytes after each op (8 bytes per op) and the layer of each run of ops: the timeline
    `count --metric peak-memory` draws (`timeline()`).
    """

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.layer = ROOT
        self.backward = False
        self.unsized = 0
        #: set when an op could not be followed: the count then has no peak-memory figure
        self.failed = False
        self._tracker: ModulePathTracker | None = None
        #: id of a live storage -> (weak reference to it, its bytes); a dead one is removed by `_forget_dead`
        self._storages: dict[int, tuple[weakref.ref[Any], int]] = {}
        #: weak references whose storage died since the last `_forget_dead` (appended by the builtin callback)
        self._dead: list[weakref.ref[Any]] = []
        #: id of a weak reference -> the id of its storage, to find the entry a dead reference stood for
        self._keys: dict[int, int] = {}
        #: the timeline (`timeline()`): live bytes after each op, the layer each run of ops ran in, where the
        #: backward began, and storages found alive late (sample index, bytes), which every earlier sample lacks
        self._samples = array("q")
        self._layers: list[tuple[int, str]] = []
        self._backward_at: int | None = None
        self._late: list[tuple[int, int]] = []

    def attach(self, tracker: ModulePathTracker, present: Iterable[Any]) -> None:
        """Starts from the storages of every tensor in `present` (modules' parameters and buffers, inputs)."""
        self._tracker = tracker
        for value in present:
            if isinstance(value, torch.nn.Module):
                tensors: list[Any] = _parameters_and_buffers(value)
            else:
                tensors = tree_flatten(value)[0]
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor):
                    self._add(tensor)
        self.peak = self.live
        self._samples.append(self.live)

    def result(self) -> PeakMemory:
        return PeakMemory(self.peak, self.layer, self.backward, self.unsized)

    def timeline(self) -> MemoryTimeline:
        """Live bytes after each op so far (and before the first), each sample raised by the storages found alive
        later (alive from the start, as the peak takes them): its highest sample is the peak, first reached at the
        peak's layer."""
        live = list(self._samples)
        late = sorted(self._late)
        missing = sum(size for _, size in late)
        found = 0
        for index in range(len(live)):
            while found < len(late) and late[found][0] <= index:
                missing -= late[found][1]
                found += 1
            live[index] += missing
        return MemoryTimeline(live, list(self._layers), self._backward_at)

    def observe(self, args: tuple[Any, ...], out: Any, node: Any, path: str | None = None) -> None:
        """One op ran on `args` and returned `out` (`node`: the autograd node running it in the backward, or None;
        `path`: the layer it ran in, if the caller knows it)."""
        # Runs for every op: an input's storage is nearly always followed already, so it is looked up inline, and
        # `_add` runs only for one not seen yet (alive since before the call, so every figure so far was short of
        # its bytes) or one without a storage (counted as unsized there).
        if self._dead:
            self._forget_dead()
        storages = self._storages
        late = 0
        for value in args:
            if isinstance(value, torch.Tensor):
                try:
                    seen = id(value.untyped_storage()) in storages
                except Exception:
                    seen = False
                if not seen:
                    late += self._add(value)
            elif isinstance(value, (tuple, list)):  # `cat`'s inputs: one level down, as `_tensors` looks
                for item in value:
                    if isinstance(item, torch.Tensor):
                        late += self._add(item)
        if late:
            self.peak += late
            self._late.append((len(self._samples), late))
        if isinstance(out, torch.Tensor):  # most ops: one output
            grew = self._add(out) > 0
        else:
            grew = False
            for value in _tensors(out):
                if self._add(value):
                    grew = True
        tracker = self._tracker
        if path is None and tracker is not None:
            path = tracker.path_for_node(node) if node is not None else tracker.current
        path = path if path is not None else ROOT
        index = len(self._samples)
        self._samples.append(self.live)
        if not self._layers or self._layers[-1][1] != path:
            self._layers.append((index, path))
        if node is not None and self._backward_at is None:
            self._backward_at = index
        if grew and self.live > self.peak:
            self.peak = self.live
            self.backward = node is not None
            self.layer = path

    def _add(self, tensor: torch.Tensor) -> int:
        """Adds the tensor's storage if it is new; the bytes added (0 if it was alive already or has none)."""
        try:
            storage = tensor.untyped_storage()
        except Exception:  # sparse, nested or other storage-less tensors: bytes the figure would miss
            self.unsized += 1
            return 0
        key = id(storage)
        if key in self._storages:
            if self._storages[key][0]() is storage:
                return 0
            self._forget_dead()  # died since the last op, and its id is a new storage's now
        try:
            size = int(storage.nbytes())
        except Exception:  # a symbolic size fake mode cannot hint
            self.unsized += 1
            return 0
        reference = weakref.ref(storage, self._dead.append)  # a builtin callback: see the module's docstring
        self._storages[key] = (reference, size)
        self._keys[id(reference)] = key
        self.live += size
        return size

    def _forget_dead(self) -> None:
        """Subtract the bytes of every storage that died since the last call."""
        dead = self._dead  # the same list the callbacks append to: emptied in place
        while dead:
            reference = dead.pop()
            key = self._keys.pop(id(reference), None)
            entry = self._storages.get(key) if key is not None else None
            if entry is not None and entry[0] is reference:
                del self._storages[key]  # type: ignore[arg-type]
                self.live -= entry[1]


def _parameters_and_buffers(model: torch.nn.Module) -> list[torch.Tensor]:
    """`[*model.parameters(), *model.buffers()]` in one walk of the modules instead of two (each tensor once among
    the parameters and once among the buffers, as those give them): this runs at the start of every count."""
    parameters: dict[int, torch.Tensor] = {}
    buffers: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for tensor in module._parameters.values():
            if tensor is not None:
                parameters.setdefault(id(tensor), tensor)
        for buffer in module._buffers.values():
            if buffer is not None:
                buffers.setdefault(id(buffer), buffer)
    return [*parameters.values(), *buffers.values()]


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an op's arguments or outputs: the value itself, or the items of a tuple or list one level down
    (`cat`'s inputs, `split`'s outputs), which is where ATen schemas put them; cheaper than a pytree walk per op."""
    if isinstance(value, torch.Tensor):
        return [value]
    found: list[torch.Tensor] = []
    if isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, (tuple, list)):
                found.extend(element for element in item if isinstance(element, torch.Tensor))
    return found
