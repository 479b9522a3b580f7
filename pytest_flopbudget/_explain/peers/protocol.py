"""What a peer is: another FLOP counter that `flopbudget explain --vs NAME` runs and compares with.

One small protocol, one module per peer (as httpx's transports): a peer says its name, the distribution that
installs it, the framework its models are written in and the unit its figures are in (fvcore, ptflops and thop
call multiply-accumulates "flops"), whether it is installed, and runs itself on a live model, returning its
figures per layer (and per op where it has them) as fields. How it counts our ops, op by op, without running, is
its profile (`conventions.py`).

The PyTorch peers (`Peer`) run on a real forward and are paired with our count by `match.py`. A peer of another
framework (`GraphPeer`: XLA's cost analysis, TensorFlow's profiler) reads the program our count traced (a jaxpr, a
graph) and itemises the difference itself, since it prices the same ops by its own rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pytest_flopbudget._explain.items import Explanation

#: The unit a peer's figures are in: multiply-accumulates, or floating-point operations (1 MAC = 2 FLOPs).
Unit = Literal["macs", "flops"]


@dataclasses.dataclass(frozen=True)
class PeerFigure:
    """What a peer counted in one layer, exclusive of its children, in the peer's unit: for one of its ops (`op`,
    in the peer's own words: `conv`, `aten.addmm`, `F.relu`, `Conv2d`), or the layer's whole figure (`op` None)."""

    layer: str
    op: str | None
    value: int
    #: The figure of a module hook (thop's and ptflops' `Conv2d`, `MultiheadAttention`): it prices the module's
    #: whole forward, every op in it, by the module's type.
    module: bool = False


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What the explanation reads of the model itself: the ops its real forward ran per layer (a fused kernel shows
    as one op there) and the layers that hold other modules (a block, whose own forward adds the residual)."""

    seen: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    containers: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class PeerCount:
    """One run of a peer: its figures, and what it saw but did not count (the reasons behind a zero)."""

    peer: str
    version: str
    unit: Unit
    figures: tuple[PeerFigure, ...]
    #: The peer's own total, as it reports it; the figures add up to it (`layers` checks).
    total: int
    #: Ops the peer ran into but has no formula for, per layer (`aten::add_`: 16 calls): it said so.
    unsupported: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    #: Ops that ran in the peer's forward, per layer and call count (fused kernels show here, as one op).
    seen: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    #: The layers whose own forward the peer prices, for a peer that sees modules through hooks on some module
    #: types only (thop, ptflops); None: it sees every layer's ops it has a formula or a patch for.
    hooked: frozenset[str] | None = None
    #: What else to know about its figures, one line each (ptflops prints its total per sample).
    notes: tuple[str, ...] = ()

    def layers(self) -> dict[str, int]:
        """The peer's figure per layer (its ops summed)."""
        figures: dict[str, int] = {}
        for figure in self.figures:
            figures[figure.layer] = figures.get(figure.layer, 0) + figure.value
        return figures

    def ops_in(self, layer: str) -> dict[str, int]:
        """The peer's figure per op of one layer (empty where it reports layers only)."""
        ops: dict[str, int] = {}
        for figure in self.figures:
            if figure.layer == layer and figure.op is not None:
                ops[figure.op] = ops.get(figure.op, 0) + figure.value
        return ops


class GraphPeer(Protocol):
    """A peer of a framework whose programs our count traces (`jax`, `tensorflow`): it counts the entry itself, ours
    and its own figures of the same traced program, and itemises the difference."""

    name: str
    distribution: str
    framework: str
    unit: Unit
    title: str

    def is_installed(self) -> bool: ...

    def version(self) -> str: ...

    def explain(self, backend: Any, loaded: Any) -> Explanation:
        """Ours (`backend.count(loaded)`) against its figure for the same program, itemised; raises `PeerError`."""
        ...


class PeerError(Exception):
    """The peer could not count the model (it raised, or needs what the model lacks): one line saying why."""


class Peer(Protocol):
    """Another counter. Importing a peer's module imports nothing of the peer's package: `run` does."""

    #: The name `--vs` takes (`fvcore`, `torch`).
    name: str
    #: What `pip install` takes to install it.
    distribution: str
    #: The backend whose models it counts (`torch`, `jax`, `tensorflow`).
    framework: str
    #: The unit its figures are in.
    unit: Unit
    #: How it is described in the output (`fvcore's FlopCountAnalysis`).
    title: str
    #: It sees a model through module hooks and patched functions (thop, ptflops, calflops, DeepSpeed), so an op
    #: no hooked module or patched function runs (`x + y`) is invisible to it.
    hooks: bool
    #: It runs the forward under torch.no_grad() (which also picks inference fast paths: fused attention).
    no_grad: bool

    def is_installed(self) -> bool:
        """Whether its package can be imported (looked up, not imported)."""
        ...

    def version(self) -> str:
        """The installed version, from the distribution's metadata."""
        ...

    def run(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PeerCount:
        """Its figures for one real forward of `model(*args, **kwargs)`; raises `PeerError`."""
        ...
