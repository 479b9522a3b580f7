"""`flopbudget explain`: count a model ourselves, run a peer on it, and itemise the difference.

The peer needs a real forward: the entry is loaded with real (zero) inputs, in eval mode. Ours is counted on the
same model and inputs (on fake tensors, as `flopbudget count` does) in the grad mode the peer runs in, so both see
the same kernels: under no_grad nn.MultiheadAttention takes its fused fast path, with gradients on it runs its
linear layers and attention one by one, and our formulas give the fused kernel exactly the FLOPs of its parts. One
more forward in that mode records the ops that ran per layer (a fused attention kernel shows there as one op),
which is how a zero of the peer's is told apart.

A JAX or TensorFlow target goes to its own peers (`GraphPeer`: XLA's cost analysis, TensorFlow's profiler), which
count it as `flopbudget count` does and price the very program that count traced by their rules; a target and a
peer of different frameworks is one line naming the peers that target has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path
from typing import Any, TypeGuard, cast

from pytest_flopbudget._backends import backend_for, count
from pytest_flopbudget._backends.dispatch import load_entry
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._config.target_kinds import article
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._explain.items import Explanation
from pytest_flopbudget._explain.peers import peer_named
from pytest_flopbudget._explain.peers.protocol import GraphPeer, ModelFacts, Peer, PeerCount, PeerError


class ExplainError(FlopBudgetError):
    """A peer that cannot run here (not installed, another framework, a model it cannot count): one line."""


def explain_entry(entry: ModelEntry, root: Path, peer_name: str) -> Explanation:
    """Our count of `entry` against `peer_name`'s, itemised."""
    peer = _ready(peer_name)
    if entry.training or entry.generate or entry.method != "forward":
        raise ExplainError(
            f"{entry.name}: explain compares one inference forward; it takes no training, generate or method"
        )
    backend = backend_for(entry)
    if getattr(backend, "files", False):  # a model file (ONNX, a SavedModel) is refused before it is read
        _same_framework(peer, backend, entry)
    backend, loaded = load_entry(entry, root)
    _same_framework(peer, backend, entry)
    if not _is_torch_peer(peer):
        try:
            return cast(GraphPeer, peer).explain(backend, loaded)
        except PeerError as exc:
            raise ExplainError(f"--vs {peer.name}: {exc}") from None
    real = dataclasses.replace(entry, execution="real")  # the peer runs a real forward: zeros, not meta tensors
    loaded = backend.reload(loaded, real, root)
    return explain_model(loaded.model, loaded.args, dict(loaded.kwargs), peer.name)


#: How a message names the models of each backend's peers.
_FRAMEWORKS = {"torch": "PyTorch", "jax": "JAX", "tensorflow": "TensorFlow"}


def _same_framework(peer: Peer | GraphPeer, backend: Any, entry: ModelEntry) -> None:
    if backend.name == peer.framework:
        return
    from pytest_flopbudget._explain.peers import peers_of

    theirs = peers_of(backend.name)
    offer = (
        f"its peer{'s' if len(theirs) > 1 else ''}: {', '.join(f'--vs {name}' for name in theirs)}"
        if theirs
        else f"explain has no {backend.framework} peer yet"
    )
    raise ExplainError(
        f"--vs {peer.name} counts {_FRAMEWORKS.get(peer.framework, peer.framework)} models; {entry.target} is "
        f"{article(backend.framework)} model ({offer})"
    )


def _is_torch_peer(peer: Peer | GraphPeer) -> TypeGuard[Peer]:
    return peer.framework == "torch"


def explain_model(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], peer_name: str) -> Explanation:
    """Our count of `model(*args, **kwargs)` (real tensors) against `peer_name`'s, itemised."""
    from pytest_flopbudget._explain.match import explain

    peer = _ready(peer_name)
    if not _is_torch_peer(peer):
        raise ExplainError(
            f"--vs {peer.name} counts {_FRAMEWORKS.get(peer.framework, peer.framework)} models, from a target: "
            f"flopbudget explain TARGET --vs {peer.name}"
        )
    _real_weights(peer, model)
    model.eval()
    with _grad_mode(peer):
        ours = count(model, *args, **kwargs)
    their_count, facts = run_peer(peer, model, args, kwargs)
    return explain(ours, their_count, peer, facts)


def check_peer(name: str) -> None:
    """Raise `ExplainError` (one line) for a `--vs` name that is no peer or a peer that is not installed."""
    _ready(name)


def _ready(name: str) -> Peer | GraphPeer:
    from pytest_flopbudget._explain.peers import UnknownPeer

    try:
        peer = peer_named(name)
    except UnknownPeer as exc:
        raise ExplainError(str(exc)) from None
    if not peer.is_installed():
        raise ExplainError(f"--vs {peer.name}: {peer.title} is not installed here; pip install {peer.distribution}")
    return peer


def run_peer(peer: Peer, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[PeerCount, ModelFacts]:
    """The peer's count of one real forward of `model` (in eval mode), and the ops that forward ran per layer."""
    from pytest_flopbudget._explain.peers.torch_tools import model_facts

    try:  # a peer's prints and log lines (DeepSpeed logs to stdout) must not mix with the table or the JSON
        with _grad_mode(peer), contextlib.redirect_stdout(io.StringIO()):
            their_count = peer.run(model, args, kwargs)
        with _grad_mode(peer):
            facts = model_facts(model, args, kwargs)
    except PeerError as exc:
        raise ExplainError(f"--vs {peer.name}: {exc}") from None
    except Exception as exc:  # the peer's own bug, or a model it cannot run: one line, not a traceback
        detail = " ".join(str(exc).split())[:300]
        raise ExplainError(
            f"--vs {peer.name}: {peer.title} failed on the model: {type(exc).__name__}: {detail}"
        ) from None
    return their_count, facts


def _grad_mode(peer: Peer) -> contextlib.AbstractContextManager[Any]:
    import torch

    return torch.no_grad() if peer.no_grad else contextlib.nullcontext()


def _real_weights(peer: Peer, model: Any) -> None:
    if any(tensor.is_meta for tensor in (*model.parameters(), *model.buffers())):
        raise ExplainError(
            f"--vs {peer.name} runs a real forward, and the model's weights are on the meta device; give a factory "
            f"that builds it on the CPU (at a small size)"
        )
