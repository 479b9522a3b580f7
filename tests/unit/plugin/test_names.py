"""The model name a test gets from its node id, and where the test is (pytest_flopbudget/_plugin/names.py)."""

from __future__ import annotations

import pytest

from pytest_flopbudget._config.location import Origin
from pytest_flopbudget._plugin.names import default_name, item_location


@pytest.mark.parametrize(
    ("nodeid", "name"),
    [
        ("tests/test_m.py::TestA::test_b[x]", "tests.test_m.TestA.test_b[x]"),
        ("test_m.py::test_b", "test_m.test_b"),
        ("tests\\win\\test_m.py::test_b", "tests.win.test_m.test_b"),
        ("pyproject.toml::resnet", "pyproject.toml.resnet"),
    ],
)
def test_default_name_follows_the_node_id(nodeid: str, name: str) -> None:
    assert default_name(nodeid) == name


def test_item_location_is_the_test_function(pytester: pytest.Pytester) -> None:
    module = pytester.getmodulecol("import os\n\n\ndef test_here():\n    pass\n", ("-p", "no:flopbudget"))
    (item,) = module.collect()
    assert isinstance(item, pytest.Item)
    location = item_location(item)
    assert (location.file, location.line, location.key) == (str(item.path), 4, "test_here")


def test_item_location_is_a_test(pytester: pytest.Pytester) -> None:
    module = pytester.getmodulecol("def test_here():\n    pass\n", ("-p", "no:flopbudget"))
    (item,) = module.collect()
    assert isinstance(item, pytest.Item)
    assert item_location(item).origin is Origin.TEST
