"""`--input` grammar: shapes, names, dtypes and function references, and one-line errors for everything else."""

from __future__ import annotations

import pytest

from pytest_flopbudget._cli.inputs import describe_inputs, parse_dims, parse_inputs
from pytest_flopbudget._cli.project import UsageError
from pytest_flopbudget._config.pyproject import InputSpec


@pytest.mark.parametrize(
    ("values", "dtype", "expected"),
    [
        (None, None, None),
        ([], None, None),
        (["1,3,224,224"], None, [InputSpec((1, 3, 224, 224))]),
        (["1x3x224x224"], None, [InputSpec((1, 3, 224, 224))]),
        (["1, 3, 224, 224"], None, [InputSpec((1, 3, 224, 224))]),
        (["[1,3]"], None, [InputSpec((1, 3))]),
        (["7"], None, [InputSpec((7,))]),
        (["1,16"], None, [InputSpec((1, 16), None)]),  # no dtype given: the model decides (float32 or token ids)
        (["1,16:int64"], None, [InputSpec((1, 16), "int64")]),
        (["1,16"], "int64", [InputSpec((1, 16), "int64")]),
        (["1,16", "1,16:bool"], "int64", [InputSpec((1, 16), "int64"), InputSpec((1, 16), "bool")]),
        (["x=1,3", "mask=1,3:bool"], None, {"x": InputSpec((1, 3)), "mask": InputSpec((1, 3), "bool")}),
        # ONNX input names exported from TensorFlow carry a colon: the name is everything before '='
        (["input_1:0=1,224,224,3"], None, {"input_1:0": InputSpec((1, 224, 224, 3))}),
        (["pkg.data:example_inputs"], None, "pkg.data:example_inputs"),
        (["t=scalar:int64"], None, {"t": InputSpec((), "int64")}),
        (["t=[]"], None, {"t": InputSpec(())}),
        (["scalar"], "float16", [InputSpec((), "float16")]),
    ],
)
def test_accepted(values, dtype, expected):
    assert parse_inputs(values, dtype) == expected


@pytest.mark.parametrize(
    ("values", "dtype", "message"),
    [
        (["1;3"], None, "--input '1;3' is not a shape: write sizes separated by commas"),
        (["1,a"], None, "--input '1,a' is not a shape"),
        (["-1,3"], None, "is not a shape"),
        (["1.5,3"], None, "is not a shape"),
        ([""], None, "is not a shape"),
        (["x="], None, "--input 'x=' is not a shape"),
        (["=1,3"], None, "the name before '=' is empty"),
        (["x=1", "x=2"], None, "'x' is given twice"),
        (["1,3", "x=1,3"], None, "either positional shapes (1,3,224,224) or named ones"),
        (["1,3:int65"], None, "unknown dtype 'int65'; expected one of: float32"),
        (["1,3"], "float33", "--dtype: unknown dtype 'float33'"),
        (["pkg:f", "1,3"], None, "replaces all other --input values"),
    ],
)
def test_rejected_with_one_line(values, dtype, message):
    with pytest.raises(UsageError) as info:
        parse_inputs(values, dtype)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_describe_inputs_for_titles():
    assert describe_inputs([{"shape": [1, 3, 224, 224], "dtype": "float32"}]) == "1x3x224x224 float32"
    assert describe_inputs([{"name": "x", "shape": [2, 8], "dtype": "float32"}]) == "x=2x8 float32"
    assert describe_inputs([{"shape": [], "dtype": "int64"}]) == "scalar int64"
    assert describe_inputs([3]) == "3"
    assert describe_inputs([]) == "no inputs"


# -- named dims: `--input 1,seq:int64` and `--dim seq=64..8192` ------------------------------------------------


def test_a_name_in_a_shape_is_a_dim_sized_later() -> None:
    assert parse_inputs(["1,seq:int64"], None, ["seq"]) == [InputSpec((1, 0), "int64", (None, "seq"))]
    assert parse_inputs(["x=batch, 3, side, side"], None, ("batch", "side")) == {
        "x": InputSpec((0, 3, 0, 0), None, ("batch", None, "side", "side"))
    }
    assert parse_inputs(["1x16"], None, ["x"]) == [InputSpec((1, 16))]  # x between numbers still separates sizes


def test_a_name_no_dim_sizes_is_one_line_naming_it() -> None:
    with pytest.raises(UsageError, match=r"^--input '1,seq' is not a shape: .*--dim seq=2048 \(a point\)"):
        parse_inputs(["1,seq"], None, ["len"])


@pytest.mark.parametrize(
    ("values", "points", "ranges"),
    [
        (None, {}, {}),
        (["seq=2048"], {"seq": 2048}, {}),
        (["seq=64..8192", "batch=1"], {"batch": 1}, {"seq": (64, 8192)}),
        ([" h = 32 .. 1024 "], {}, {"h": (32, 1024)}),
    ],
)
def test_dims_are_points_or_ranges(
    values: list[str] | None, points: dict[str, int], ranges: dict[str, tuple[int, int]]
) -> None:
    assert parse_dims(values) == (points, ranges)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("seq", "write NAME=SIZE for a point"),
        ("1seq=4", "write NAME=SIZE for a point"),
        ("seq=big", "write NAME=SIZE for a point"),
        ("seq=64..", "write NAME=SIZE for a point"),
        ("seq=0", "a size is at least 1"),
        ("seq=64..64", "a range needs 1 <= LOW < HIGH"),
        ("seq=0..64", "a range needs 1 <= LOW < HIGH"),
    ],
)
def test_a_bad_dim_is_one_line(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=f"^--dim '{value}': {message}"):
        parse_dims([value])


def test_a_dim_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="'seq' is given twice"):
        parse_dims(["seq=1", "seq=2..8"])
