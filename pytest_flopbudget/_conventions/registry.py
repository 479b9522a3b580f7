"""Profiles by name: the built-in modules each expose `PROFILES`, a tuple of `Profile`s.

Adding a module of profiles is one line in `MODULES`. The modules are imported on first use only (by name, so a
module of peer conventions may live in a layer that imports nothing of this package's conventions).
"""

from __future__ import annotations

import importlib
from functools import cache

from pytest_flopbudget._conventions.profile import ConventionError, Profile

#: The modules whose `PROFILES` are the built-in conventions, in the order `profile_names` lists them.
MODULES: tuple[str, ...] = ("pytest_flopbudget._conventions.llm", "pytest_flopbudget._explain.peers.conventions")


@cache
def _profiles() -> dict[str, Profile]:
    found: dict[str, Profile] = {}
    for module in MODULES:
        for profile in importlib.import_module(module).PROFILES:
            if profile.name in found:
                raise RuntimeError(f"two convention profiles are named {profile.name!r} ({module})")
            found[profile.name] = profile
    return found


def profile_names() -> tuple[str, ...]:
    """Every accepted convention name, in the order the modules define them."""
    return tuple(_profiles())


def profile_named(name: str) -> Profile:
    """The profile `name` (case and surrounding spaces ignored); an unknown name is one line listing the names."""
    profiles = _profiles()
    key = name.strip().lower()
    if key not in profiles:
        raise ConventionError(f"unknown convention {name!r}; accepted: {', '.join(profiles)}")
    return profiles[key]
