"""What one count read, as facts: every file, directory listing, path probe, module lookup and environment
variable, so a cached count can prove it is still right; and, when it did something no fact can describe, why it
cannot be cached.

A count is a function of the model's code and data files, the libraries it ran on, and the environment. The
`Recorder` (recorder.py) watches all of it while a model is built and counted. At the end, `Dependencies.capture`
adds every imported module's file and turns it all into facts (digests.py) that can be checked later without
importing anything:

- a project file (anything outside the Python installation and its site-packages): its sha256, or its absence, or
  its kind when it is a directory, FIFO, socket or device (which are never opened);
- a library file (inside site-packages): its size and mtime, and each imported distribution's `.dist-info`
  directory, whose name carries the version, so an upgrade or reinstall changes a fact; a path probed there that
  is absent (an optional package looked for) is a fact too;
- a listed directory: the sorted names in it (and if they changed while the count ran, the record is unstable);
- an `importlib.metadata` lookup: which distributions it found;
- an environment variable: a sha256 of its value (or that it was unset); never the value.

What cannot be a fact makes the count uncacheable (`Dependencies.uncacheable`, the reason; recorder.py says what).

`Dependencies.changed()` re-checks the facts and names the first one that no longer holds. The standard library is
not listed: the Python version is part of the cache key.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_flopbudget._cache.digests import (
    NOT_REGULAR,
    WHOLE_ENVIRONMENT,
    env_digest,
    environment_digest,
    file_digest,
    library_fact,
    listing_digest,
    modified_since,
    owning_distributions,
)
from pytest_flopbudget._cache.file_roots import (
    is_bytecode,
    is_virtual,
    python_roots,
    real_path,
    under,
)
from pytest_flopbudget._cache.recorder import INITIAL_ENVIRONMENT, Recorder, distribution_query_digest

# -- the facts ------------------------------------------------------------------------------------------------------


@dataclass
class Dependencies:
    """Checkable facts about everything a count read. Plain data, so it is stored as JSON next to the Report."""

    #: project file -> sha256 of its content, or "" when it did not exist
    files: dict[str, str] = field(default_factory=dict)
    #: library file -> [size, mtime_ns]
    libraries: dict[str, list[int]] = field(default_factory=dict)
    #: imported distributions' .dist-info directories (their names carry the versions)
    distributions: list[str] = field(default_factory=list)
    #: listed directory -> sha256 of its sorted names, or "" when it did not exist
    listings: dict[str, str] = field(default_factory=dict)
    #: environment variable -> sha256 of its value (`env_digest`), or None when unset: never the value itself
    env: dict[str, str | None] = field(default_factory=dict)
    #: files changed while the count ran: the record could describe either version, so it is not kept
    unstable: list[str] = field(default_factory=list)
    #: why no record may be kept (`"it ran a subprocess"`), or None when every input is described by a fact above
    uncacheable: str | None = None
    #: importlib.metadata lookups ([name or null, search path] as JSON) -> digest of the distributions found
    distribution_queries: dict[str, str] = field(default_factory=dict)

    @classmethod
    def capture(cls, recorder: Recorder, modules: Iterable[Any] | None = None) -> Dependencies:
        """The facts as they are now, for what `recorder` saw and every module in `modules` (default: all loaded)."""
        libraries, stdlib = python_roots()
        deps = cls()
        deps.uncacheable = recorder.uncacheable
        paths = set(recorder.files) | set(recorder.probes)
        for module in list(sys.modules.values()) if modules is None else modules:
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                paths.add(os.path.abspath(path))
        for path in sorted(paths):
            real = real_path(path)
            standard = under(real, stdlib) and not under(real, libraries)
            if standard or is_virtual(real) or is_bytecode(real):
                continue
            if under(real, libraries):
                fact = library_fact(real)
                if fact is not None:
                    deps.libraries[real] = fact
                elif path in recorder.files or path in recorder.probes:  # absent, or a directory: what it is
                    deps.files[path] = file_digest(path)
            else:  # a file's sha256, "" when absent, "directory" for a probed directory
                deps.files[path] = digest = file_digest(path)
                if path in recorder.files and digest.startswith(NOT_REGULAR):
                    deps.uncacheable = deps.uncacheable or f"it read {digest[len(NOT_REGULAR) :]} {path}"
                if recorder.started_ns and modified_since(path, recorder.started_ns):
                    deps.unstable.append(path)
        for path, seen in sorted(recorder.listings.items()):
            if is_virtual(os.path.realpath(path) + os.sep):
                continue
            deps.listings[path] = listing_digest(path)
            if deps.listings[path] != seen:  # a file added or removed while the count ran
                deps.unstable.append(path)
        deps.distribution_queries = dict(sorted(recorder.distribution_queries.items()))
        deps.distributions = sorted(owning_distributions(deps.libraries, libraries))
        deps.env = {name: env_digest(INITIAL_ENVIRONMENT.get(name)) for name in sorted(recorder.env)}
        if recorder.whole_environment:  # every variable, including any added later
            deps.env[WHOLE_ENVIRONMENT] = environment_digest(INITIAL_ENVIRONMENT)
        return deps

    def changed(self, environ: Mapping[str, str] | None = None, memo: dict[str, Any] | None = None) -> str | None:
        """The first fact that no longer holds (`"examples/resnet.py changed"`), or None when all still hold.

        `memo` keeps library facts between records checked in one run (they share thousands of torch files).
        """
        environ = INITIAL_ENVIRONMENT if environ is None else environ  # not what this run's torch import set
        memo = {} if memo is None else memo
        for name, value in self.env.items():
            current = environment_digest(environ) if name == WHOLE_ENVIRONMENT else env_digest(environ.get(name))
            if current != value:
                return "the environment changed" if name == WHOLE_ENVIRONMENT else f"{name} changed"
        for path in self.distributions:
            if not os.path.isdir(path):
                return f"{os.path.basename(path)} is no longer installed"
        for path, fact in self.libraries.items():
            current = memo[path] if path in memo else memo.setdefault(path, library_fact(path))
            if current != fact:
                return f"{path} changed"
        for path, digest in self.listings.items():
            if listing_digest(path) != digest:
                return f"the files in {path} changed"
        for query, digest in self.distribution_queries.items():
            key = "distributions:" + query
            current = memo[key] if key in memo else memo.setdefault(key, distribution_query_digest(query))
            if current != digest:
                name = json.loads(query)[0]
                return f"the installed distributions{'' if name is None else ' named ' + repr(name)} changed"
        for path, digest in self.files.items():
            key = "sha256:" + path
            current = memo[key] if key in memo else memo.setdefault(key, file_digest(path))
            if current != digest:
                return f"{path} changed"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "libraries": self.libraries,
            "distributions": self.distributions,
            "listings": self.listings,
            "env": self.env,
            "unstable": self.unstable,
            "uncacheable": self.uncacheable,
            "distribution_queries": self.distribution_queries,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Dependencies:
        """Strict: a record that does not have exactly this shape raises (and is treated as a miss)."""
        files = {str(k): str(v) for k, v in _mapping(data["files"]).items()}
        libraries = {str(k): [int(v[0]), int(v[1])] for k, v in _mapping(data["libraries"]).items()}
        distributions = [str(p) for p in data["distributions"]]
        listings = {str(k): str(v) for k, v in _mapping(data["listings"]).items()}
        env = {str(k): (None if v is None else str(v)) for k, v in _mapping(data["env"]).items()}
        unstable = [str(p) for p in data.get("unstable", [])]
        uncacheable = data.get("uncacheable")
        queries = {str(k): str(v) for k, v in _mapping(data["distribution_queries"]).items()}
        return cls(
            files,
            libraries,
            distributions,
            listings,
            env,
            unstable,
            None if uncacheable is None else str(uncacheable),
            queries,
        )

    def merge(self, other: Dependencies) -> None:
        self.files.update(other.files)
        self.libraries.update(other.libraries)
        self.distributions = sorted(set(self.distributions) | set(other.distributions))
        self.listings.update(other.listings)
        self.env.update(other.env)
        self.unstable.extend(other.unstable)
        self.uncacheable = self.uncacheable or other.uncacheable
        self.distribution_queries.update(other.distribution_queries)


def _mapping(value: Any) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return value
