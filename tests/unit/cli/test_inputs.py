"""`--input` grammar: shapes, names, dtypes and function references, and one-line errors for everything else."""

from __future__ import annotations

import pytest

from pytest_flopbudget.cli.inputs import describe_inputs, parse_inputs
from pytest_flopbudget.cli.project import UsageError
from pytest_flopbudget.config.pyproject import InputSpec


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
