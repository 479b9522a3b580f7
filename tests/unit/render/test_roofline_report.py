"""The roofline estimate of a Report (`count --hardware`): the dtype read from the model, the per-layer estimates
rolled up the module tree, the one-line errors, and the notes that label it an estimate."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, PARAM_BYTES, PARAMS
from pytest_flopbudget._render.roofline import Estimate, profile
from pytest_flopbudget._render.roofline_report import Roofline, choose, layer_intensity, model_dtype, roofline_for
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report

H100 = profile("h100-sxm")
BANDWIDTH = 3350 * 10**9
BF16_PEAK = Fraction("989.5") * 10**12


def layer(ops: dict[str, tuple[int, int]], params: int = 0, param_bytes: int = 0) -> LayerCost:
    """A layer whose ops are name -> (FLOPs, bytes moved), with its own parameters and their bytes."""
    cost = LayerCost({PARAMS: params, PARAM_BYTES: param_bytes})
    for name, (flops, moved) in ops.items():
        cost.add_op(name, {FLOPS: flops, MACS: flops // 2, BYTES: moved})
    return cost


def report_of(layers: dict[str, LayerCost], inputs: list[object] | None = None, measured: bool = True) -> Report:
    forward = PhaseTotals()
    for cost in layers.values():
        for metric in (FLOPS, MACS, BYTES):
            forward.add(metric, cost.get(metric))
    return Report(
        layers=layers,
        forward=forward,
        inputs=inputs or [],
        optional_metrics=frozenset({BYTES, PARAM_BYTES}) if measured else frozenset(),
    )


# A bias-free bf16 Linear, x[4, 5] @ W[6, 5]^T: 240 FLOPs, (20 + 30 + 24) * 2 = 148 bytes, 30 parameters of 2 bytes
LINEAR = {"aten.mm": (240, 148)}


def test_the_parameters_dtype_picks_the_peak() -> None:
    bf16 = report_of({"fc": layer(LINEAR, params=30, param_bytes=60), "act": layer({"aten.relu": (24, 96)})})
    assert model_dtype(bf16) == ("bf16", "the dtype most parameters are stored in")
    fp32 = report_of({"fc": layer(LINEAR, params=30, param_bytes=120)})
    assert model_dtype(fp32)[0] == "fp32"
    # fp32 norms (10 params) beside bf16 matmuls (1000 params): the dtype holding most parameters wins
    mixed = report_of({"norm": layer({}, params=10, param_bytes=40), "fc": layer({}, params=1000, param_bytes=2000)})
    assert model_dtype(mixed)[0] == "bf16"


def test_a_model_without_parameters_uses_its_floating_input() -> None:
    free = report_of({"": layer({"aten.relu": (8, 64)})}, inputs=[{"shape": [2, 4], "dtype": "float16"}])
    assert model_dtype(free) == ("fp16", "the inputs' dtype (the model has no parameters)")
    tokens = report_of({"": layer({"aten.add": (8, 64)})}, inputs=[{"shape": [2, 4], "dtype": "int64"}])
    assert model_dtype(tokens)[0] is None


def test_an_undecidable_dtype_asks_for_one_in_one_line() -> None:
    fp8 = report_of({"fc": layer(LINEAR, params=30, param_bytes=30)})  # 1 byte: fp8 or int8, peaks differ
    assert model_dtype(fp8) == (None, "the parameters are 1 byte(s) each")
    with pytest.raises(ConfigError) as raised:
        roofline_for(fp8, profile("rtx-4090"), None)
    assert str(raised.value) == (
        "--hardware rtx-4090: cannot tell which peak applies (the parameters are 1 byte(s) each); name the compute "
        "dtype, e.g. --hardware rtx-4090:bf16 (one of fp32, tf32, bf16, fp16, fp8, int8)"
    )
    assert roofline_for(fp8, profile("rtx-4090"), "fp8") == Roofline(profile("rtx-4090"), "fp8", "given")


def test_no_estimate_without_measured_bytes() -> None:
    onnx_like = report_of({"fc": layer(LINEAR, params=30, param_bytes=60)}, measured=False)
    onnx_like.backend = "onnx"
    with pytest.raises(ConfigError) as raised:
        roofline_for(onnx_like, H100, "bf16")
    assert str(raised.value) == (
        "--hardware needs the bytes each op moves, and the onnx backend does not measure them for this model: "
        "no roofline estimate"
    )


def test_choose_checks_the_name_and_the_dtype_before_any_count() -> None:
    assert choose("h100-sxm") == (H100, None)
    assert choose("H100-SXM:torch.bfloat16") == (H100, "bf16")
    with pytest.raises(ConfigError) as raised:
        choose("h200")
    assert str(raised.value) == (
        "unknown hardware profile 'h200': use one of a100-sxm-80gb, h100-sxm, l4, mi300x, rtx-4090"
    )
    with pytest.raises(ConfigError, match=r"^hardware profile a100-sxm-80gb has no published peak for dtype 'fp8'"):
        choose("a100-sxm-80gb:fp8")


def test_estimates_roll_up_the_tree_as_sums_of_each_layers_ops() -> None:
    # block.fc: the bf16 Linear, memory-bound: 148 / 3.35e12 s. block.act: a relu on 4x6 bf16, 24 FLOPs, reads and
    # writes 48 bytes each: 96 / 3.35e12 s. head: a big matmul, compute-bound: 2 * 4096^3 / 989.5e12 s.
    big = 2 * 4096**3
    report = report_of(
        {
            "block.fc": layer(LINEAR, params=30, param_bytes=60),
            "block.act": layer({"aten.relu": (24, 96)}),
            "head": layer({"aten.mm": (big, 3 * 4096**2 * 2)}),
            "embed": layer({}, params=10, param_bytes=20),
        }
    )
    roofline = roofline_for(report, H100, None)
    assert roofline == Roofline(H100, "bf16", "the dtype most parameters are stored in")
    estimates = roofline.estimates(report)
    fc, act = Fraction(148, BANDWIDTH), Fraction(96, BANDWIDTH)
    assert estimates["block.fc"] == Estimate(Fraction(0), fc)
    assert estimates["block"] == Estimate(Fraction(0), fc + act)
    assert estimates["head"] == Estimate(big / BF16_PEAK, Fraction(0))
    assert estimates[""] == Estimate(big / BF16_PEAK, fc + act)
    assert estimates["embed"].bound == "idle"
    assert (estimates["block"].bound, estimates[""].bound) == ("memory", "compute")


def test_layer_intensity_is_absent_without_bytes() -> None:
    assert layer_intensity(layer(LINEAR)) == Fraction(240, 148)
    assert layer_intensity(layer({})) is None  # neither 0 nor infinite: there is no ratio to give


def test_notes_label_the_estimate_and_cite_the_source() -> None:
    report = report_of({"fc": layer(LINEAR, params=30, param_bytes=60)})
    first, second = roofline_for(report, H100, None).notes()
    assert first == (
        "roofline estimate on h100-sxm (NVIDIA H100 SXM5 80GB): bf16 peak 989.5 TFLOP/s (the dtype most parameters "
        "are stored in), 3,350 GB/s, ridge point 295 FLOPs/byte"
    )
    assert "a lower bound" in second and "not a measurement" in second and H100.source in second
    described = roofline_for(report, H100, "fp32").describe()
    assert described["dtype"] == "fp32" and described["dtype_chosen_by"] == "given"
    assert described["peak_flops_per_second"] == 67e12 and described["ridge_point_flops_per_byte"] == 67e12 / 3350e9
    assert described["note"].startswith("roofline estimate: ")


def test_integer_ops_run_at_the_int8_peak_not_as_zero_work() -> None:
    from pytest_flopbudget._metrics import INT_OPS

    # an int8 [32,64]x[64,32] _int_mm: 131,072 int-ops, 0 FLOPs; reads 32*64 + 64*32 bytes, writes 32*32*4 (int32)
    quantized = LayerCost()
    quantized.add_op("aten._int_mm", {INT_OPS: 131_072, BYTES: 2_048 + 2_048 + 4_096})
    roofline = Roofline(H100, "bf16", "given")
    # at the H100's dense int8 peak of 1,979 TOPS the integer work takes 131072 / 1979e12 s; as bf16-equivalent
    # FLOPs that is 131072 * 989.5 / 1979 = 65536 FLOPs over 8192 bytes = 8 FLOPs/byte, below the bf16 ridge
    # (989.5e12 / 3350e9 = 295.4): memory-bound, 8192 / 3350e9 s, and not an idle layer
    estimate = roofline.estimate(quantized)
    assert estimate.memory_seconds == Fraction(8_192, BANDWIDTH) and estimate.compute_seconds == 0
    compute_bound = LayerCost()
    compute_bound.add_op("aten._int_mm", {INT_OPS: 131_072, BYTES: 1})
    assert roofline.estimate(compute_bound).compute_seconds == Fraction(131_072, 1979 * 10**12)
