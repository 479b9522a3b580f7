"""A signal that arrives during a count ends it, every time.

A signal's Python handler runs between two bytecodes of whatever Python code runs then, and its exception (Ctrl-C's
`KeyboardInterrupt`, a harness's `SIGALRM` timeout) is raised there. During a count much of that code is callbacks
the interpreter calls and whose exceptions it prints and ignores ("Exception ignored in ..."): weak-reference
callbacks (torch's fake-tensor tables, the peak tracker's), `__del__` methods. A signal that lands in one of them
was lost, and the count ran on: one in four, a 90 s alarm let a count run for 291 s.

`delivered_during_count()` wraps the Python handlers of the signals that interrupt (SIGINT, SIGALRM, SIGTERM,
SIGHUP, SIGVTALRM, SIGPROF) for the duration of a count: the wrapper calls the handler, and if the handler raises,
keeps the exception instead of raising it there. Raised between two bytecodes of whatever runs, it could land in
Python code that torch calls from C++ with no way to pass an exception back (autograd's `InputMetadata` reading a
fake parameter's device through the dispatch mode): C++ then calls `std::terminate` and the process aborts
("terminate called after throwing an instance of 'python_error'"), about one alarm in ten on a model with
parameters counted with grad enabled. The counting mode asks `has_pending()` before each op (never for the
device reads C++ makes) and raises the kept exception there, from the count's own code, where nothing ignores it;
a count that makes no further op raises it when it ends. A handler that does not raise (one that sets a flag) is
called once, as without the wrapper. Only the main thread can set signal handlers: elsewhere nothing is wrapped
(and no signal handler runs there either).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # Python 3.9's typing has no ParamSpec; only the annotations use it
    from typing_extensions import ParamSpec

    P = ParamSpec("P")

#: The signals whose handler is expected to stop what runs.
_INTERRUPTING = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGALRM", "SIGTERM", "SIGHUP", "SIGVTALRM", "SIGPROF")
    if hasattr(signal, name)
)


class _Guard:
    def __init__(self) -> None:
        self.depth = 0
        self.raised: BaseException | None = None
        self.wrapped: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}  # signal -> (handler, wrapper)

    def wrap(self, handler: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
        def deliver(signum: int, frame: FrameType | None) -> Any:
            try:
                return handler(signum, frame)
            except BaseException as exc:
                if self.depth == 0:  # no count runs (a wrapper left behind by an interrupted restore): as unwrapped
                    raise
                # Kept, not raised here: this bytecode may belong to Python code torch calls from C++ that cannot
                # pass an exception on (autograd's InputMetadata reading a fake tensor's device): raised there,
                # C++ calls std::terminate and the process aborts. The counting mode raises it at the next op.
                self.raised = exc
                return None

        deliver.__wrapped__ = handler  # type: ignore[attr-defined]
        return deliver


_GUARD = _Guard()
R = TypeVar("R")


def raise_pending() -> None:
    """Raise the exception a signal's handler raised during the count, if any: the count did not end with it (it
    was raised inside a callback that ignores exceptions), or is ending with it already. Kept until the count ends,
    so `from_signal` still knows it."""
    if _GUARD.raised is not None:
        raise _GUARD.raised


def from_signal(exc: BaseException) -> bool:
    """Whether `exc` is what a signal's handler raised during this count (not the model's own error)."""
    return exc is _GUARD.raised


def has_pending() -> bool:
    """Cheap: whether `raise_pending()` would raise (asked before every op)."""
    return _GUARD.raised is not None


def delivering(count: Callable[P, R]) -> Callable[P, R]:
    """`count` run within `delivered_during_count()`: a signal during it ends it."""

    @functools.wraps(count)
    def counting(*args: P.args, **kwargs: P.kwargs) -> R:
        with delivered_during_count():
            return count(*args, **kwargs)

    return counting


@contextlib.contextmanager
def delivered_during_count() -> Iterator[None]:
    """Within: every interrupting signal's Python handler is wrapped (see the module's docstring); nested counts
    share the outermost's wrappers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outermost = _GUARD.depth == 0
    if outermost:
        _GUARD.raised = None
        for signum in _INTERRUPTING:
            handler = signal.getsignal(signum)
            handler = getattr(handler, "__wrapped__", handler)  # a wrapper an interrupted restore left behind
            if callable(handler):
                wrapper = _GUARD.wrap(handler)
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(signum, wrapper)
                    _GUARD.wrapped[signum] = (handler, wrapper)
    # From here a handler's exception is kept (`deliver`), never raised between two bytecodes of this function.
    _GUARD.depth += 1
    try:
        yield
    finally:
        _GUARD.depth -= 1  # first: whatever is interrupted below, the next count starts from a sound state
        if outermost:
            for signum, (handler, wrapper) in list(_GUARD.wrapped.items()):
                if signal.getsignal(signum) is wrapper:  # a handler the count itself set stays
                    with contextlib.suppress(ValueError, OSError):
                        signal.signal(signum, handler)
            _GUARD.wrapped.clear()
    # Read after the handlers are back: a signal before that was kept, one after it raises on its own.
    swallowed = _GUARD.raised
    if outermost:
        _GUARD.raised = None
    if swallowed is not None:  # the count ran to its end past a signal: it ends with the signal's exception
        raise swallowed
