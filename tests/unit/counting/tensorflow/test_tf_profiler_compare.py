"""benchmarks/tf_profiler_compare.py on the small conv net: every op type where `tf.compat.v1.profiler` and the
TensorFlow engine differ has its reason, and the explained differences add up to the difference of the totals."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

SCRIPT = Path(__file__).resolve().parents[4] / "benchmarks" / "tf_profiler_compare.py"


@pytest.fixture(scope="module")
def compared() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("tf_profiler_compare", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module.compare("convnet", 32)  # type: ignore[no-any-return]


def test_every_difference_has_its_reason_and_they_add_up(compared: dict[str, Any]) -> None:
    rows = {row["op"]: row for row in compared["rows"]}
    assert all(row["explained"] for row in rows.values())
    assert sum(row["difference"] for row in rows.values()) == compared["ours"] - compared["profiler"]
    # ReLU after the stem (32*32*16 = 16384), after the residual add (16384) and the pointwise conv's (8*8*32 =
    # 2048): 34816 FLOPs of ours the profiler has no rule for
    assert (rows["Relu"]["ours"], rows["Relu"]["profiler"], rows["Relu"]["reason"]) == (34816, 0, "no rule")
    # two batch norms' rsqrt over 16 channels: ours 1 per element (32), the profiler's 2 (64)
    assert (rows["Rsqrt"]["ours"], rows["Rsqrt"]["profiler"], rows["Rsqrt"]["reason"]) == (32, 64, "rsqrt")
    assert compared["ours"] - compared["profiler"] == 34816 - 32
    # convolutions (2 per MAC), the bias adds, pooling and the dense head agree op for op
    for op in ("Conv2D", "DepthwiseConv2dNative", "BiasAdd", "MaxPool", "Mean", "MatMul"):
        assert rows[op]["ours"] == rows[op]["profiler"] > 0, op


def test_a_none_batch_drops_ops_from_the_profiler_and_we_skip_them_by_name(compared: dict[str, Any]) -> None:
    none = compared["none_batch"]
    # what is left: each batch norm's per-channel statistics folding on 16 channels, +eps, rsqrt, *gamma, mean*inv,
    # beta - that: ours 5 * 16 = 80, the profiler's 96 (rsqrt at 2); two batch norms
    assert (none["ours_counted"], none["profiler"]) == (160, 192)
    assert {"Conv2D", "MatMul", "BiasAdd"} <= set(none["profiler_dropped_types"])
    assert none["ours_skipped"]["Conv2D"] == 3  # stem, conv and pointwise, named rather than dropped
    assert sum(none["ours_skipped"].values()) == 19
