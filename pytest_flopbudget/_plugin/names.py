"""What a test is called in the plugin's outputs: the model name derived from its node id, and where it is."""

from __future__ import annotations

import os

import pytest

from pytest_flopbudget._config.location import Location, Origin


def default_name(nodeid: str) -> str:
    """`tests/test_m.py::TestA::test_b[x]` -> `tests.test_m.TestA.test_b[x]`: stable, readable, file-name safe."""
    path, _, rest = nodeid.partition("::")
    if path.endswith(".py"):
        path = path[:-3]
    parts = [path.replace("/", ".").replace("\\", "."), *[p for p in rest.split("::") if p]]
    return ".".join(p for p in parts if p)


def item_location(item: pytest.Item) -> Location:
    """The test function (its first decorator line, where the marker usually is) as a Location."""
    path, line, _ = item.reportinfo()
    first = line + 1 if isinstance(line, int) else None
    return Location(os.path.abspath(str(path)), first, item.name, origin=Origin.TEST)
