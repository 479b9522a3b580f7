"""A progress line for long runs on a terminal, and silence everywhere else.

Counting a large model (or importing torch for the first one) takes seconds with nothing to show, which reads as a
hang; a bar with the model being counted and a ticking clock says it is not. The line lives on stderr and is
erased before the results are printed, so what the CLI prints on stdout is the same on a terminal and in a pipe.
It is off when stderr is not a terminal, under `TERM=dumb`, and under pre-commit (which runs hooks in a
pseudo-terminal but replays their output later, where carriage returns would be garbage).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import TextIO

CLEAR = "\r\x1b[K"
BAR_WIDTH = 20


def is_interactive(stream: TextIO) -> bool:
    """True when `stream` is a terminal a person is watching live."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False
    return tty and os.environ.get("TERM") != "dumb" and "PRE_COMMIT" not in os.environ


class Progress:
    """`[=====>      ] 2/5 counting resnet50 (3 s)`, redrawn in place while a model is counted.

    Use as a context manager: `start(label)` before each model, `advance()` after it; leaving the block erases the
    line. A background thread redraws it every `interval` seconds so the clock keeps moving while the counting
    thread is busy (it holds the GIL only between bytecodes, which is often enough for a redraw).
    """

    def __init__(self, total: int, stream: TextIO, *, enabled: bool | None = None, interval: float = 0.25) -> None:
        self.total = max(total, 1)
        self.stream = stream
        self.enabled = is_interactive(stream) if enabled is None else enabled
        self.interval = interval
        self.done = 0
        self.label = ""
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, label: str) -> None:
        """Show that `label` is being counted now."""
        if not self.enabled:
            return
        with self._lock:
            self.label = label
            self.started = time.monotonic()
            self._draw()
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="flopbudget-progress", daemon=True)
            self._thread.start()

    def advance(self) -> None:
        """One more model is finished."""
        if not self.enabled:
            return
        with self._lock:
            self.done = min(self.done + 1, self.total)
            self.label = ""
            self._draw()

    def close(self) -> None:
        """Stop redrawing and erase the line, so nothing of it stays in the terminal's scrollback."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._drawn:
                self.stream.write(CLEAR)
                self.stream.flush()
                self._drawn = False

    @property
    def drawing(self) -> threading.Lock:
        """Held while the line is drawn: hold it across `os.fork()`, so no child starts with stderr mid-write."""
        return self._lock

    def render(self) -> str:
        filled = BAR_WIDTH * self.done // self.total
        bar = "=" * filled + (">" if filled < BAR_WIDTH else "") + " " * (BAR_WIDTH - filled - 1)
        text = f"[{bar[:BAR_WIDTH]}] {self.done}/{self.total}"
        if self.label:
            text += f" counting {self.label} ({time.monotonic() - self.started:.0f} s)"
        width = shutil.get_terminal_size((80, 24)).columns - 1
        return text[:width]  # a wrapped line could not be erased with a carriage return

    def _draw(self) -> None:
        self.stream.write(CLEAR + self.render())
        self.stream.flush()
        self._drawn = True

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if self.label:
                    self._draw()
