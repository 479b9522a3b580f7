"""Which module is running (`counting/torch/module_paths.py`): forward ops by the innermost module on the stack,
backward ops by the module that created their autograd node, and no hook left behind."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget._counting.torch.module_paths import ModulePathTracker  # noqa: E402
from pytest_flopbudget._report import ROOT  # noqa: E402


class Probe(nn.Module):
    """Writes down which path the tracker says is running when its forward runs."""

    def __init__(self, seen: list[str], fail: bool = False) -> None:
        super().__init__()
        self.seen = seen
        self.fail = fail
        self.tracker: ModulePathTracker | None = None
        self.inner: Any = None  # a module called from forward without being a submodule (as Keras layers are)

    def forward(self, x: Any) -> Any:
        assert self.tracker is not None
        self.seen.append(self.tracker.current)
        if self.inner is not None:
            x = self.inner(x)
        if self.fail:
            raise RuntimeError("boom")
        return x


def probes(model: nn.Module, tracker: ModulePathTracker) -> None:
    for module in model.modules():
        if isinstance(module, Probe):
            module.tracker = tracker
            if module.inner is not None:
                module.inner.tracker = tracker


def test_forward_ops_belong_to_the_innermost_module() -> None:
    seen: list[str] = []
    shared = Probe(seen)
    model = nn.Sequential(OrderedDict(a=Probe(seen), b=nn.Sequential(OrderedDict(c=Probe(seen), d=shared)), e=shared))
    tracker = ModulePathTracker(model)
    probes(model, tracker)
    assert tracker.current == ROOT
    model(torch.zeros(1))
    # a module registered twice keeps its first path, b.d
    assert seen == ["a", "b.c", "b.d", "b.d"]
    assert tracker.current == ROOT and tracker.error_path is None
    tracker.close()


def test_extra_modules_get_their_given_paths() -> None:
    seen: list[str] = []
    outer = Probe(seen)
    inner = Probe(seen)
    object.__setattr__(outer, "inner", inner)  # not a submodule: only `extra` makes it known and hooked
    model = nn.Sequential(OrderedDict(outer=outer))
    assert len(list(model.modules())) == 2  # the inner probe is not registered
    tracker = ModulePathTracker(model, extra=[("outer.keras_dense", inner)])
    probes(model, tracker)
    model(torch.zeros(1))
    assert seen == ["outer", "outer.keras_dense"]
    tracker.close()


def test_the_innermost_module_that_raised_is_remembered() -> None:
    seen: list[str] = []
    model = nn.Sequential(OrderedDict(ok=Probe(seen), block=nn.Sequential(OrderedDict(bad=Probe(seen, fail=True)))))
    tracker = ModulePathTracker(model)
    probes(model, tracker)
    with pytest.raises(RuntimeError, match="boom"):
        model(torch.zeros(1))
    assert tracker.error_path == "block.bad"  # not `block` or the root, whose hooks saw the error later
    assert tracker.current == ROOT  # every always_call hook popped its module
    tracker.close()


def test_close_removes_every_hook() -> None:
    seen: list[str] = []
    model = nn.Sequential(OrderedDict(a=Probe(seen)))
    tracker = ModulePathTracker(model)
    probes(model, tracker)
    tracker.close()
    model(torch.zeros(1))
    assert seen == [ROOT]  # nothing entered `a`
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())


def test_backward_nodes_belong_to_the_module_that_created_them() -> None:
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(3, 4), act=nn.ReLU(), fc2=nn.Linear(4, 2)))
    x = torch.ones(2, 3, requires_grad=True)
    before = (x * 2).grad_fn  # created before the tracker existed
    tracker = ModulePathTracker(model)
    out = model(x)
    after = (out * 2).grad_fn  # created after the forward, outside every module
    tracker.close()
    addmm = out.grad_fn  # fc2's addmm
    assert tracker.path_for_node(addmm) == "fc2"
    relu = next(n for n, _ in addmm.next_functions if n is not None and "Relu" in type(n).__name__)
    assert tracker.path_for_node(relu) == "act"
    first = next(n for n, _ in relu.next_functions if n is not None)
    assert tracker.path_for_node(first) == "fc1"
    assert tracker.path_for_node(after) == ROOT
    assert tracker.path_for_node(before) == ROOT
    leaf = next(n for n, _ in addmm.next_functions if n is not None and "AccumulateGrad" in type(n).__name__)
    assert tracker.path_for_node(leaf) == ROOT  # a leaf's node has no sequence number of its own
    assert tracker.path_for_node(object()) == ROOT  # not a node at all
