"""Forked children that each send one message back on a pipe: read without waiting on what they left running,
several at once, and never outlived by them.

Every count is made in a forked child (`counter.py`), and with `flopbudget check -j N` several at a time. A child
writes one message, its length first (`HEADER` bytes, big-endian), and exits. The parent reads exactly that length
rather than to end-of-file (a process the model started and left running holds the pipe open and must not make the
check wait for it), and reads any number of children in one loop (`Reply.poll`, `wait_any`): no thread, so a
Ctrl-C lands in the one loop that can stop every child.

A child asks the kernel to kill it when the process that forked it dies (`die_with_parent`), so a Ctrl-C, or a
check killed outright, never leaves a child counting on: its parent's `SIGKILL` ends the whole tree below it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Sequence

#: The message's length, big-endian, before the message.
HEADER = 8
#: How often a wait wakes up to look at the children's exit statuses (and to let a Ctrl-C in).
POLL_SECONDS = 0.1
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Reply:
    """One forked child's message on the read end of its pipe, and its exit status.

    `poll(readable)` takes what has arrived and says whether the reply is complete: the announced length is in,
    the pipe is at end-of-file, or the child has exited and nothing more is coming. `result()` then gives the
    message (empty when incomplete) and the wait status, and closes the pipe.
    """

    def __init__(self, read_end: int, pid: int) -> None:
        self.read_end = read_end
        self.pid = pid
        self.status: int | None = None
        self._buffer = bytearray()
        os.set_blocking(read_end, False)

    def fileno(self) -> int:
        return self.read_end

    def poll(self, readable: bool) -> bool:
        chunk = b""
        if readable:
            with contextlib.suppress(BlockingIOError):
                chunk = os.read(self.read_end, 1 << 20)
            self._buffer += chunk
        buffer = self._buffer
        if len(buffer) >= HEADER and len(buffer) >= HEADER + int.from_bytes(buffer[:HEADER], "big"):
            return True
        if readable and not chunk:  # end of file: every writer is gone
            return True
        if self.status is None:
            done, waited = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = waited
            return False
        return not readable  # the child has exited and nothing more is coming

    def result(self) -> tuple[bytes, int]:
        """The message (b"" when it did not arrive whole) and the child's wait status; closes the pipe."""
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        with contextlib.suppress(OSError):
            os.close(self.read_end)
        buffer = self._buffer
        length = int.from_bytes(buffer[:HEADER], "big") if len(buffer) >= HEADER else -1
        complete = length >= 0 and len(buffer) >= HEADER + length
        return (bytes(buffer[HEADER : HEADER + length]) if complete else b""), self.status

    def kill(self) -> None:
        """Stop the child at once (its own children follow it: `die_with_parent`) and reap it."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        if self.status is None:
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.read_end)


def wait_any(replies: Sequence[Reply]) -> list[Reply]:
    """The replies among `replies` that are complete, waiting up to `POLL_SECONDS` for one."""
    readable, _, _ = select.select(list(replies), [], [], POLL_SECONDS)
    return [reply for reply in replies if reply.poll(reply in readable)]


def receive(read_end: int, pid: int) -> tuple[bytes, int]:
    """One child's message and wait status (the pipe is closed after); a Ctrl-C while waiting kills the child and
    is raised on."""
    reply = Reply(read_end, pid)
    try:
        while not wait_any([reply]):
            pass
    except BaseException:
        reply.kill()
        raise
    return reply.result()


def die_with_parent(parent: int) -> None:  # pragma: no cover - runs in a child
    """In a child just forked by `parent`: be killed when `parent` dies (Linux `PR_SET_PDEATHSIG`), and exit now if
    it already has. Where the call is not available nothing changes: the parent still kills its own children."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died between the fork and the call
        os._exit(1)
