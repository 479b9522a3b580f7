"""The counters `flopbudget explain --vs NAME` compares with, one module each; a module is imported only when its
peer is asked for, and a peer's own package only when it runs."""

from __future__ import annotations

import importlib

from pytest_flopbudget._explain.peers.protocol import GraphPeer, Peer

#: `--vs` name -> the module holding that peer as `PEER`.
PEERS: dict[str, str] = {
    "fvcore": "pytest_flopbudget._explain.peers.fvcore",
    "ptflops": "pytest_flopbudget._explain.peers.ptflops",
    "thop": "pytest_flopbudget._explain.peers.thop",
    "calflops": "pytest_flopbudget._explain.peers.calflops",
    "torch": "pytest_flopbudget._explain.peers.torch_flop_counter",
    "deepspeed": "pytest_flopbudget._explain.peers.deepspeed",
    "xla": "pytest_flopbudget._explain.peers.xla",
    "tf-profiler": "pytest_flopbudget._explain.peers.tf_profiler",
}


class UnknownPeer(ValueError):
    """A `--vs` name that is no peer: the message lists the accepted ones."""


def peer_named(name: str) -> Peer | GraphPeer:
    module = PEERS.get(name.strip().lower())
    if module is None:
        raise UnknownPeer(f"--vs {name}: not a peer; accepted: {', '.join(PEERS)}")
    peer: Peer | GraphPeer = importlib.import_module(module).PEER
    return peer


def peers_of(framework: str) -> list[str]:
    """The `--vs` names of the peers that count `framework`'s models (a backend's name: `torch`, `jax`)."""
    return [name for name in PEERS if peer_named(name).framework == framework]
