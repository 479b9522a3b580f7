"""The audit events (PEP 578) after which a count's inputs can no longer be described by facts, and why.

A recorded count is a function of the files Python opened, the directories it listed and the variables it read.
A subprocess, a forked worker, a native library loaded with ctypes or a database opened by SQLite read whatever
they like without any of that being seen, so a count that did one of them is never cached: `reason` says why, in
words that finish the sentence "NAME: not cached: ..." (`"it ran a subprocess (git)"`).

Kept apart from `dependencies` because it is policy, not mechanism: which events, and which of their arguments are
harmless (`sqlite3.connect(":memory:")`, ctypes loading the C library by name, or a library file that an
installed package ships, which is then a library fact like any other).
"""

from __future__ import annotations

import os
from typing import Any

#: Events that run code or read data the recorder cannot follow.
UNCACHEABLE_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.exec",
        "os.fork",
        "os.forkpty",
        "ctypes.dlopen",
        "sqlite3.connect",
        "socket.connect",
    }
)

#: Library directories of the system: a library loaded from there by absolute path belongs to the platform, as one
#: loaded by name does (the Python build and platform are part of the cache key).
SYSTEM_LIBRARY_ROOTS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")


def uncacheable_reason(event: str, args: tuple[Any, ...], roots: tuple[tuple[str, ...], tuple[str, ...]]) -> str | None:
    """Why `event` makes the count uncacheable, or None when it does not (or its arguments show it is harmless).

    `roots` is `(site-packages roots, standard-library roots)`, each ending in a separator.
    """
    if event == "subprocess.Popen":
        return f"it ran a subprocess ({_program(args[0] if args else None, args[1] if len(args) > 1 else None)})"
    if event == "os.system":
        return "it ran a shell command (os.system)"
    if event == "os.posix_spawn":
        return f"it ran a subprocess ({_program(args[0] if args else None, None)})"
    if event == "os.exec":
        return "it replaced its process (os.exec*)"
    if event in ("os.fork", "os.forkpty"):
        return "it forked a process (a multiprocessing worker, pty or os.fork)"
    if event == "ctypes.dlopen":
        return _dlopen_reason(args[0] if args else None, roots)
    if event == "sqlite3.connect":
        database = args[0] if args else None
        if database in (":memory:", "", b":memory:", b""):
            return None
        return "it opened a database with sqlite3"
    if event == "socket.connect":
        address = args[1] if len(args) > 1 else None
        if isinstance(address, tuple):  # AF_INET/AF_INET6; a local socket (a str path) reads nothing of the network
            return "it connected to the network"
        return None
    return None


def multiprocessing_reason() -> str:
    """A multiprocessing worker started by spawn or forkserver (no audit event: `_posixsubprocess` runs it)."""
    return "it started a multiprocessing worker"


def _program(executable: Any, argv: Any) -> str:
    """The program's name only: arguments can hold anything (a token on a command line)."""
    if executable is None and isinstance(argv, (list, tuple)) and argv:
        executable = argv[0]
    elif executable is None:
        executable = argv
    try:
        text = os.fsdecode(executable)
    except TypeError:
        return "a program"
    name = os.path.basename(text.split()[0]) if text.split() else ""
    return name[:60] or "a program"


def _dlopen_reason(name: Any, roots: tuple[tuple[str, ...], tuple[str, ...]]) -> str | None:
    if name is None:  # ctypes.CDLL(None): the program itself
        return None
    try:
        text = os.fsdecode(name)
    except TypeError:
        return "it loaded a native library with ctypes"
    if os.sep not in text:  # "libc.so.6", what ctypes.util.find_library returns: the platform's
        return None
    real = os.path.realpath(text)
    libraries, stdlib = roots
    if real.startswith((*libraries, *stdlib, *SYSTEM_LIBRARY_ROOTS)):
        return None  # an installed package's or the platform's library; the caller records the file
    return f"it loaded a native library with ctypes ({os.path.basename(text)[:60]})"
