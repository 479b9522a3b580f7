"""`flopbudget init` near the largest value a budget may hold (10^30): the suggested ceiling never exceeds it.

The model is 18 ONNX MatMuls of two graph inputs (no torch, no parameters; each tensor within int64's reach),
sized so that the count sits just below the bound: the count plus the 2% headroom would be above it.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from main_in_process import run_main

from pytest_flopbudget._cli.init import suggest_ceiling
from pytest_flopbudget._config.budget import parse_quantity
from pytest_flopbudget._render.formatting import ceiling_above
from pytest_flopbudget._report import MAX_COUNT

onnx = pytest.importorskip("onnx")

#: 18 x MatMul [S, S] @ [S, S]: 18 * 2*S^3 FLOPs = 36 * (3.02*10^9)^3 = 9.9158...*10^29, just under 10^30.
S = 3_020_000_000
NODES = 18
FLOPS = NODES * 2 * S**3


def write_matmul(path: Path) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], [f"y{i}"], name=f"mm{i}") for i in range(NODES)],
        "huge",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [S, S]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [S, S])],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [S, S]) for i in range(NODES)],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize(
    ("count", "headroom", "ceiling"),
    [
        (FLOPS, 2, MAX_COUNT),  # 9.9158e29 * 1.02 = 1.0114e30: capped at the bound
        (MAX_COUNT, 0, MAX_COUNT),
        (MAX_COUNT - 1, 0, MAX_COUNT),  # rounded up to 3 significant digits: exactly the bound
        (10**29 + 1, 0, 10**29 + 10**15),  # 28-digit decimals rounded this down to 10^29, below the count
        (995 * 10**27 + 1, 0, 995 * 10**27 + 10**15),
    ],
)
def test_a_ceiling_is_never_above_the_bound_nor_below_the_count(count: int, headroom: int, ceiling: int) -> None:
    text = suggest_ceiling(count, Decimal(headroom))
    value = parse_quantity(text).value
    assert value == ceiling
    assert count <= value <= MAX_COUNT


def test_ceiling_above_is_exact_for_30_digit_counts() -> None:
    # 995,000,000,000,000.000000000000001 P rounds up to 995,000,000,000,001 P (not down to 995,000,000,000,000 P)
    assert ceiling_above(995 * 10**27 + 1) == "995000000000001P"


def test_init_of_a_model_near_the_bound_writes_the_bound_and_check_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_matmul(tmp_path / "huge.onnx")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["init", "huge.onnx"], tmp_path, capsys)
    assert code == 0, err
    assert 'flops = "1000000000000000P"' in (tmp_path / "pyproject.toml").read_text()
    code, out, err = run_main(["check", "--no-cache", "--no-require-baseline"], tmp_path, capsys)
    assert code == 0, out + err
