"""The roofline estimate: intensities, ridge points, bounds and times derived by hand from the profiles' figures, the
one-line errors for unknown profiles and dtypes, and the label on every string."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._render.roofline import (
    DTYPES,
    PROFILES,
    Estimate,
    RooflineRow,
    bound,
    canonical_dtype,
    describe_profiles,
    estimate_ops,
    estimated_seconds,
    format_intensity,
    format_row,
    format_seconds,
    intensity,
    intensity_figure,
    profile,
    ridge_point,
    roofline_rows,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "roofline.md"

# A bias-free bf16 Linear with x[T, K], W[N, K], T=4, K=5, N=6:
# FLOPs = 2 * T * K * N = 2 * 4 * 5 * 6 = 240
# bytes = (T*K + N*K + T*N) * 2 bytes per bf16 element = (20 + 30 + 24) * 2 = 148
LINEAR_FLOPS = 240
LINEAR_BYTES = 148

H100 = profile("h100-sxm")
A100 = profile("a100-sxm-80gb")


def test_intensity_is_exact_flops_per_byte() -> None:
    # 240 / 148 = 60 / 37 = 1.6216...
    assert intensity(LINEAR_FLOPS, LINEAR_BYTES) == Fraction(240, 148) == Fraction(60, 37)
    assert intensity(0, 10) == 0


def test_intensity_is_none_when_no_bytes_move() -> None:
    assert intensity(240, 0) is None
    assert intensity(0, 0) is None


def test_ridge_point_is_peak_over_bandwidth() -> None:
    # H100 SXM bf16: P = 989.5e12 FLOP/s (half the data sheet's 1,979 with sparsity), B = 3,350e9 bytes/s
    # ridge = P / B = 989.5e12 / 3.35e12 = 989500 / 3350 = 19790 / 67 = 295.37... FLOPs/byte
    assert ridge_point(H100, "bf16") == Fraction(19790, 67)
    # A100 SXM 80GB fp32: P = 19.5e12, B = 2,039e9 -> 19500 / 2039 = 9.56... FLOPs/byte
    assert ridge_point(A100, "fp32") == Fraction(19500, 2039)


def test_small_linear_is_memory_bound_and_takes_its_transfer_time() -> None:
    # on H100 bf16: compute 240 / 989.5e12 = 2.4e-13 s, memory 148 / 3.35e12 = 4.42e-11 s: memory wins
    assert bound(LINEAR_FLOPS, LINEAR_BYTES, H100, "bf16") == "memory"
    assert estimated_seconds(LINEAR_FLOPS, LINEAR_BYTES, H100, "bf16") == max(
        Fraction(240) / (Fraction("989.5") * 10**12), Fraction(148) / (3350 * 10**9)
    )
    assert estimated_seconds(LINEAR_FLOPS, LINEAR_BYTES, H100, "bf16") == Fraction(148, 3_350_000_000_000)


def test_large_matmul_is_compute_bound_and_takes_its_compute_time() -> None:
    # T = K = N = 4096 in bf16 on A100: FLOPs = 2 * 4096^3 = 137,438,953,472
    # bytes = 3 * 4096^2 * 2 = 100,663,296; intensity = 4096 / 3 = 1365.3 > ridge 312e12 / 2039e9 = 153.0
    flops, moved = 2 * 4096**3, 3 * 4096**2 * 2
    assert intensity(flops, moved) == Fraction(4096, 3)
    assert bound(flops, moved, A100, "bf16") == "compute"
    # time = FLOPs / P = 137,438,953,472 / 312e12 = 0.4405 ms (memory: 100,663,296 / 2039e9 = 0.0494 ms)
    assert estimated_seconds(flops, moved, A100, "bf16") == Fraction(flops, 312 * 10**12)


def test_a_layer_exactly_at_the_ridge_point_is_compute_bound() -> None:
    # A100 fp32 ridge = 19500 / 2039: 19,500 FLOPs over 2,039 bytes sits on it, and both roofs give 1 ns:
    # 19500 / 19.5e12 = 1e-9 s and 2039 / 2039e9 = 1e-9 s
    assert bound(19_500, 2_039, A100, "fp32") == "compute"
    assert bound(19_499, 2_039, A100, "fp32") == "memory"
    assert estimated_seconds(19_500, 2_039, A100, "fp32") == Fraction(1, 10**9)


def test_layers_without_bytes_or_work() -> None:
    # no bytes: infinite intensity, compute-bound, time = FLOPs / P = 240 / 989.5e12
    assert bound(240, 0, H100, "bf16") == "compute"
    assert estimated_seconds(240, 0, H100, "bf16") == Fraction(240) / (Fraction("989.5") * 10**12)
    # nothing at all: idle, no time
    assert bound(0, 0, H100, "bf16") == "idle"
    assert estimated_seconds(0, 0, H100, "bf16") == 0


def test_roofline_rows_keep_the_layer_order() -> None:
    rows = roofline_rows(
        {"fc": (LINEAR_FLOPS, LINEAR_BYTES, "bf16"), "relu": (0, 0, "torch.bfloat16"), "head": (240, 0, "bfloat16")},
        "h100-sxm",
    )
    assert rows == [
        RooflineRow("fc", Fraction(60, 37), "memory", Fraction(148, 3_350_000_000_000)),
        RooflineRow("relu", None, "idle", Fraction(0)),
        RooflineRow("head", None, "compute", Fraction(240) / (Fraction("989.5") * 10**12)),
    ]
    assert roofline_rows({"fc": (240, 148, "bf16")}, H100) == rows[:1]
    assert roofline_rows({}, H100) == []


@pytest.mark.parametrize(
    ("dtype", "canonical"),
    [("bf16", "bf16"), ("torch.bfloat16", "bf16"), ("BFloat16", "bf16"), ("float16", "fp16"), ("half", "fp16"),
     ("torch.float32", "fp32"), ("float8_e4m3fn", "fp8"), ("int8", "int8"), ("fp64", "fp64")],
)  # fmt: skip
def test_canonical_dtype(dtype: str, canonical: str) -> None:
    assert canonical_dtype(dtype) == canonical


def test_unknown_profile_is_one_line_listing_the_accepted_names() -> None:
    with pytest.raises(ConfigError) as raised:
        profile("h200")
    assert str(raised.value) == (
        "unknown hardware profile 'h200': use one of a100-sxm-80gb, h100-sxm, l4, mi300x, rtx-4090"
    )
    with pytest.raises(ConfigError, match="unknown hardware profile 'tpu'"):
        roofline_rows({"fc": (1, 1, "bf16")}, "tpu")


def test_unknown_dtype_is_one_line_listing_the_profiles_dtypes() -> None:
    with pytest.raises(ConfigError) as raised:
        ridge_point(A100, "fp8")  # the A100 has no FP8 tensor cores
    assert str(raised.value) == (
        "hardware profile a100-sxm-80gb has no published peak for dtype 'fp8': use one of fp32, tf32, bf16, fp16, int8"
    )
    with pytest.raises(ConfigError, match=r"no published peak for dtype 'torch\.float64'"):
        estimated_seconds(1, 1, H100, "torch.float64")


def test_profile_names_are_case_insensitive() -> None:
    assert profile("H100-SXM") is H100


def test_every_required_profile_is_there_with_dense_figures_and_a_source() -> None:
    assert {"h100-sxm", "a100-sxm-80gb", "l4", "rtx-4090"} <= set(PROFILES)
    for name, item in PROFILES.items():
        assert item.name == name
        assert set(item.peaks) <= set(DTYPES) and {"fp32", "bf16", "fp16"} <= set(item.peaks)
        assert all(peak > 0 for peak in item.peaks.values()) and item.bandwidth > 0
        assert "https://" in item.source and ("data sheet" in item.source or "whitepaper" in item.source)
        # tensor-core half precision is never slower than plain fp32
        assert item.peaks["bf16"] >= item.peaks["fp32"]
    # spot checks against the data sheets (TFLOP/s, GB/s)
    assert PROFILES["a100-sxm-80gb"].peaks["bf16"] == 312 * 10**12
    assert PROFILES["a100-sxm-80gb"].bandwidth == 2039 * 10**9
    assert PROFILES["l4"].bandwidth == 300 * 10**9
    assert PROFILES["rtx-4090"].bandwidth == 1008 * 10**9


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(Fraction(0), "~0 s"), (Fraction(2), "~2 s"), (Fraction(5000), "~5000 s"), (Fraction(1234, 10**6), "~1.23 ms"),
     (Fraction(9_999_996, 10**10), "~1 ms"), (Fraction(44, 10**9), "~44 ns"),
     (Fraction(148, 3_350_000_000_000), "~0.0442 ns")],
)  # fmt: skip
def test_format_seconds_is_labelled_an_estimate(seconds: Fraction, text: str) -> None:
    assert format_seconds(seconds) == f"{text} (roofline estimate)"


def test_format_row_and_intensity() -> None:
    assert format_intensity(Fraction(60, 37)) == "1.62 FLOPs/byte"
    assert format_intensity(None) == "inf FLOPs/byte"
    fc, relu = roofline_rows({"fc": (240, 148, "bf16"), "relu": (0, 0, "bf16")}, H100)
    assert format_row(fc, H100) == "fc: 1.62 FLOPs/byte, memory-bound on h100-sxm, ~0.0442 ns (roofline estimate)"
    assert format_row(relu, H100) == "relu: inf FLOPs/byte, idle, ~0 s (roofline estimate)"


def test_docs_list_every_profile_with_its_source() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for item in PROFILES.values():
        assert f"`{item.name}`" in text
        assert item.source.rsplit("https://", 1)[1] in text
    assert "estimate" in text
    assert len(describe_profiles()) == len(PROFILES)
    assert all("vendor peak figures" in line for line in describe_profiles())


def test_estimate_ops_sums_each_op_at_its_own_roof() -> None:
    # On H100 bf16 (ridge 295 FLOPs/byte): the small Linear is memory-bound, 148 B / 3.35e12 B/s;
    # a 4096^3 matmul is compute-bound, 2 * 4096^3 / 989.5e12 FLOP/s. Summed, not max() over the two totals:
    # max((240 + 2*4096^3) / P, (148 + 3*4096^2*2) / B) would let the matmul's compute hide the Linear's traffic.
    big_flops, big_bytes = 2 * 4096**3, 3 * 4096**2 * 2
    peak = Fraction("989.5") * 10**12
    estimate = estimate_ops([(LINEAR_FLOPS, LINEAR_BYTES), (big_flops, big_bytes), (0, 0)], H100, "bf16")
    assert estimate.memory_seconds == Fraction(148, 3_350_000_000_000)
    assert estimate.compute_seconds == Fraction(big_flops) / peak
    assert estimate.seconds == Fraction(148, 3_350_000_000_000) + Fraction(big_flops) / peak
    assert estimate.bound == "compute"  # 0.139 ms of compute against 0.0442 ns of memory traffic
    assert estimate.seconds > estimated_seconds(LINEAR_FLOPS + big_flops, LINEAR_BYTES + big_bytes, H100, "bf16")


def test_estimate_bounds_and_sums() -> None:
    one_op = estimate_ops([(LINEAR_FLOPS, LINEAR_BYTES)], H100, "bf16")
    assert (one_op.bound, one_op.seconds) == ("memory", estimated_seconds(LINEAR_FLOPS, LINEAR_BYTES, H100, "bf16"))
    # a copy: no FLOPs, 8 bytes -> memory; no bytes -> compute; nothing -> idle
    assert estimate_ops([(0, 8)], H100, "bf16").bound == "memory"
    assert estimate_ops([(10, 0)], H100, "bf16").bound == "compute"
    assert estimate_ops([], H100, "bf16").bound == "idle" and estimate_ops([(0, 0)], H100, "bf16").seconds == 0
    # exactly on the A100 fp32 ridge (19,500 FLOPs over 2,039 B): compute-bound, 1 ns, as `bound` says
    assert estimate_ops([(19_500, 2_039)], A100, "fp32") == Estimate(Fraction(1, 10**9), Fraction(0))
    # a tie between the roofs' shares is compute-bound, like a layer on the ridge point
    assert Estimate(Fraction(1), Fraction(1)).bound == "compute"
    assert Estimate(Fraction(1), Fraction(2)) + Estimate(Fraction(3), Fraction(4)) == Estimate(Fraction(4), Fraction(6))


@pytest.mark.parametrize(
    ("value", "text"),
    [(Fraction(60, 37), "1.62"), (Fraction(0), "0"), (Fraction(1, 2), "0.5"), (Fraction(19790, 67), "295"),
     (Fraction(4096, 3), "1365"), (Fraction(21000), "21000"), (Fraction(123, 10**7), "0.0000123")],
)  # fmt: skip
def test_intensity_figures_never_use_exponents(value: Fraction, text: str) -> None:
    assert intensity_figure(value) == text


def test_format_seconds_without_the_label_for_a_labelled_column() -> None:
    assert format_seconds(Fraction(1234, 10**6), labelled=False) == "~1.23 ms"
    assert format_seconds(Fraction(0), labelled=False) == "~0 s"


def test_half_precision_peaks_agree_so_a_2_byte_model_need_not_say_which() -> None:
    # `roofline_report.model_dtype` reads 2-byte parameters as bf16: every profile gives fp16 the same peak
    for item in PROFILES.values():
        assert item.peaks["bf16"] == item.peaks["fp16"], item.name
