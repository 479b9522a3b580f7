"""The `Recorder`: what one count reads while it runs (every file, directory listing, path probe, module lookup and
environment variable), and, when it did something no fact can describe, why it cannot be cached.
`Dependencies.capture` (dependencies.py) turns what it saw into facts.

`sys.addaudithook` sees every `open`, `os.listdir` and `os.scandir` (Python's own and every library's);
`os.stat`/`os.lstat` are watched for existence probes (`if os.path.exists("config.json")`), `os.environ` for the
variables read, `sys.meta_path` for every module looked up (found or not) and `importlib.metadata` for the
distributions looked up.

What cannot be a fact makes the count uncacheable (`Dependencies.uncacheable`, the reason): a subprocess, a fork,
a native library of the project, a database (`uncacheable_events`), a read from a FIFO. Files opened by compiled
code are recovered where they can be (`native_readers`). Who is at work decides what a listing or a scan of the
environment means: the import system's own listings are not facts (what it imports is), nor are a library's scans
of `sys.path` or of the environment; everything the project's code does is.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pytest_flopbudget._cache import native_readers
from pytest_flopbudget._cache.digests import listing_digest
from pytest_flopbudget._cache.file_roots import (
    VIRTUAL_ROOTS,
    python_roots,
    under,
)
from pytest_flopbudget._cache.uncacheable_events import (
    SYSTEM_LIBRARY_ROOTS,
    UNCACHEABLE_EVENTS,
    multiprocessing_reason,
    uncacheable_reason,
)

#: The recorder that audit events go to, if any; an audit hook cannot be removed, so one hook forwards to it.
_ACTIVE: list[Recorder] = []
_HOOK_LOCK = threading.Lock()
_HOOK_INSTALLED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _ACTIVE:
        return
    recorder = _ACTIVE[-1]
    if recorder.reading_thread == threading.get_ident():  # the recorder's own reads (a listing's digest)
        return
    if event == "open":
        path, mode, flags = args
        if _reads(mode, flags) and not _creates(path, mode, flags):
            recorder.note_file(path)
    elif event in ("os.listdir", "os.scandir"):
        actor = _actor(sys._getframe(1))
        if actor != "import":
            path = args[0] if args and args[0] is not None else "."  # os.listdir() lists the working directory
            recorder.note_listing(path, by_library=actor == "library")
    elif event in UNCACHEABLE_EVENTS:
        reason = uncacheable_reason(event, args, python_roots())
        if reason is not None and event == "subprocess.Popen" and _asks_the_platform(sys._getframe(1)):
            reason = None
        if reason is not None:
            recorder.note_uncacheable(reason)
        elif event == "ctypes.dlopen" and args and isinstance(args[0], str) and os.sep in args[0]:
            recorder.note_probe(args[0])  # an installed package's library: a library fact (a bare name: none)


def _actor(frame: Any, metadata_is_import: bool = True) -> str:
    """Who is at work in `frame`: "import" (the import system, or importlib.metadata, whose lookups are facts of
    their own), "library" (code in site-packages) or "project" (anything else).

    It is the first frame outside the standard library that decides: the import system's own listings of every
    `sys.path` directory are not dependencies (what it imports is recorded itself), but a model registry that
    calls `os.listdir` while its module is being imported is the project's code, though the import system is
    further down the stack.
    """
    libraries, stdlib = python_roots()
    through_metadata = False
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(("<frozen importlib", "<frozen zipimport")):
            return "import"
        if not name.startswith("<"):  # "<frozen os>", "<string>": see through them
            filename = _code_path(name)
            if under(filename, libraries):
                return "import" if through_metadata else "library"
            if not under(filename, stdlib):
                if filename != _THIS_FILE:
                    return "import" if through_metadata else "project"
            elif metadata_is_import and f"{os.sep}importlib{os.sep}metadata{os.sep}" in filename:
                through_metadata = True
        frame = frame.f_back
    return "import" if through_metadata else "project"


#: Standard-library modules whose subprocesses only ask what the machine is (`uname -p` for
#: `platform.processor()`, `ldconfig -p` for `ctypes.util.find_library`): the platform is part of the cache key.
PLATFORM_QUERIES = (f"{os.sep}platform.py", f"{os.sep}ctypes{os.sep}util.py")


def _asks_the_platform(frame: Any) -> bool:
    """Whether the subprocess being started comes from `PLATFORM_QUERIES` (before any code outside the standard
    library: h5py calling `platform.processor()` is fine, the project running `uname` itself is not)."""
    libraries, stdlib = python_roots()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<"):
            filename = _code_path(name)
            if under(filename, libraries) or not under(filename, stdlib):
                return False
            if filename.endswith(PLATFORM_QUERIES):
                return True
        frame = frame.f_back
    return False


_CODE_PATHS: dict[str, str] = {}


def _code_path(name: str) -> str:
    real = _CODE_PATHS.get(name)
    if real is None:
        real = _CODE_PATHS[name] = os.path.realpath(name)
    return real


def _reads(mode: Any, flags: Any) -> bool:
    """Whether an `open` can read: write-only opens (a log the model writes) are not inputs."""
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_WRONLY
    return True


def _creates(path: Any, mode: Any, flags: Any) -> bool:
    """An open that makes a new file (a temporary file, a library's own cache) reads nothing that was there."""
    creating = (
        ("x" in mode or "w" in mode or "a" in mode)
        if isinstance(mode, str)
        else bool(isinstance(flags, int) and flags & os.O_CREAT)
    )
    if not creating or isinstance(path, int):
        return False
    try:
        return not os.path.exists(path)
    except (TypeError, ValueError, OSError):
        return False


#: The environment this process started with: a count depends on a variable's value before anything in the
#: process changed it (torch sets some of its own), and that is what the next run will start with too.
INITIAL_ENVIRONMENT = dict(os.environ)


class _RecordingEnviron(os._Environ):
    """`os.environ` with every read noted. Swapped in by `__class__` so that `from os import environ` sees it too.

    A variable read by name is recorded with its value. Reading the whole environment records every value when
    the project's code does it, and nothing when a library does (tqdm scans for `TQDM_*` to style its progress
    bars): otherwise any variable of the shell, down to the terminal's, would invalidate every count.
    """

    def __getitem__(self, key: str) -> str:
        _note_env(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            _note_env(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        _note_whole_environment()
        return super().__iter__()

    def items(self) -> Any:
        _note_whole_environment()
        return dict(self._data_items()).items()

    def keys(self) -> Any:  # `dict(os.environ)`: a copy of everything, whoever takes it
        _note_whole_environment(always=True)
        return dict(self._data_items()).keys()

    def copy(self) -> dict[str, str]:  # a copy of everything, whoever takes it
        _note_whole_environment(always=True)
        return dict(self._data_items())

    def _data_items(self) -> Iterator[tuple[str, str]]:
        for key in super().__iter__():
            yield key, os._Environ.__getitem__(self, key)


def _note_env(key: Any) -> None:
    if _ACTIVE:
        if isinstance(key, bytes):  # os.environb, and os.get_exec_path's environ[b"PATH"]
            key = os.fsdecode(key)
        if isinstance(key, str):
            _ACTIVE[-1].env.add(key)


def _note_whole_environment(always: bool = False) -> None:
    """A scan (iterating, `items()`) is recorded when the project's code makes it; a copy (`copy()`,
    `dict(os.environ)`) whoever takes it: what the copy is used for later cannot be seen."""
    if not _ACTIVE:
        return
    if always or not _called_from_library():
        _ACTIVE[-1].whole_environment = True


def _called_from_library(depth: int = 3, metadata_is_import: bool = True) -> bool:
    """Whether the code at work (the first caller outside the standard library) is a library's or the import
    system's: tqdm scans the environment for `TQDM_*` at import; recording that scan would recount every model
    whenever any variable is added to the shell. Only the project's own scans are recorded."""
    return _actor(sys._getframe(depth), metadata_is_import) != "project"


_THIS_FILE = os.path.realpath(__file__)


def _absolute(path: str) -> str:
    """The absolute path of the file the kernel opens for `path`. `os.path.abspath` removes `..` by the text, which
    names another file when a directory before it is a link (`models/../configs/w.json` with `models` a link to
    another checkout's `models` reads that checkout's `configs/w.json`): up to the last `..` the path is resolved
    (the links on the way are probed, so retargeting one is a change too), after it normalised as text, so a
    final link stays a link."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    parts = joined.split(os.sep)
    if os.pardir not in parts:
        return os.path.normpath(joined)
    last = len(parts) - 1 - parts[::-1].index(os.pardir)
    prefix = os.sep.join(parts[: last + 1]) or os.sep
    return os.path.normpath(os.path.join(os.path.realpath(prefix), *parts[last + 1 :]))


class Recorder:
    """Notes what runs inside `with recorder:` reads. Nested or repeated use is fine; one records at a time."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        #: listed directory -> the digest of its names when it was first listed (compared again at capture)
        self.listings: dict[str, str] = {}
        self.probes: set[str] = set()
        self.env: set[str] = set()
        self.whole_environment = False
        #: distribution lookups (importlib.metadata): query -> digest of what was found
        self.distribution_queries: dict[str, str] = {}
        #: why this count cannot be cached (`"it ran a subprocess"`), or None: a read no fact can describe
        self.uncacheable: str | None = None
        #: the thread in which the recorder is reading something itself (its own reads are not recorded)
        self.reading_thread: int | None = None
        self.started_ns = 0
        self._saved: list[tuple[Any, ...]] = []
        self._held: list[set[str]] = []

    def note_file(self, path: Any) -> None:
        if isinstance(path, int):  # os.open on a descriptor: the file was noted when it was opened by name
            return
        with contextlib.suppress(TypeError, ValueError):
            self.files.add(_absolute(os.fsdecode(path)))

    def note_listing(self, path: Any, by_library: bool = False) -> None:
        """A directory listed. A library's listing of a `sys.path` directory or of the Python installation is an
        entry-point scan, not a dependency (the modules it finds are recorded themselves); everything else is."""
        if isinstance(path, int):  # a descriptor (os.fwalk, shutil.rmtree): see the docs' limitations
            return
        with contextlib.suppress(TypeError, ValueError):
            path = _absolute(os.fsdecode(path))
            if path in self.listings or (by_library and _is_path_scan(path)):
                return
            with self.reading_itself():
                self.listings[path] = listing_digest(path)

    @contextlib.contextmanager
    def reading_itself(self) -> Iterator[None]:
        """What this thread reads inside is the recorder's own business, not the count's."""
        outer, self.reading_thread = self.reading_thread, threading.get_ident()
        try:
            yield
        finally:
            self.reading_thread = outer

    def note_uncacheable(self, reason: str) -> None:
        """The count did something whose effect on it no fact can describe; the first reason is the one shown."""
        if self.uncacheable is None:
            self.uncacheable = reason

    def note_probe(self, path: Any) -> None:
        if isinstance(path, int):
            return
        with contextlib.suppress(TypeError, ValueError):
            self.probes.add(_absolute(os.fsdecode(path)))

    def note_distribution_query(self, query: str, digest: str) -> None:
        self.distribution_queries.setdefault(query, digest)

    def __enter__(self) -> Recorder:
        _install_hook()
        if not _ACTIVE:
            _patch_unhooked_readers()
        self._held.append(self._held_files())
        _ACTIVE.append(self)
        self.started_ns = time.time_ns()
        self._saved.append((os.environ.__class__, os.environb.__class__, os.stat, os.lstat, os.access, os.readlink))
        os.environ.__class__ = _RecordingEnviron
        os.environb.__class__ = _RecordingEnviron
        os.stat = _probing(os.stat)
        os.lstat = _probing(os.lstat)
        os.access = _probing(os.access)
        os.readlink = _probing(os.readlink)  # the link's target is part of a probed path's fact
        self._finder = _ModuleLookups(self)
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc: object) -> None:
        environ_class, environb_class, os.stat, os.lstat, os.access, os.readlink = self._saved.pop()
        os.environ.__class__ = environ_class
        os.environb.__class__ = environb_class
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self._finder)
        for path in self._held_files() - self._held.pop():  # opened or mapped natively, and still held
            self.note_file(path)
        _ACTIVE.remove(self)
        if not _ACTIVE:
            _unpatch_unhooked_readers()

    def _held_files(self) -> set[str]:
        """The files held open for reading or mapped, outside the Python installation and the system's libraries
        (the count's own shared libraries are modules, recorded as such)."""
        with self.reading_itself():
            held = native_readers.held_files()
        libraries, stdlib = python_roots()
        ignored = (*libraries, *stdlib, *SYSTEM_LIBRARY_ROOTS, *VIRTUAL_ROOTS)
        return {path for path in held if not path.startswith(ignored)}


def _is_path_scan(path: str) -> bool:
    real = os.path.realpath(path)
    libraries, stdlib = python_roots()
    if under(real + os.sep, libraries + stdlib):
        return True
    return real in {os.path.realpath(e or ".") for e in sys.path if isinstance(e, str)}


class _ModuleLookups(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path` while recording: asks the finders after it, as the import system would, and notes
    where the module was found or could have been, so that what decided an import (or an
    `importlib.util.find_spec` that imports nothing) is a fact:

    - found in a file: that file (an uninstalled optional package is a change even if it was never imported);
    - a package or namespace package: its directories' `__init__` files, so a namespace package that gains an
      `__init__.py` recounts, and for a namespace package every other place a portion of it could appear;
    - not found: every place it could appear (`try: import fastimpl` recounts when `fastimpl.py` is created or the
      package is installed).
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        finders = sys.meta_path
        index = next((i for i, finder in enumerate(finders) if finder is self), None)
        if index is None:
            return None
        for finder in list(finders[index + 1 :]):
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                self._found(name, path, spec)
                if name in native_readers.READERS and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenWrapReaders(spec.loader)
                return spec
        self._candidates(name, path)
        return None

    def _found(self, name: str, path: Any, spec: Any) -> None:
        if spec.origin and getattr(spec, "has_location", False):
            self.recorder.note_probe(spec.origin)
        locations = spec.submodule_search_locations
        if locations is None:
            return
        suffixes = importlib.machinery.all_suffixes()
        for directory in list(locations):
            if isinstance(directory, str):
                for suffix in suffixes:
                    self.recorder.note_probe(os.path.join(directory, "__init__" + suffix))
        if spec.origin is None:  # a namespace package: a portion may appear in any other directory
            self._candidates(name, path)

    def _candidates(self, name: str, path: Any) -> None:
        leaf = name.rpartition(".")[2]
        directories = list(path) if path is not None else list(sys.path)
        suffixes = importlib.machinery.all_suffixes()
        for directory in directories:
            if not isinstance(directory, str):
                continue
            base = os.path.join(directory or os.getcwd(), leaf)
            self.recorder.note_probe(base)
            for suffix in suffixes:
                self.recorder.note_probe(base + suffix)


# -- reads that raise no audit event -------------------------------------------------------------------------------

_UNPATCHED: dict[str, Any] = {}


def _patch_unhooked_readers() -> None:
    """`importlib.metadata` lookups (served from caches the parent process filled, so no listing is seen) become
    facts of their own; a multiprocessing worker started by spawn or forkserver makes the count uncacheable."""
    import importlib.metadata as metadata
    import multiprocessing.util as mp_util

    _UNPATCHED["discover"] = metadata.Distribution.__dict__["discover"]
    _UNPATCHED["spawnv_passfds"] = mp_util.spawnv_passfds
    metadata.Distribution.discover = classmethod(_recorded_discover)  # type: ignore[method-assign,assignment]
    mp_util.spawnv_passfds = _recorded_spawn
    native_readers.wrap_loaded(_note_native_read)


def _unpatch_unhooked_readers() -> None:
    import importlib.metadata as metadata
    import multiprocessing.util as mp_util

    if "discover" in _UNPATCHED:
        metadata.Distribution.discover = _UNPATCHED.pop("discover")  # type: ignore[method-assign]
    if "spawnv_passfds" in _UNPATCHED:
        mp_util.spawnv_passfds = _UNPATCHED.pop("spawnv_passfds")
    native_readers.unwrap_all()


def _note_native_read(path: Any) -> None:
    if _ACTIVE:
        _ACTIVE[-1].note_file(path)


class _ThenWrapReaders:
    """A module's loader that, once the module has run, wraps its native readers (`native_readers.READERS`)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        if _ACTIVE:
            native_readers.wrap_module(module, _note_native_read)


def _recorded_discover(cls: Any, **kwargs: Any) -> Any:
    original = _UNPATCHED.get("discover") or cls.__dict__.get("discover")
    found = list(original.__get__(None, cls)(**kwargs))
    if _ACTIVE:
        context = kwargs.get("context")
        name = getattr(context, "name", None) if context is not None else kwargs.get("name")
        path = getattr(context, "path", None) if context is not None else kwargs.get("path")
        if name is not None or not _called_from_library(
            2, metadata_is_import=False
        ):  # a library's scan of everything: entry points
            query = json.dumps([name, [p for p in (sys.path if path is None else path) if isinstance(p, str)]])
            _ACTIVE[-1].note_distribution_query(query, _distributions_digest(found))
    return iter(found)


def _recorded_spawn(path: Any, args: Any, passfds: Any) -> Any:
    if _ACTIVE:
        _ACTIVE[-1].note_uncacheable(multiprocessing_reason())
    return _UNPATCHED["spawnv_passfds"](path, args, passfds)


def distribution_query_digest(query: str) -> str:
    """What a recorded `importlib.metadata` lookup finds now."""
    from importlib.metadata import Distribution

    name, path = json.loads(query)
    discover = _UNPATCHED.get("discover")
    found = (
        discover.__get__(None, Distribution)(name=name, path=path)
        if discover
        else Distribution.discover(name=name, path=path)
    )
    return _distributions_digest(list(found))


def _distributions_digest(found: Iterable[Any]) -> str:
    """The distributions found, by location (a `.dist-info` directory's name holds the version)."""
    locations = sorted(str(getattr(dist, "_path", type(dist).__qualname__)) for dist in found)
    return hashlib.sha256("\0".join(locations).encode("utf-8", "surrogateescape")).hexdigest()


def _probing(function: Any) -> Any:
    def probe(path: Any, *args: Any, **kwargs: Any) -> Any:
        if _ACTIVE and _ACTIVE[-1].reading_thread != threading.get_ident():  # not the recorder's own (a listing's)
            _ACTIVE[-1].note_probe(path)
        return function(path, *args, **kwargs)

    probe.__wrapped__ = function  # type: ignore[attr-defined]
    return probe


def _install_hook() -> None:
    global _HOOK_INSTALLED
    with _HOOK_LOCK:
        if not _HOOK_INSTALLED:
            sys.addaudithook(_audit)
            _HOOK_INSTALLED = True
