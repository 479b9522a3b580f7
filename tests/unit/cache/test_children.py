"""Forked children's replies: read several at once, exactly the announced length, and no child outlives its parent."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from pytest_flopbudget._cache.children import HEADER, Reply, die_with_parent, receive, wait_any

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks")


def fork_child(message: bytes | None, *, delay: float = 0.0, code: int = 0) -> tuple[int, int]:
    """A child that waits `delay` s, writes `message` with its length first (None: nothing) and exits `code`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_end)
            time.sleep(delay)
            if message is not None:
                os.write(write_end, len(message).to_bytes(HEADER, "big") + message)
        finally:
            os._exit(code)
    os.close(write_end)
    return read_end, pid


def test_a_reply_is_the_announced_message_and_the_exit_status() -> None:
    payload, status = receive(*fork_child(b'{"ok": 1}', code=3))
    assert payload == b'{"ok": 1}' and os.waitstatus_to_exitcode(status) == 3


def test_a_child_that_sends_nothing_gives_an_empty_message_and_its_status() -> None:
    payload, status = receive(*fork_child(None, code=7))
    assert payload == b"" and os.waitstatus_to_exitcode(status) == 7


def test_several_children_are_read_in_the_order_they_finish() -> None:
    replies = [Reply(*fork_child(str(delay).encode(), delay=delay)) for delay in (0.6, 0.0, 0.3)]
    order = []
    deadline = time.monotonic() + 30
    while replies and time.monotonic() < deadline:
        for reply in wait_any(replies):
            replies.remove(reply)
            order.append(reply.result()[0])
    assert order == [b"0.0", b"0.3", b"0.6"]


def test_a_process_left_running_with_the_pipe_open_does_not_hold_the_reply() -> None:
    """The child forks a grandchild that keeps the write end open for a minute: the reply is complete anyway."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(60)
            os._exit(0)
        os.write(write_end, (8).to_bytes(HEADER, "big") + grandchild.to_bytes(8, "big"))
        os._exit(0)
    os.close(write_end)
    start = time.monotonic()
    payload, _ = receive(read_end, pid)
    os.kill(int.from_bytes(payload, "big"), signal.SIGKILL)
    assert time.monotonic() - start < 30


def test_a_child_dies_with_its_parent() -> None:
    """A grandchild that asked `die_with_parent` is killed when its parent is (a Ctrl-C's SIGKILL to a lane)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: forks the grandchild, sends its pid, waits to be killed
        parent = os.getpid()
        grandchild = os.fork()
        if grandchild == 0:
            die_with_parent(parent)
            time.sleep(300)
            os._exit(0)
        os.write(write_end, grandchild.to_bytes(8, "big"))
        time.sleep(300)
        os._exit(0)
    os.close(write_end)
    grandchild = int.from_bytes(os.read(read_end, 8), "big")
    os.close(read_end)
    time.sleep(0.2)  # the grandchild's prctl
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(grandchild)
    if alive:  # pragma: no cover - the failure: do not leave it behind
        os.kill(grandchild, signal.SIGKILL)
    assert not alive


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
