"""pytest-xdist: the workers' pyproject models counted in processes forked from one warm server, not in each worker.

Under `pytest -n N`, xdist starts N fresh interpreters (execnet runs `python -c`, it cannot fork), and each imported
torch and warmed the counting backend up before its first model: with 16 models on 2 workers, the budget items
took 1.8x as long as serially (two imports of torch, two warm-ups, three pytest start-ups for one). So the
controller forks a count server at start-up (before xdist starts any worker, so the fork copies no thread): it
imports torch and warms up once, while the workers start, then forks a process per request, which counts one
model exactly as `flopbudget check` does (`counter._libraries_then_models`: the model's libraries, then the model
in a child of its own) and sends the answer back. A worker's `ServedCounter` asks it over a Unix socket in a
private directory; the workers never import torch for a pyproject model.

Nothing here decides anything: the server answers what the worker would have counted itself, and a worker that
cannot reach it counts in its own process, as before, with the same result. The server and every process
it forked die with the controller (`children.die_with_parent`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_flopbudget._cache.children import HEADER, die_with_parent
from pytest_flopbudget._cache.counter import IsolatedCounter, can_fork
from pytest_flopbudget._cache.fork_safety import fork_hazard
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._report import Report

if TYPE_CHECKING:
    from pytest_flopbudget._curve.formula import Formula

#: The key of the server's address in xdist's `workerinput`.
WORKERINPUT_KEY = "flopbudget_count_server"
_REQUEST_BYTES = 1 << 20


def fingerprint(entry: ModelEntry) -> str:
    """What a worker and the server must agree on for a model: its name, its whole table, and the formulas
    registered with `register_formula` in the process (a `conftest.py` the worker imported but the controller had
    not yet, when it forked the server, would count differently: then the worker counts the model itself)."""
    from pytest_flopbudget._backends.formulas import registered_formulas

    formulas = []
    for handle in registered_formulas():
        function = handle.formula.fn
        code = getattr(function, "__code__", None)
        where = [code.co_filename, code.co_firstlineno] if code is not None else [repr(type(function))]
        formulas.append([handle.op, getattr(function, "__module__", ""), getattr(function, "__qualname__", ""), where])
    return json.dumps([entry.name, entry.table, formulas], sort_keys=True, default=str)


class CountServer:
    """The controller's handle on the server process: its address, and `stop()`."""

    def __init__(self, directory: str, address: str, pid: int) -> None:
        self.directory = directory
        self.address = address
        self.pid = pid

    @classmethod
    def start(cls, models: Mapping[str, ModelEntry], root: Path) -> CountServer | None:
        """Fork the server for `models` (the pyproject's, by name), listening before this returns; None where
        there is no fork, where this process must not be forked (jax's backend runs in it) or no socket can be
        made (the workers then count in their own processes)."""
        if not can_fork() or not models or fork_hazard() is not None:  # jax running here: no fork (`fork_safety`)
            return None
        directory = tempfile.mkdtemp(prefix="flopbudget-")  # mode 0700: only this user can connect
        address = os.path.join(directory, "count.sock")
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(address)
            listener.listen(64)
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            return None
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the server; the tests see what it answers
            try:
                die_with_parent(parent)
                _serve(listener, dict(models), root)
            finally:
                os._exit(0)
        listener.close()
        return cls(directory, address, pid)

    def stop(self) -> None:
        """End the server (the processes it forked follow it) and remove its socket."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        shutil.rmtree(self.directory, ignore_errors=True)


def _serve(listener: socket.socket, models: dict[str, ModelEntry], root: Path) -> None:  # pragma: no cover
    """The server's loop: warm up once, then a forked process per connection; never returns normally."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the run: the controller then stops the server
    IsolatedCounter(root, record=False)._prepare()  # torch imported and the backend warmed up, once, for all
    server = os.getpid()
    while True:
        with contextlib.suppress(ChildProcessError):  # reap the finished handlers
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        ready, _, _ = select.select([listener], [], [], 0.5)
        if not ready:
            continue
        try:
            connection, _ = listener.accept()
        except OSError:
            continue
        if os.fork() == 0:
            try:
                listener.close()
                die_with_parent(server)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                _handle(connection, models, root)
            finally:
                os._exit(0)
        connection.close()


def _handle(connection: socket.socket, models: dict[str, ModelEntry], root: Path) -> None:  # pragma: no cover
    """One request: `{"name", "fingerprint"}` in, the counting process's message out (as `IsolatedCounter` gets
    it from its own fork); a model the server does not know as the worker does is refused (`{"unknown": ...}`)."""
    from pytest_flopbudget._cache.counter import _libraries_then_models, _module_of
    from pytest_flopbudget._cache.library_imports import library_imports

    request = json.loads(_read_message(connection))
    entry = models.get(str(request.get("name")))
    if entry is None or fingerprint(entry) != request.get("fingerprint"):
        _send(connection, {"unknown": str(request.get("name"))})
        return
    module = _module_of(entry)
    imports = library_imports([module], [str(root)]) if module else []
    write_end = os.dup(connection.fileno())
    connection.close()
    _libraries_then_models([entry], root, imports, write_end, None)  # writes the answer and exits


def _read_message(connection: socket.socket) -> bytes:
    """A length-prefixed message from `connection` (b"" when it ends early or is too long)."""
    data = b""
    while len(data) < HEADER or len(data) < HEADER + int.from_bytes(data[:HEADER], "big"):
        if len(data) >= HEADER and int.from_bytes(data[:HEADER], "big") > _REQUEST_BYTES:
            return b""
        chunk = connection.recv(1 << 20)
        if not chunk:
            return b""
        data += chunk
    return data[HEADER : HEADER + int.from_bytes(data[:HEADER], "big")]


def _send(connection: socket.socket, message: object) -> None:
    data = json.dumps(message).encode()
    connection.sendall(len(data).to_bytes(HEADER, "big") + data)


class _ServerGone(Exception):
    """The server could not be reached, or did not know the model: the worker counts it itself."""


class ServedCounter(IsolatedCounter):
    """An xdist worker's counter (a `run.Counter`): each model counted by the controller's server (`CountServer`);
    a model the server cannot answer (it is gone, or was given another pyproject) is counted in this process, as
    the worker did before, with the same result."""

    def __init__(self, address: str, root: Path) -> None:
        super().__init__(root, record=False)
        self.address = address

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        try:
            return super().__call__(entry, root)
        except _ServerGone:
            from pytest_flopbudget._backends import count_entry

            return count_entry(entry, root)

    def count_curve(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
        try:
            return super().count_curve(entry, root)
        except _ServerGone:
            from pytest_flopbudget._curve.engine import count_curve

            return count_curve(entry, root)

    def _count_group(self, group: list[ModelEntry], root: Path) -> None:
        (entry,) = group  # never planned: one model per call
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(self.address)
                _send(connection, {"name": entry.name, "fingerprint": fingerprint(entry)})
                connection.shutdown(socket.SHUT_WR)
                payload = _read_message(connection)
        except OSError as exc:
            raise _ServerGone(str(exc)) from None
        try:
            message = json.loads(payload) if payload else None
        except ValueError:
            message = None
        if not isinstance(message, dict) or "unknown" in message or "unfit" in message:  # unfit: jax started
            raise _ServerGone("no answer")
        self._finish_group(group, payload, 0, [])
