"""`flopbudget.count_curve`: a test's live model counted over a curve as a pyproject model is, and its arguments'
errors named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError, Location
from pytest_flopbudget._plugin.fixture_curve import count_model_curve

torch = pytest.importorskip("torch")

ORIGIN = Location("/t/test_m.py", 4, "test_m")


def count(model: object, *shapes: object, **kwargs: object):  # type: ignore[no-untyped-def]
    arguments = {"dims": {"seq": 32}, "curve": {"seq": (8, 64)}, **kwargs}
    return count_model_curve(model, shapes, name="m", origin=ORIGIN, root=Path.cwd(), **arguments)  # type: ignore[arg-type]


def test_a_live_model_gets_its_formula_and_the_count_at_dims() -> None:
    model = torch.nn.Linear(16, 4)
    report, formula = count(model, [1, "seq", 16])
    assert str(formula.total("macs")) == "64*seq"
    assert report.metric("macs") == 64 * 32
    assert formula.point == {"seq": 32}
    assert not [name for name in sys.modules if name.startswith("_flopbudget_fixture_model_")]  # lent, then gone


@pytest.mark.parametrize(
    ("shapes", "kwargs", "message"),
    [
        ([[1, "seq", 1.5]], {}, r"input 0: \[1, 'seq', 1.5\] is not a shape"),
        ([{"shape": [1, "seq"], "dtype": "int7"}], {}, "input 0: unknown dtype 'int7'"),
        ([[1, "seq"]], {"dims": {}}, "dims: dim 'seq' needs a positive size"),
        ([[1, "seq"]], {"curve": {"len": (8, 64)}}, "curve: no input names the dim 'len'"),
        ([[1, "seq"]], {"curve": {"seq": (64, 8)}}, r"curve: seq: expected \(low, high\) with 1 <= low < high"),
        ([[1, "seq"]], {"curve": {}}, "curve: give the range of a dim"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_test(shapes: list[object], kwargs: dict, message: str) -> None:
    with pytest.raises(LocatedError, match=f"^/t/test_m.py:4: test_m: flopbudget.count_curve: {message}"):
        count(torch.nn.Linear(1, 1), *shapes, **kwargs)
