"""Whether this process may be forked: not once a multithreaded runtime in it has started its threads.

The count cache counts each model in a forked child (`counter.py`). A fork copies one thread, the caller; a runtime
whose worker threads ran in the parent is copied without them, its locks perhaps held by a thread that is gone.
jax is the case met: once its backend has started (any concrete array: a notebook, a test suite, a library that
builds a constant at import), a child that counts a model making a concrete array (a Flax module with real
weights) waits forever for the parent's thread pool, and jax says so itself on every fork ("os.fork() was
called... JAX is multithreaded, so this will likely lead to a deadlock"). Importing jax starts no backend and is
safe; the counters ask `fork_hazard()` before they fork and count another way where it answers.
"""

from __future__ import annotations

import sys

#: Why a process whose jax backend runs is not forked (the rest of the sentence "models are counted ...").
JAX_BACKEND = "jax's backend is running in this process, and a child forked from it deadlocks when it uses jax"


def fork_hazard() -> str | None:
    """Why a child forked from this process could hang, or None when forking is safe (as far as is known)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:  # jax never imported, or not this far: nothing started
        return None
    started = getattr(bridge, "backends_are_initialized", None)
    try:
        running = bool(started()) if callable(started) else bool(getattr(bridge, "_backends", True))
    except Exception:  # a jax whose bridge cannot say: taken as running, as the safe answer
        running = True
    return JAX_BACKEND if running else None
