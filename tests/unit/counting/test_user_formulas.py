"""`register_formula` without a model: keys, errors, handles, result checks, and no framework import.

The end-to-end counts are in torch/test_torch_user_formulas.py and onnx/test_onnx_user_formulas.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget import Cost, register_formula
from pytest_flopbudget._counting.onnx.ops import ONNX_OPS
from pytest_flopbudget._counting.registry import FREE
from pytest_flopbudget._counting.torch.ops import TORCH_OPS
from pytest_flopbudget._counting.user_formulas import as_cost
from pytest_flopbudget.formulas import registered_formulas

ROOT = Path(__file__).resolve().parents[3]


def nothing(*args: Any) -> Cost:
    return Cost(0, 0)


@pytest.mark.parametrize(
    ("op", "key"),
    [
        ("mylib.fused_gelu", "mylib.fused_gelu"),
        ("mylib::fused_gelu", "mylib.fused_gelu"),
        ("mylib.scale_", "mylib.scale"),  # the in-place variant shares the key, as the report lists it
        ("mylib.__magic__", "mylib.__magic__"),
    ],
)
def test_torch_keys(op: str, key: str) -> None:
    with register_formula(op, nothing, backend="torch") as handle:
        assert handle.key == key
        assert handle.op == f"torch op '{key}'"
        assert TORCH_OPS.lookup(key) is handle.formula
    assert TORCH_OPS.lookup(key) is None


@pytest.mark.parametrize(
    ("op", "key"),
    [
        (("com.mycompany", "FusedGelu"), ("com.mycompany", "FusedGelu")),
        ("com.mycompany.FusedGelu", ("com.mycompany", "FusedGelu")),
        (("ai.onnx", "MyOp"), ("", "MyOp")),
        ("MyOp", ("", "MyOp")),
    ],
)
def test_onnx_keys(op: Any, key: tuple[str, str]) -> None:
    with register_formula(op, nothing, backend="onnx") as handle:
        assert handle.key == key
        assert ONNX_OPS.lookup(key, 17) is handle.formula  # at every opset
        assert ONNX_OPS.lookup(key, 1) is handle.formula
    assert ONNX_OPS.lookup(key) is None


@pytest.mark.parametrize(
    ("op", "backend", "error", "message"),
    [
        (
            "mylib.op",
            "keras",
            ValueError,
            "backend must be 'torch', 'jax', 'tensorflow', 'savedmodel' or 'onnx', got 'keras'",
        ),
        ("mylib.op", "tensorflow", ValueError, "'mylib.op' is not a TensorFlow op type (e.g. 'Erf', 'MatrixInverse')"),
        ("mylib.op.default", "torch", ValueError, "torch op 'mylib.op.default' is not 'namespace.op'"),
        ("fused_gelu", "torch", ValueError, "torch op 'fused_gelu' is not 'namespace.op'"),
        (("mylib", "op"), "torch", TypeError, "a torch op is named 'namespace.op'"),
        (("com.x", ""), "onnx", ValueError, "ONNX op ('com.x', '') has no op_type"),
        (42, "onnx", TypeError, "an ONNX op is (domain, op_type)"),
    ],
)
def test_malformed_registrations_say_what_to_write(op: Any, backend: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=r"^register_formula: ") as info:
        register_formula(op, nothing, backend=backend)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_formula_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"the formula for 'mylib.op' must be callable, got int"):
        register_formula("mylib.op", 3, backend="torch")  # type: ignore[arg-type]


def test_backend_is_keyword_only_and_required() -> None:
    with pytest.raises(TypeError):
        register_formula("mylib.op", nothing, "torch")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        register_formula("mylib.op", nothing)  # type: ignore[call-arg]


def test_a_second_registration_needs_override_and_stacks() -> None:
    first = register_formula("mylib.op", lambda a, o: (1, 0), backend="torch")
    try:
        with pytest.raises(
            ValueError,
            match=r"torch op 'mylib.op' already has a formula registered with "
            r"register_formula; remove that one first or pass override=True$",
        ):
            register_formula("mylib.op", nothing, backend="torch")
        with register_formula("mylib.op", lambda a, o: (2, 0), backend="torch", override=True) as second:
            assert TORCH_OPS.lookup("mylib.op") is second.formula
            assert first.active and second.active
            assert [h.formula for h in registered_formulas()] == [first.formula, second.formula]
        assert not second.active
        assert TORCH_OPS.lookup("mylib.op") is first.formula  # the earlier one is back
    finally:
        first.remove()
    first.remove()  # twice does nothing
    assert not first.active
    assert "removed" in repr(first)
    assert TORCH_OPS.lookup("mylib.op") is None


def test_removing_an_override_brings_back_the_builtin() -> None:
    builtin = TORCH_OPS.lookup("aten.mm")
    handle = register_formula("aten.mm", nothing, backend="torch", override=True)
    assert TORCH_OPS.lookup("aten.mm") is handle.formula
    assert TORCH_OPS.builtin("aten.mm") is builtin
    handle.remove()
    assert TORCH_OPS.lookup("aten.mm") is builtin
    with register_formula("aten.view", nothing, backend="torch", override=True):
        assert not TORCH_OPS.is_free("aten.view")
    assert TORCH_OPS.lookup("aten.view") is FREE


def test_override_of_an_op_without_formula_is_allowed() -> None:
    with register_formula("mylib.op", nothing, backend="torch", override=True) as handle:
        assert handle.active


@pytest.mark.parametrize(
    ("result", "cost"),
    [(Cost(3, 1), Cost(3, 1)), ((3, 1), Cost(3, 1)), ([3, 1], Cost(3, 1)), ((True, 0), Cost(1, 0))],
)
def test_results_become_costs(result: Any, cost: Cost) -> None:
    assert as_cost(result) == cost
    assert type(as_cost(result)) is Cost


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (None, "the formula returned None, not a Cost or (flops, macs)"),
        ((1, 2, 3), "the formula returned (1, 2, 3), not a Cost or (flops, macs)"),
        ((1.0, 0), "the formula returned (1.0, 0): FLOPs and MACs must be integers"),
        (("1", 0), "the formula returned ('1', 0): FLOPs and MACs must be integers"),
        ((0, -1), "the formula returned (0, -1): FLOPs and MACs must not be negative"),
    ],
)
def test_other_results_raise(result: Any, message: str) -> None:
    with pytest.raises(TypeError) as info:
        as_cost(result)
    assert str(info.value) == message


def test_registering_imports_neither_torch_nor_onnx() -> None:
    child = textwrap.dedent(
        """
        import json, sys
        from pytest_flopbudget import register_formula
        a = register_formula("mylib.op", lambda args, out: (1, 0), backend="torch")
        b = register_formula(("com.x", "Op"), lambda node: (1, 0), backend="onnx")
        a.remove(); b.remove()
        print(json.dumps(sorted(m for m in ("torch", "onnx") if m in sys.modules)))
        """
    )
    result = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == []
