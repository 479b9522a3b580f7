"""Fuzz of the ONNX surface (issue 12): whatever bytes an .onnx file holds, a count gives a Report or one
CountingError line, never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._errors import FlopBudgetError  # noqa: E402


def valid_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 4], [0.0] * 12)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


VALID = valid_model()


def mutated(data: st.DataObject) -> bytes:
    """The valid model with a few bytes overwritten, inserted or cut: near-misses reach the deepest code."""
    raw = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(raw) - 1))
        action = data.draw(st.sampled_from(["set", "insert", "cut"]))
        if action == "set":
            raw[where] = data.draw(st.integers(0, 255))
        elif action == "insert":
            raw[where:where] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del raw[where : where + data.draw(st.integers(1, 8))]
    return bytes(raw)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_bytes_count_or_fail_in_one_line(tmp_path: Path, data: st.DataObject) -> None:
    raw = data.draw(st.one_of(st.binary(max_size=200), st.builds(lambda: None).flatmap(lambda _: st.just(VALID))))
    if data.draw(st.booleans()):
        raw = mutated(data)
    path = tmp_path / "m.onnx"
    path.write_bytes(raw)
    try:
        report = count(str(path), inputs={"x": [2, 3]})
    except FlopBudgetError as exc:
        assert str(exc).strip() and len(str(exc).splitlines()) <= 3
    else:
        report.to_dict()  # whatever was counted serialises
