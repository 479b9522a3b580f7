"""pytest-xdist: what a worker sends the controller at the end of its session, and how the controller reads it.

Workers count and judge (a test fails on the worker that ran it) but write nothing: each sends its run (what it
measured and could not count) and what it saw of the suite (the models its tests own, whether it saw only part)
through `workeroutput`, as JSON. A worker whose results did not arrive, or arrived unreadable, is an error in
every output, never a silently smaller run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from pytest_flopbudget._run import Unchecked
from pytest_flopbudget._shard import Shard

if TYPE_CHECKING:
    from pytest_flopbudget._plugin.state import SessionState

_WORKER_KEY = "flopbudget_run"
_COLLECTION_KEY = "collection"


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (it then has `workerinput`), as pytest's own junitxml asks."""
    return hasattr(config, "workerinput")


class WorkerExport:
    """Registered on xdist workers only: sends the worker's run to the controller when its session ends."""

    def __init__(self, session: SessionState) -> None:
        self.session = session

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.session
        try:
            collection: dict[str, Any] = {"owners": sorted(state.owners), "narrowed": state.narrowed(session)}
            if state.shard is not None:  # --flopbudget-shard: the plan this worker computed, for the results
                collection["shard"] = state.shard.to_dict()
            payload = json.dumps({**state.run.export(), _COLLECTION_KEY: collection})
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. an integer too long to write
            payload = json.dumps({"transport_error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        state.config.workeroutput[_WORKER_KEY] = payload  # type: ignore[attr-defined]


def receive(state: SessionState, node: Any, error: Any) -> None:
    """Controller: merge what the worker `node` recorded into `state`'s run; a worker whose results did not
    arrive makes the run narrowed (nothing is judged stale) and its models unchecked."""
    worker = str(getattr(node, "workerinput", {}).get("workerid", "?"))
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    problem = None
    if data is None:
        problem = f"sent no results{f' ({error})' if error else ''}"
    else:
        try:
            payload = json.loads(data)
            if "transport_error" in payload:
                problem = f"could not send its results: {payload['transport_error']}"
            else:
                state.run.merge(payload)
                collection = payload.get(_COLLECTION_KEY) or {}
                state.owners.update(str(name) for name in collection.get("owners", []))
                if collection.get("shard") is not None and state.shard is None:
                    state.shard = Shard.from_dict(collection["shard"])
                if collection.get("narrowed", "unknown"):
                    state.deselected += 1  # the worker saw part of the suite: nothing is judged stale
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"sent results that cannot be read: {type(exc).__name__}: {str(exc)[:200]}"
    if problem is not None:
        state.lost_worker = True
        message = f"xdist worker {worker} {problem}; the models it counted are not checked"
        state.run.record_unchecked(Unchecked(f"xdist worker {worker}", message))
