"""Which audit events make a count uncacheable, and the reason shown for each ("m: not cached: REASON")."""

from __future__ import annotations

import os

import pytest

from pytest_flopbudget._cache.uncacheable_events import UNCACHEABLE_EVENTS, uncacheable_reason

ROOTS = (("/venv/lib/python3.11/site-packages/",), ("/usr/lib/python3.11/",))


@pytest.mark.parametrize(
    ("event", "args", "reason"),
    [
        ("subprocess.Popen", ("/usr/bin/git", ["git", "show", "HEAD:w"], None, None), "it ran a subprocess (git)"),
        ("subprocess.Popen", (None, ["python", "gen.py"], None, None), "it ran a subprocess (python)"),
        ("subprocess.Popen", (None, "make weights --token=s3cret", None, None), "it ran a subprocess (make)"),
        ("os.system", (b"exit 3",), "it ran a shell command (os.system)"),
        ("os.posix_spawn", ("/bin/sh", ["sh"], {}), "it ran a subprocess (sh)"),
        ("os.exec", ("/bin/sh", ["sh"], None), "it replaced its process (os.exec*)"),
        ("os.fork", (), "it forked a process (a multiprocessing worker, pty or os.fork)"),
        ("os.forkpty", (), "it forked a process (a multiprocessing worker, pty or os.fork)"),
        ("sqlite3.connect", ("/project/widths.db",), "it opened a database with sqlite3"),
        ("sqlite3.connect", (":memory:",), None),
        ("socket.connect", (object(), ("198.51.100.1", 443)), "it connected to the network"),
        ("socket.connect", (object(), "/run/some.sock"), None),
        ("ctypes.dlopen", ("/project/build/libwidth.so",), "it loaded a native library with ctypes (libwidth.so)"),
        ("ctypes.dlopen", ("libc.so.6",), None),  # the platform's, by name
        ("ctypes.dlopen", (None,), None),  # the program itself
        ("ctypes.dlopen", ("/venv/lib/python3.11/site-packages/torch/lib/libtorch.so",), None),  # a package's
        ("ctypes.dlopen", ("/usr/lib/x86_64-linux-gnu/libgomp.so.1",), None),  # the system's
        ("open", ("/project/a", "r", 0), None),
    ],
)
def test_reasons(event: str, args: tuple[object, ...], reason: str | None) -> None:
    assert uncacheable_reason(event, args, ROOTS) == reason


def test_a_command_line_is_never_shown_only_the_program() -> None:
    reason = uncacheable_reason("subprocess.Popen", (None, ["curl", "-H", "Authorization: t0ken"], None, None), ROOTS)
    assert reason is not None and "t0ken" not in reason


def test_every_event_has_a_reason_for_some_arguments() -> None:
    samples = {"socket.connect": (None, ("h", 1)), "ctypes.dlopen": (os.path.abspath("libx.so"),)}
    for event in UNCACHEABLE_EVENTS:
        assert uncacheable_reason(event, samples.get(event, ("x", ["x"], None, None)), ROOTS), event
