"""Named dims in `[tool.flopbudget.models.NAME]`: `inputs = [[1, "seq"]]`, `dims = { seq = 2048 }` (the point the
inputs are sized at) and `curve = { seq = [64, 8192] }` (the range a formula must hold on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import InputSpec, parse_settings

HEAD = '[tool.flopbudget.models.m]\ntarget = "pkg.models:build"\nflops = "1G"\n'


def settings(body: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    return parse_settings(HEAD + body, tmp_path / "pyproject.toml")


def errors(body: str, tmp_path: Path) -> list[str]:
    with pytest.raises(LocatedError) as info:
        settings(body, tmp_path)
    return str(info.value).splitlines()


def test_inputs_are_sized_at_the_point_and_keep_their_names(tmp_path: Path) -> None:
    body = 'inputs = [{ shape = [1, "seq"], dtype = "int64" }, ["batch", 3]]\ndims = { seq = 2048, batch = 2 }\n'
    body += "curve = { seq = [64, 8192] }\n"
    entry = settings(body, tmp_path).models["m"]
    assert entry.inputs == [InputSpec((1, 2048), "int64", (None, "seq")), InputSpec((2, 3), None, ("batch", None))]
    assert (entry.dims, entry.curve) == ({"seq": 2048, "batch": 2}, {"seq": (64, 8192)})
    moved = entry.at({"seq": 64})
    assert moved.inputs == [InputSpec((1, 64), "int64", (None, "seq")), InputSpec((2, 3), None, ("batch", None))]
    assert moved.dims == {"seq": 64, "batch": 2} and entry.dims["seq"] == 2048


def test_a_model_without_names_is_unchanged(tmp_path: Path) -> None:
    entry = settings("inputs = [[1, 16]]\n", tmp_path).models["m"]
    assert (entry.inputs, entry.dims, entry.curve) == ([InputSpec((1, 16))], {}, {})


def test_a_named_dim_without_a_value_names_the_dim_and_the_key(tmp_path: Path) -> None:
    (line,) = errors('inputs = [[1, "seq"]]\n', tmp_path)
    assert line.endswith(
        "pyproject.toml:4: tool.flopbudget.models.m.inputs: dim 'seq' has no value; set it in dims, "
        "e.g. dims = { seq = 2048 }"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('inputs = [[1, "seq"]]\ndims = { seq = 0 }\n', "dims.seq: expected a positive integer size, got 0"),
        ('inputs = [[1, "seq"]]\ndims = { seq = 8, len = 4 }\n', "dims.len: no input names the dim 'len'"),
        ('inputs = [[1, "seq"]]\ndims = 8\n', "dims: expected a table of dim = size"),
        ('inputs = [[1, "seq"]]\ndims = { seq = 8 }\ncurve = { seq = [64] }\n', "curve.seq: expected [low, high]"),
        ('inputs = [[1, "seq"]]\ndims = { seq = 8 }\ncurve = { seq = [64, 8] }\n', "curve.seq: expected [low, high]"),
        ('inputs = [[1, "seq"]]\ndims = { seq = 8 }\ncurve = { len = [1, 8] }\n', "curve.len: dim 'len' has no value"),
        ('inputs = [[1, "1seq"]]\n', "inputs.0: [1, '1seq'] is not a shape"),
    ],
)
def test_bad_dims_are_located(body: str, message: str, tmp_path: Path) -> None:
    lines = errors(body, tmp_path)
    assert any(message in line for line in lines), lines


def test_an_onnx_graph_binds_its_own_symbolic_dims_by_name(tmp_path: Path) -> None:
    text = '[tool.flopbudget.models.m]\ntarget = "m.onnx"\ndims = { batch = 1 }\ncurve = { batch = [1, 8] }\n'
    text += 'flops = "1G"\n'
    entry = parse_settings(text, tmp_path / "pyproject.toml").models["m"]
    assert (entry.inputs, entry.dims, entry.curve) == (None, {"batch": 1}, {"batch": (1, 8)})
