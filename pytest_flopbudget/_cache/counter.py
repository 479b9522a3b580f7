"""Count each model in a process of its own, and answer from the count cache when nothing it read has changed.

Models are counted in children forked (on Linux), one per model, with the cache and without it (`--no-cache`):
what one model's import does (a global set in a shared helper module, a registry filled) can never change another
model's count, and a model's figures do not depend on which other models the cache answered. A model that crashes
the interpreter fails alone, as a model error. Each child sends back the Report (and, with the cache, what the
count read) as JSON.

Every model starts from the same state, whatever else is counted: torch imported and the counting backend warmed
up (once, in this process), plus the installed libraries its own module imports at its top (`library_imports`,
read from the source without running it). Those libraries are imported in an intermediate process forked for the
models of one module, which then forks one child per model: two transformers models of one module cost one
transformers import, not two, and a model whose module imports no heavy library never waits for one.

    check ─ fork ─> libraries of module A ─ fork ─> model A1
                                          └ fork ─> model A2
          └ fork ─> libraries of module B ─ fork ─> model B1

What a count reads can only be seen while it runs (`recorder.Recorder`), and only what is *loaded* during that
time is seen; everything a model's code loads is loaded, and seen, in its child, and what the processes above it
loaded is recorded there once and added to the record.

With `flopbudget check -j N`, up to N of those processes run at once (`IsolatedCounter.count_ahead`): each
module's models cut into at most N parts, a process per part, the answers handed out in the plan's order.

Where there is no fork (other platforms) everything is counted in this process, one model after the other, and
the cache is off: a cached answer for one model would skip its import, which a later model's count could see.
The same holds where this process must not be forked (`fork_safety`: jax's backend is running in it); and where a
module's libraries start jax's backend when imported, the process made for them forks nothing, and each model's
child imports them itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import warnings
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_flopbudget._cache.children import HEADER, Reply, die_with_parent, receive, wait_any
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._cache.fork_safety import fork_hazard
from pytest_flopbudget._cache.recorder import Recorder
from pytest_flopbudget._cache.store import CountCache, Lookup, entry_key
from pytest_flopbudget._config.location import display_path
from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._errors import CountingError, FlopBudgetError
from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._report import Report

if TYPE_CHECKING:
    from pytest_flopbudget._curve.formula import Formula


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _module_of(entry: ModelEntry) -> str:
    from pytest_flopbudget._backends import backend_for

    return "" if backend_for(entry).files else entry.target.partition(":")[0]


class IsolatedCounter:
    """`count(entry, root) -> Report`, each model in a child forked for it; with `record`, also what it read.
    A `run.Counter`.

    `plan(entries, root)` names the models that will be counted, so the models of one module share one process
    that imported their libraries; a model counted without a plan is counted alone.
    """

    def __init__(self, root: Path | None = None, *, record: bool) -> None:
        self.record = record
        self.root = root
        self._torch = Dependencies()  # what this process loaded for every child (torch, the backend)
        self._torch_modules: set[str] = set()
        self._ready = False
        self._planned: list[ModelEntry] = []
        self._root: Path | None = None
        self._done: dict[str, tuple[bytes, int, Dependencies | None]] = {}  # name -> payload, status, shared
        self._formulas: dict[str, Formula] = {}  # name -> the formula a curve count sent back
        #: Held across each fork (the progress line's lock), so no child starts with a stream mid-write.
        self.fork_guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    def plan(self, entries: Sequence[ModelEntry], root: Path) -> None:
        self._planned = list(entries)
        self._root = root

    def mismatch_of(self, name: str) -> str | None:
        return None  # no cache, nothing to disagree with

    @property
    def mismatches(self) -> Sequence[tuple[str, str]]:
        return ()

    def notes(self, total: int) -> list[str]:
        return []

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        return self.count(entry, root)[0]

    def count(self, entry: ModelEntry, root: Path) -> tuple[Report, Dependencies | None]:
        """The Report, and what the count read (None when not recording, or when it could not be captured)."""
        if entry.name not in self._done:
            module = _module_of(entry)
            group = [e for e in self._planned if _module_of(e) == module and e.name not in self._done]
            self._count_group(group if entry in group else [entry], root)
        payload, status, shared = self._done.pop(entry.name)
        report, dependencies, formula = _answer(entry, payload, status)
        if formula is not None:
            self._formulas[entry.name] = formula
        if dependencies is not None:
            if shared is None:  # the libraries' reads could not be recorded: neither can this count's
                return report, None
            dependencies.merge(shared)
            dependencies.merge(self._torch)
        return report, dependencies

    def count_curve(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
        """The count at the entry's point and its formula (`curve.engine.count_curve`), in the model's child."""
        report, formula, _ = self.count_with_formula(entry, root)
        return report, formula

    def count_with_formula(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula, Dependencies | None]:
        """`count_curve`, and what the count (every point of the curve) read, as `count` gives it."""
        report, dependencies = self.count(entry, root)
        formula = self._formulas.pop(entry.name, None)
        if formula is None:
            raise CountingError(f"{entry.source.where()}: its count sent back no formula")
        return report, formula, dependencies

    def _prepare(self) -> None:
        """Import torch and warm the backend up once, before the first fork, so that every child starts warm.

        The first count in a process imports and initialises much of torch on first use (fake tensors, the
        dispatcher's Python kernels); counting a two-layer model here pays for that once instead of in every child.
        """
        if self._ready:
            return
        self._ready = True
        recorder = Recorder()
        with recorder if self.record else contextlib.nullcontext(), contextlib.suppress(Exception):
            import torch

            from pytest_flopbudget._backends import count

            count(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), torch.zeros(1, 2))
        if self.record:
            self._torch = Dependencies.capture(recorder)
        self._torch_modules = set(sys.modules)

    def count_ahead(self, jobs: int) -> None:
        """Count every planned model not counted yet, in up to `jobs` processes at once (`flopbudget check -j`), so
        that the `count` calls that follow, in the plan's order, are answered from what came back.

        A pool, no scheduler: each module's models are cut into at most `jobs` parts (`partition`), and a process
        per part, forked from this one (torch imported once, here), imports the module's libraries and counts its
        models one by one, exactly as without `-j`. Whatever order they finish in, each model's answer is its own.
        Where this process may not be forked (`fork_safety`), nothing is counted ahead: each model is then counted
        when asked for, in this process, as without `-j`.
        """
        pending = [entry for entry in self._planned if entry.name not in self._done]
        parts = partition(pending, jobs, _module_of)
        root = self._root
        if jobs < 2 or len(parts) < 2 or root is None or fork_hazard() is not None:
            return
        queue = deque((group, self._imports(group, root)) for group in parts)
        running: list[tuple[list[ModelEntry], Any, Reply]] = []
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    group, imports = queue.popleft()
                    running.append((group, imports, self._start_group(group, root, imports)))
                finished = wait_any([reply for _, _, reply in running])
                for item in [item for item in running if item[2] in finished]:
                    running.remove(item)
                    group, imports, reply = item
                    if not self._finish_group(group, *reply.result(), imports):
                        queue.append((group, []))  # the libraries started jax: each model's child imports them
        except BaseException:  # a Ctrl-C (or our own bug): no process may count on
            for _, _, reply in running:
                reply.kill()
            raise

    def _count_group(self, group: list[ModelEntry], root: Path) -> None:
        """Count the models of one module: a process imports their libraries, then forks one child per model.

        Where this process may not be forked (`fork_safety`), the models are counted in it, unrecorded; where the
        libraries' import started a runtime that makes the process for them unfit to fork (jax's backend), that
        process forks nothing and says so, and the models are counted again with each child importing them."""
        hazard = fork_hazard()
        if hazard is not None:
            for entry in group:
                self._done[entry.name] = _in_process(entry, root, hazard)
            return
        imports = self._imports(group, root)
        reply = self._start_group(group, root, imports)
        if not self._finish_group(group, *receive(reply.read_end, reply.pid), imports):
            reply = self._start_group(group, root, [])  # the libraries started jax: each model's child imports them
            self._finish_group(group, *receive(reply.read_end, reply.pid), [])

    def _imports(self, group: list[ModelEntry], root: Path) -> Any:
        """The installed libraries the group's module imports at its top (read from its source, before anything
        is recorded); torch imported and warmed up here first when the group has a module."""
        from pytest_flopbudget._cache.library_imports import library_imports

        module = _module_of(group[0])
        if not module:
            return []
        imports = library_imports([module], [str(root)])
        self._prepare()
        return imports

    def _start_group(self, group: list[ModelEntry], root: Path, imports: Any) -> Reply:
        """Fork the process that imports `imports` and counts `group` (`_libraries_then_models`); its reply comes
        on the pipe returned."""
        for stream in (sys.stdout, sys.stderr):  # what is buffered would otherwise be written twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        read_end, write_end = os.pipe()
        parent = os.getpid()
        with self.fork_guard, warnings.catch_warnings():  # 3.12+ warns about fork in a threaded process (torch's)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage of it is the parent's assertions
            os.close(read_end)
            die_with_parent(parent)
            _libraries_then_models(group, root, imports, write_end, self._torch_modules if self.record else None)
        os.close(write_end)
        return Reply(read_end, pid)

    def _finish_group(self, group: list[ModelEntry], payload: bytes, status: int, imports: Any) -> bool:
        """Keep what the process of `group` sent back, per model, for `count` to hand out; False (and nothing
        kept) when that process found itself unfit to fork (its `imports` started jax's backend)."""
        try:
            message = json.loads(payload) if payload else None
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("unfit") and imports:
            return False
        results = message.get("results") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(results, dict):  # it died, or was interrupted
            for entry in group:
                self._done[entry.name] = (payload if isinstance(message, dict) else b"", status, None)
            return True
        shared = message.get("shared")
        libraries = Dependencies.from_dict(shared) if isinstance(shared, dict) else None
        for entry in group:
            answer = results.get(entry.name)
            if isinstance(answer, list) and len(answer) == 2:
                self._done[entry.name] = (str(answer[0]).encode(), int(answer[1]), libraries)
            else:
                self._done[entry.name] = (b"", status, None)
        return True


def partition(entries: Sequence[ModelEntry], jobs: int, module_of: Any) -> list[list[ModelEntry]]:
    """`entries` in parts for `jobs` processes: the models of one module (`module_of`) together, as without `-j`,
    cut into at most `jobs` runs of consecutive models, so one module's many models still spread over every
    process; the largest parts first, so that a long one does not start last. Deterministic."""
    modules: dict[str, list[ModelEntry]] = {}
    for entry in entries:
        modules.setdefault(module_of(entry), []).append(entry)
    parts = []
    for models in modules.values():
        size = -(-len(models) // max(jobs, 1))
        parts += [models[start : start + size] for start in range(0, len(models), size)]
    return sorted(parts, key=len, reverse=True)  # stable: equal sizes keep the plan's order


def _libraries_then_models(  # pragma: no cover - a child; coverage of it is the parent's assertions
    group: list[ModelEntry], root: Path, imports: Any, write_end: int, loaded_before: set[str] | None
) -> None:
    """In the process forked for one module: import its libraries (recording what that read when
    `loaded_before` is given), fork a child per model, and send `{"results": {name: [payload, status]},
    "shared": dependencies}` back; never returns."""
    from pytest_flopbudget._cache.library_imports import import_all

    code = 0
    message: dict[str, Any]
    try:
        recorder = Recorder()
        with recorder if loaded_before is not None else contextlib.nullcontext():
            import_all(imports)
        shared = None
        if loaded_before is not None:
            with contextlib.suppress(Exception):
                loaded = [module for name, module in list(sys.modules.items()) if name not in loaded_before]
                shared = Dependencies.capture(recorder, loaded).to_dict()
        now_loaded = set(sys.modules)
        results: dict[str, list[Any]] = {}
        if fork_hazard() is not None:  # the libraries started jax: the parent counts them otherwise
            group = []
        for entry in group:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            read_end, child_end = os.pipe()
            lane = os.getpid()
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                os.close(write_end)  # a process the model leaves running must not hold the parent's pipe
                die_with_parent(lane)
                _child(entry, root, child_end, now_loaded if loaded_before is not None else None)
            os.close(child_end)
            payload, status = receive(read_end, pid)
            results[entry.name] = [payload.decode("utf-8", "replace"), status]
        message = {"results": results, "shared": shared} if group else {"unfit": True}
    except KeyboardInterrupt:
        message, code = {"interrupted": True}, 130
    except BaseException as exc:  # an internal error: the parent reports it for every model of the group
        message = {"internal": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    try:
        data = json.dumps(message).encode()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(len(data).to_bytes(HEADER, "big") + data)
    finally:
        os._exit(code)


class CachedCounter:
    """`count(entry, root) -> Report`, a `run.Counter`: from the cache on a hit, else counted and recorded.

    With `verify`, every model is counted even when its record would have answered, and a record that would have
    answered differently is kept in `mismatches` (the check fails on it).
    """

    def __init__(self, cache: CountCache, counter: IsolatedCounter | None = None, *, verify: bool = False) -> None:
        self.cache = cache
        self.counter = counter if counter is not None else IsolatedCounter(record=True)
        self.verify = verify
        self._lookups: dict[str, Lookup] = {}
        self.hits: list[str] = []
        #: (model, why no record was kept): `it ran a subprocess`, `x.py changed while it was counted`
        self.not_cached: list[tuple[str, str]] = []
        #: (model, why its record was not believed)
        self.untrusted: list[tuple[str, str]] = []
        #: (model, how the record's answer differs from the fresh count), in verify mode
        self.mismatches: list[tuple[str, str]] = []

    def mismatch_of(self, name: str) -> str | None:
        """How `name`'s record differs from its fresh count (verify mode), or None when it agreed or had none."""
        return next((difference for model, difference in self.mismatches if model == name), None)

    @property
    def fork_guard(self) -> contextlib.AbstractContextManager[Any]:
        return self.counter.fork_guard

    @fork_guard.setter
    def fork_guard(self, guard: contextlib.AbstractContextManager[Any]) -> None:
        self.counter.fork_guard = guard

    def plan(self, entries: Sequence[ModelEntry], root: Path) -> None:
        """Look every model up first, so the models to be counted are known (and share their libraries' process)."""
        for entry in entries:
            self._lookups[entry.name] = self.cache.lookup(entry_key(entry.table, root))
        self.counter.plan([e for e in entries if self.verify or self._answer(e, self._lookups[e.name]) is None], root)

    def count_ahead(self, jobs: int) -> None:
        """The planned models the cache cannot answer, counted now in up to `jobs` processes at once."""
        self.counter.count_ahead(jobs)

    def notes(self, total: int) -> list[str]:
        """What the check says about the cache after counting `total` models: a write it could not do, the records
        not trusted or not kept, and how many models it answered."""
        lines = []
        if self.cache.write_error:
            lines.append(f"flopbudget: warning: {self.cache.write_error}")
        lines += [
            f"flopbudget: {name}: cached count not trusted ({reason}): counted again" for name, reason in self.untrusted
        ]
        lines += [f"flopbudget: {name}: not cached: {reason}" for name, reason in self.not_cached]
        if self.hits:
            shown = display_path(str(self.cache.directory))
            lines.append(
                f"flopbudget: {len(self.hits)} of {total} models unchanged since their cached count ({shown}; "
                f"--no-cache recounts them)"
            )
        return lines

    @staticmethod
    def _answer(entry: ModelEntry, found: Lookup) -> tuple[Report, Formula | None] | None:
        """What a record answers for `entry`: its Report, with the formula for a model with a curve (a record
        without one answers nothing for it: a budget on the curve is never judged without its formula)."""
        if found.report is None or (entry.curve and found.formula is None):
            return None
        return found.report, found.formula

    def __call__(self, entry: ModelEntry, root: Path) -> Report:
        return self._count(entry, root, curve=False)[0]

    def count_curve(self, entry: ModelEntry, root: Path) -> tuple[Report, Formula]:
        """A count with a curve: its Report at the entry's point and its formula, from one record. The record is
        kept under the same rules as a point count's: every point of the curve is counted in the model's child,
        so what any of them read is in its facts, and the key holds the curve's range and dims."""
        report, formula = self._count(entry, root, curve=True)
        if formula is None:  # pragma: no cover - _count gives a formula for a curve
            raise CountingError(f"{entry.source.where()}: its count sent back no formula")
        return report, formula

    def _count(self, entry: ModelEntry, root: Path, *, curve: bool) -> tuple[Report, Formula | None]:
        key = entry_key(entry.table, root)
        found = self._lookups.pop(entry.name, None) or self.cache.lookup(key)
        if found.untrusted is not None:
            self.untrusted.append((entry.name, found.untrusted))
        answer = self._answer(entry, found) if curve or not entry.curve else None
        if answer is not None and not self.verify:
            self.hits.append(entry.name)
            return answer
        formula: Formula | None = None
        if curve:
            report, formula, dependencies = self.counter.count_with_formula(entry, root)
        else:
            report, dependencies = self.counter.count(entry, root)
        if answer is not None:
            difference = report_difference(answer[0], report) or _formula_difference(answer[1], formula)
            if difference is not None:
                self.mismatches.append((entry.name, difference))
        reason = not_cacheable(dependencies)
        if reason is None and dependencies is not None:
            self.cache.save(key, entry.name, report, dependencies, formula)
        else:
            self.not_cached.append((entry.name, reason or "what it read could not be recorded"))
            self.cache.discard(key)  # an older record must not answer for it either
        return report, formula


def _formula_difference(cached: Formula | None, fresh: Formula | None) -> str | None:
    """How a record's formula differs from the fresh count's (`formula cached ..., counted ...`), or None."""
    old = _plain(cached.to_dict()) if cached is not None else None
    new = _plain(fresh.to_dict()) if fresh is not None else None
    if old == new:
        return None
    return "formula " + _first_difference(old, new, "")


def not_cacheable(dependencies: Dependencies | None) -> str | None:
    """Why a count with these dependencies must not be kept, or None when it may be."""
    if dependencies is None:
        return "what it read could not be recorded"
    if dependencies.uncacheable:
        return dependencies.uncacheable
    if dependencies.unstable:
        return f"{display_path(dependencies.unstable[0])} changed while it was counted"
    return None


def report_difference(cached: Report, fresh: Report) -> str | None:
    """The first figure in which two Reports differ (`flops 356 cached, 712 counted`), or None when equal."""
    old, new = _plain(cached.to_dict()), _plain(fresh.to_dict())
    if old == new:
        return None
    for name in METRICS.counted:
        if old["totals"].get(name) != new["totals"].get(name):  # an optional metric may be not measured
            return f"{name} {old['totals'].get(name)} cached, {new['totals'].get(name)} counted"
    return _first_difference(old, new, "")


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data, sort_keys=True))


def _first_difference(old: Any, new: Any, where: str) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for name in sorted(set(old) | set(new)):
            path = f"{where}.{name}" if where else str(name)
            if name not in old:
                return f"{path} only in the fresh count"
            if name not in new:
                return f"{path} only in the cached count"
            if old[name] != new[name]:
                return _first_difference(old[name], new[name], path)
    return f"{where} {json.dumps(old)[:80]} cached, {json.dumps(new)[:80]} counted"


def _in_process(entry: ModelEntry, root: Path, hazard: str) -> tuple[bytes, int, Dependencies | None]:
    """The model counted in this process, as its child would send it, and a record that must not be kept: what
    it read is not seen where other models' counts loaded things before it."""
    message, code = _message(entry, root, None)
    if code:
        raise KeyboardInterrupt
    if "report" in message:
        unrecorded = Dependencies(uncacheable=f"it was counted in the checking process, since {hazard}")
        message["dependencies"] = unrecorded.to_dict()
    return json.dumps(message).encode(), 0, Dependencies()


def _child(entry: ModelEntry, root: Path, write_end: int, shared: set[str] | None) -> None:  # pragma: no cover
    """Count in the child and send `_message`'s answer back; never returns."""
    message, code = _message(entry, root, shared)
    try:
        data = json.dumps(message).encode()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(len(data).to_bytes(HEADER, "big") + data)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def _message(entry: ModelEntry, root: Path, shared: set[str] | None) -> tuple[dict[str, Any], int]:
    """Count and say `{"report", "dependencies", "formula"}` or `{"error"}` (and the exit code, 130 when
    interrupted). With `shared` (the modules the parent had loaded), what the count read is recorded too."""
    code = 0
    message: dict[str, Any]
    try:
        from pytest_flopbudget._backends import count_entry

        recorder = Recorder()
        formula = None
        with recorder if shared is not None else contextlib.nullcontext():
            if entry.curve:  # the formula too (run.Run.count asks for it with `count_curve`)
                from pytest_flopbudget._curve.engine import count_curve

                report, formula = count_curve(entry, root)
            else:
                report = count_entry(entry, root)
        message = {"report": report.to_dict(), "dependencies": None}
        if formula is not None:
            message["formula"] = formula.to_dict()
        try:
            if shared is not None:
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
    return message, code


def _answer(entry: ModelEntry, payload: bytes, status: int) -> tuple[Report, Dependencies | None, Formula | None]:
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
    formula = None
    if message.get("formula") is not None:
        from pytest_flopbudget._curve.formula import Formula

        formula = Formula.from_dict(message["formula"])
    report = Report.from_dict(message["report"])
    return report, (Dependencies.from_dict(dependencies) if dependencies else None), formula


class _Relayed(CountingError):
    """A model error raised in the child, with its message exactly as the child wrote it."""
