"""`fork_hazard`: a process may be forked until jax's backend starts in it (importing and tracing start none).
Asked in a fresh interpreter: this test process may have started jax already."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_flopbudget._cache.fork_safety import JAX_BACKEND, fork_hazard

pytest.importorskip("jax")

SCRIPT = """
from pytest_flopbudget._cache.fork_safety import fork_hazard
seen = [fork_hazard()]
import jax
import jax.numpy as jnp
seen.append(fork_hazard())
jax.make_jaxpr(lambda x: x * 2)(jax.ShapeDtypeStruct((2,), jnp.float32))  # tracing starts no backend
seen.append(fork_hazard())
jnp.ones(2)  # a concrete array does
seen.append(fork_hazard())
print(seen)
"""


def test_only_a_started_jax_backend_makes_forking_unsafe() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == repr([None, None, None, JAX_BACKEND])


def test_a_bridge_that_cannot_say_is_taken_as_running(monkeypatch: pytest.MonkeyPatch) -> None:
    class Bridge:
        def backends_are_initialized(self) -> bool:
            raise RuntimeError("changed")

    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", Bridge())
    assert fork_hazard() == JAX_BACKEND
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", None)
    assert fork_hazard() is None
