"""The library versions a count was made with, and the one line that says they changed since the baseline.

A count that moved when torch (or transformers, diffusers, onnx, this tool) moved too may owe its change to the
library, not to the model: a new decomposition, a fused kernel counted differently. Reports record those versions
(`Report.versions`, the same dict a baseline file keeps); this module only compares them. A baseline written before a
library was recorded lacks its key and says nothing about it: a difference needs a version on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The `Report.versions` keys that name a library whose version can change a count, in the order a note names them
#: (other keys, `execution`, ONNX's `opsets` and `producer`, say how the count was made, not with what).
LIBRARIES = ("torch", "transformers", "diffusers", "onnx", "pytest-flopbudget")


def changed_versions(base: Mapping[str, str], now: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """`(library, version at the base, version now)` for each library both record with different versions."""
    return [
        (library, base[library], now[library])
        for library in LIBRARIES
        if library in base and library in now and base[library] != now[library]
    ]


def version_note(base: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """`counted with torch 2.13.0 at the base, 2.14.0 now` (libraries joined by `; `), None when none changed."""
    changed = changed_versions(base, now)
    if not changed:
        return None
    return "counted with " + "; ".join(f"{name} {old} at the base, {new} now" for name, old, new in changed)


def with_libraries_of(versions: Mapping[str, str], other: Mapping[str, str]) -> dict[str, str]:
    """`versions` with its library versions replaced by `other`'s (the other keys, `execution`, kept): a baseline
    compared so with a new count differs only where the count, or how it was made, differs."""
    kept = {key: value for key, value in versions.items() if key not in LIBRARIES}
    return {**kept, **{key: value for key, value in other.items() if key in LIBRARIES}}
