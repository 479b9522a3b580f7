"""Count a model and learn what it depended on, answering from the count cache when nothing it read has changed.

What a count reads can only be seen while it runs (`dependencies.Recorder`), and only what is *loaded* during that
time is seen: a helper module that an earlier model of the same run imported is already in `sys.modules` and is
not read again. Two ways keep the record complete:

- forked (Linux, the default): each counted model runs in a child forked from a parent that has imported nothing
  of the user's code, so everything its code loads is loaded, and seen, in that child. The child sends back the
  Report and its dependencies as JSON. A model that crashes the interpreter fails alone, as a model error. torch
  and the counting backend are imported once in the parent first, so every child starts with them loaded.
- in-process (elsewhere, or with `fork=False`): each model's record also lists everything earlier models of the
  run read. Never too little, sometimes too much: a change to one model can recount another of the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import ModelEntry
from .count_cache import CountCache, entry_key
from .dependencies import Dependencies, Recorder
from .errors import CountingError, FlopBudgetError
from .report import Report

Counter = Callable[[ModelEntry, Path], Report]


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class CachedCounter:
    """`count(entry, root) -> Report`, for `Run.count`: from the cache on a hit, else counted and recorded."""

    def __init__(self, cache: CountCache, *, fork: bool | None = None) -> None:
        self.cache = cache
        self.fork = can_fork() if fork is None else fork
        self.hits: list[str] = []
        self._shared = Dependencies()  # what the parent loaded for every child (torch, the backend)
        self._shared_modules: set[str] = set()  # ... and the modules that covers
        self._torch_ready = False
        self._in_process = Recorder()  # in-process mode: one recording for the whole run
        #: Held across each fork (the progress line's lock), so no child starts with a stream mid-write.
        self.fork_guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        key = entry_key(entry.table, root)
        report = self.cache.lookup(key)
        if report is not None:
            self.hits.append(entry.name)
            return report
        report, dependencies = self._count_forked(entry, root) if self.fork else self._count_here(entry, root)
        if dependencies is not None and not dependencies.unstable:  # a file changed mid-count: keep nothing
            dependencies.merge(self._shared)
            if not dependencies.uncacheable:  # a read no fact can describe: keep nothing
                self.cache.save(key, entry.name, report, dependencies)
        return report

    # -- in this process --------------------------------------------------------------------------------------------

    def _count_here(self, entry: ModelEntry, root: Path) -> tuple[Report, Dependencies | None]:
        from .entries import count_entry

        with self._in_process:
            report = count_entry(entry, root)
        try:
            return report, Dependencies.capture(self._in_process)
        except Exception:  # the count stands; only its record is lost
            return report, None

    # -- in a forked child ------------------------------------------------------------------------------------------

    def _prepare_torch(self) -> None:
        """Import torch and warm the backend up once, before the first fork, so that every child starts warm.

        The first count in a process imports and initialises much of torch on first use (fake tensors, the
        dispatcher's Python kernels); counting a two-layer model here pays for that once instead of in every child.
        """
        if self._torch_ready:
            return
        self._torch_ready = True
        recorder = Recorder()
        with recorder, contextlib.suppress(Exception):
            import torch

            from .counting import count

            count(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), torch.zeros(1, 2))
        self._shared = Dependencies.capture(recorder)
        self._shared_modules = set(sys.modules)

    def _count_forked(self, entry: ModelEntry, root: Path) -> tuple[Report, Dependencies | None]:
        if not entry.is_onnx:
            self._prepare_torch()
        for stream in (sys.stdout, sys.stderr):  # what is buffered would otherwise be written twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        read_end, write_end = os.pipe()
        with self.fork_guard, warnings.catch_warnings():  # 3.12+ warns about fork in a threaded process (torch's)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage of it is the parent's assertions
            os.close(read_end)
            _child(entry, root, write_end, self._shared_modules)
        os.close(write_end)
        try:
            payload, status = _receive(read_end, pid)
        finally:
            os.close(read_end)
        return _answer(entry, payload, status)


_HEADER = 8  # the message's length, big-endian, before the message


def _receive(read_end: int, pid: int) -> tuple[bytes, int]:
    """The child's message and exit status. Reads exactly the announced length rather than to end-of-file: a
    process the model started and left running holds the pipe open, and must not make the check wait for it."""
    os.set_blocking(read_end, False)
    buffer = bytearray()
    status: int | None = None
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], 0.1)
            chunk = b""
            if ready:
                with contextlib.suppress(BlockingIOError):
                    chunk = os.read(read_end, 1 << 20)
                buffer += chunk
            if len(buffer) >= _HEADER and len(buffer) >= _HEADER + int.from_bytes(buffer[:_HEADER], "big"):
                break
            if ready and not chunk:  # end of file: every writer is gone
                break
            if status is None:
                done, waited = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = waited
            elif not ready:  # the child has exited and nothing more is coming
                break
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        raise
    if status is None:
        status = os.waitpid(pid, 0)[1]
    length = int.from_bytes(buffer[:_HEADER], "big") if len(buffer) >= _HEADER else -1
    complete = length >= 0 and len(buffer) >= _HEADER + length
    return (bytes(buffer[_HEADER : _HEADER + length]) if complete else b""), status


def _child(entry: ModelEntry, root: Path, write_end: int, shared: set[str]) -> None:  # pragma: no cover
    """Count in the child and send `{"report", "dependencies"}` or `{"error"}` back; never returns."""
    code = 0
    try:
        from .entries import count_entry

        recorder = Recorder()
        with recorder:
            report = count_entry(entry, root)
        message: dict[str, Any] = {"report": report.to_dict(), "dependencies": None}
        try:
            loaded = [module for name, module in list(sys.modules.items()) if name not in shared]
            message["dependencies"] = Dependencies.capture(recorder, loaded).to_dict()
        except Exception:  # the count stands; only its record is lost
            pass
    except FlopBudgetError as exc:
        message = {"error": str(exc)}
    except KeyboardInterrupt:
        message, code = {"interrupted": True}, 130
    except BaseException as exc:  # an internal error: the parent reports it as one
        message = {"internal": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    try:
        data = json.dumps(message).encode()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(len(data).to_bytes(_HEADER, "big") + data)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def _answer(entry: ModelEntry, payload: bytes, status: int) -> tuple[Report, Dependencies | None]:
    where = entry.source.where()
    try:
        message = json.loads(payload) if payload else None
    except ValueError:
        message = None
    if not isinstance(message, dict):
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name if os.WTERMSIG(status) in signal.valid_signals() else ""
            raise CountingError(f"{where}: counting crashed the interpreter (signal {os.WTERMSIG(status)} {name})")
        code = os.waitstatus_to_exitcode(status)
        raise CountingError(f"{where}: counting ended without a result (exit status {code})")
    if message.get("interrupted"):
        raise KeyboardInterrupt
    if "error" in message:
        raise _Relayed(str(message["error"]))
    if "internal" in message:  # one model's failure, not the run's: the other models are still checked
        raise CountingError(f"{where}: counting failed: {message['internal']}")
    dependencies = message.get("dependencies")
    return Report.from_dict(message["report"]), (Dependencies.from_dict(dependencies) if dependencies else None)


class _Relayed(CountingError):
    """A model error raised in the child, with its message exactly as the child wrote it."""
