"""A roofline estimate: how long a layer would take on named hardware if only its FLOPs and its memory traffic
counted, and whether it is compute- or memory-bound there.

The roofline model bounds a kernel's time below by `max(flops / peak FLOP/s, bytes / memory bandwidth)`. It is an
*estimate* that ignores caches (every byte is taken to come from device memory once), kernel launch and
synchronisation costs, the overlap of compute and transfers, and how far real kernels fall short of peak; every
string this module produces says so. The peak figures below are the vendors' published peak figures, copied from the
data sheets each profile cites (the figures were not measured here): dense figures, never the "with sparsity" ones,
which the data sheets mark with an asterisk and which are twice the dense ones.

Everything here is exact: FLOPs, bytes, peaks and bandwidths are integers or `Fraction`s, so an intensity, a ridge
point or a time is a `Fraction` that compares exactly (a layer exactly at the ridge point is compute-bound); an
output rounds it only when it prints it (`format_seconds`). The figures come from the counter (`bytes` per layer,
the dtype of its tensors); this module imports nothing but the errors, so the table can call it with any mapping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from pytest_flopbudget._errors import ConfigError

#: The dtypes a profile may give a peak for, in the order messages list them.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")

#: Other spellings of those dtypes (torch's names, with or without `torch.`), so a layer's dtype can be passed as
#: the counter records it.
_DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
    "qint8": "int8",
    "quint8": "int8",
    "uint8": "int8",
}

#: A layer's place on the roofline: `compute` when its intensity reaches the ridge point (or it moves no bytes),
#: `memory` below it, `idle` when it neither computes nor moves anything.
Bound = Literal["compute", "memory", "idle"]

ESTIMATE_LABEL = "roofline estimate"


@dataclass(frozen=True)
class HardwareProfile:
    """One device as its vendor's data sheet describes it: dense peak FLOP/s per dtype (`peaks`, FLOP/s, integer
    ops/s for int8), device memory bandwidth in bytes/s, and the data sheet the figures come from."""

    name: str
    description: str
    peaks: Mapping[str, Fraction]
    bandwidth: Fraction
    source: str

    def peak(self, dtype: str) -> Fraction:
        """The dense peak FLOP/s for `dtype` (`bf16`, `torch.bfloat16`, ...); one error line listing the dtypes
        this profile has figures for otherwise."""
        key = canonical_dtype(dtype)
        if key not in self.peaks:
            accepted = ", ".join(name for name in DTYPES if name in self.peaks)
            raise ConfigError(
                f"hardware profile {self.name} has no published peak for dtype {dtype!r}: use one of {accepted}"
            )
        return self.peaks[key]


def _tera(figure: str) -> Fraction:
    """`"989.5"` TFLOP/s -> FLOP/s, exactly."""
    return Fraction(figure) * 10**12


def _giga(figure: str) -> Fraction:
    """`"3350"` GB/s -> bytes/s, exactly (decimal gigabytes, as the data sheets write them)."""
    return Fraction(figure) * 10**9


#: The profiles `--hardware` accepts, by name. Dense figures only; where a data sheet gives only the "with sparsity"
#: figure (marked `*`), the dense one is half of it, as its footnote says.
PROFILES: Mapping[str, HardwareProfile] = {
    profile.name: profile
    for profile in (
        HardwareProfile(
            name="h100-sxm",
            description="NVIDIA H100 SXM5 80GB",
            # the data sheet's tensor core figures are with sparsity (TF32 989*, BF16/FP16 1,979*, FP8/INT8 3,958*):
            # the dense ones are half of them
            peaks={
                "fp32": _tera("67"),
                "tf32": _tera("494.5"),
                "bf16": _tera("989.5"),
                "fp16": _tera("989.5"),
                "fp8": _tera("1979"),
                "int8": _tera("1979"),
            },
            bandwidth=_giga("3350"),
            source="NVIDIA H100 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/h100/",
        ),
        HardwareProfile(
            name="a100-sxm-80gb",
            description="NVIDIA A100 SXM4 80GB",
            peaks={
                "fp32": _tera("19.5"),
                "tf32": _tera("156"),
                "bf16": _tera("312"),
                "fp16": _tera("312"),
                "int8": _tera("624"),
            },
            bandwidth=_giga("2039"),
            source="NVIDIA A100 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/a100/",
        ),
        HardwareProfile(
            name="l4",
            description="NVIDIA L4 24GB",
            # with sparsity on the data sheet: TF32 120*, BF16/FP16 242*, FP8/INT8 485*; dense is half
            peaks={
                "fp32": _tera("30.3"),
                "tf32": _tera("60"),
                "bf16": _tera("121"),
                "fp16": _tera("121"),
                "fp8": _tera("242.5"),
                "int8": _tera("242.5"),
            },
            bandwidth=_giga("300"),
            source="NVIDIA L4 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/l4/",
        ),
        HardwareProfile(
            name="rtx-4090",
            description="NVIDIA GeForce RTX 4090 24GB",
            # the whitepaper's dense figures with FP32 accumulate (what PyTorch's half-precision matmuls use);
            # with FP16 accumulate the FP16 and FP8 figures are twice these
            peaks={
                "fp32": _tera("82.6"),
                "tf32": _tera("82.6"),
                "bf16": _tera("165.2"),
                "fp16": _tera("165.2"),
                "fp8": _tera("330.3"),
                "int8": _tera("660.6"),
            },
            bandwidth=_giga("1008"),
            source=(
                "NVIDIA Ada GPU Architecture whitepaper, appendix table (GeForce RTX 4090), "
                "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
            ),
        ),
        HardwareProfile(
            name="mi300x",
            description="AMD Instinct MI300X 192GB",
            peaks={
                "fp32": _tera("163.4"),
                "tf32": _tera("653.7"),
                "bf16": _tera("1307.4"),
                "fp16": _tera("1307.4"),
                "fp8": _tera("2614.9"),
                "int8": _tera("2614.9"),
            },
            bandwidth=_giga("5300"),
            source="AMD Instinct MI300X accelerator data sheet, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        ),
    )
}


def canonical_dtype(dtype: str) -> str:
    """`torch.bfloat16`, `bfloat16` and `BF16` -> `bf16`; any other name as given (lowercased), for `peak` to
    reject with the accepted names."""
    name = dtype.strip().lower().removeprefix("torch.")
    return _DTYPE_ALIASES.get(name, name)


def profile(name: str) -> HardwareProfile:
    """The profile called `name`; one error line listing the accepted names otherwise."""
    found = PROFILES.get(name.strip().lower())
    if found is None:
        raise ConfigError(f"unknown hardware profile {name!r}: use one of {', '.join(sorted(PROFILES))}")
    return found


def intensity(flops: int, moved: int) -> Fraction | None:
    """Arithmetic intensity, FLOPs per byte moved, exactly; None (infinite) when the layer moves no bytes."""
    if moved == 0:
        return None
    return Fraction(flops, moved)


def ridge_point(hardware: HardwareProfile, dtype: str) -> Fraction:
    """The intensity (FLOPs per byte) at which `hardware` turns from memory-bound to compute-bound for `dtype`:
    peak FLOP/s over bandwidth in bytes/s."""
    return hardware.peak(dtype) / hardware.bandwidth


def bound(flops: int, moved: int, hardware: HardwareProfile, dtype: str) -> Bound:
    """`memory` when the intensity is below the ridge point, `compute` at or above it (or when no bytes move),
    `idle` when the layer neither computes nor moves anything."""
    ridge = ridge_point(hardware, dtype)
    if flops == 0 and moved == 0:
        return "idle"
    ratio = intensity(flops, moved)
    return "compute" if ratio is None or ratio >= ridge else "memory"


def estimated_seconds(flops: int, moved: int, hardware: HardwareProfile, dtype: str) -> Fraction:
    """The roofline estimate of a layer's time in seconds: `max(flops / peak, bytes / bandwidth)`, exactly. A lower
    bound at the vendor's peak figures, not a prediction: it ignores caches, kernel launch and overlap."""
    return max(Fraction(flops) / hardware.peak(dtype), Fraction(moved) / hardware.bandwidth)


@dataclass(frozen=True)
class Estimate:
    """The roofline estimate of a group of ops run one after another (a layer's kernels): the sum of each op's
    roofline time, split by the roof that bounds each op. Summing per op, as a profiler's per-kernel roofline
    does, never lets one op's compute hide another op's memory traffic, as `max` over the layer's totals would."""

    compute_seconds: Fraction
    memory_seconds: Fraction

    @property
    def seconds(self) -> Fraction:
        return self.compute_seconds + self.memory_seconds

    @property
    def bound(self) -> Bound:
        """`memory` when ops below the ridge point take most of the estimated time, `compute` otherwise (a tie
        included, as a layer on the ridge point is compute-bound), `idle` when nothing is estimated to take time."""
        if self.seconds == 0:
            return "idle"
        return "memory" if self.memory_seconds > self.compute_seconds else "compute"

    def __add__(self, other: Estimate) -> Estimate:
        """Two groups of ops run one after the other (a module and its children)."""
        return Estimate(self.compute_seconds + other.compute_seconds, self.memory_seconds + other.memory_seconds)


def estimate_ops(ops: Iterable[tuple[int | Fraction, int]], hardware: HardwareProfile, dtype: str) -> Estimate:
    """The estimate of ops given as (FLOPs, bytes moved) pairs, each op bounded by its own roof (`bound`)."""
    peak, bandwidth = hardware.peak(dtype), hardware.bandwidth
    ridge = peak / bandwidth
    compute, memory = Fraction(0), Fraction(0)
    for flops, moved in ops:
        if flops == 0 and moved == 0:
            continue
        if moved == 0 or Fraction(flops, moved) >= ridge:
            compute += Fraction(flops) / peak
        else:
            memory += Fraction(moved) / bandwidth
    return Estimate(compute, memory)


@dataclass(frozen=True)
class RooflineRow:
    """One layer on the roofline: its intensity (None: infinite), which roof bounds it, and the estimated time."""

    layer: str
    intensity: Fraction | None
    bound: Bound
    estimated_seconds: Fraction


def roofline_rows(layers: Mapping[str, tuple[int, int, str]], hardware: HardwareProfile | str) -> list[RooflineRow]:
    """The rows the table renderer prints for `--hardware`: for each layer (in the mapping's order) with its
    (FLOPs, bytes moved, dtype), its intensity, bound and estimated seconds. Pure data; `format_row` prints one."""
    device = profile(hardware) if isinstance(hardware, str) else hardware
    return [
        RooflineRow(
            layer=layer,
            intensity=intensity(flops, moved),
            bound=bound(flops, moved, device, dtype),
            estimated_seconds=estimated_seconds(flops, moved, device, dtype),
        )
        for layer, (flops, moved, dtype) in layers.items()
    ]


#: Largest first: a time prints in the largest unit it reaches once rounded (0.9999996 ms prints as ~1 ms).
_TIME_UNITS = ((Fraction(1), "s"), (Fraction(1, 10**3), "ms"), (Fraction(1, 10**6), "us"), (Fraction(1, 10**9), "ns"))


def format_seconds(seconds: Fraction, labelled: bool = True) -> str:
    """`~1.23 ms (roofline estimate)`: three significant digits in the largest unit the value reaches, labelled
    (`labelled=False`: `~1.23 ms`, for a column whose heading or notes say it is an estimate)."""
    label = f" ({ESTIMATE_LABEL})" if labelled else ""
    if seconds == 0:
        return f"~0 s{label}"
    for scale, unit in _TIME_UNITS:
        value = float(seconds / scale)
        text = f"{value:.0f}" if value >= 1000 else f"{value:.3g}"  # 5000 s, never 5e+03 s
        if float(text) >= 1 or unit == _TIME_UNITS[-1][1]:
            return f"~{text} {unit}{label}"
    raise AssertionError("the last unit always returns")  # pragma: no cover


def format_intensity(value: Fraction | None) -> str:
    """`1.62 FLOPs/byte` (three significant digits); `inf FLOPs/byte` when no bytes move."""
    return "inf FLOPs/byte" if value is None else f"{intensity_figure(value)} FLOPs/byte"


def intensity_figure(value: Fraction) -> str:
    """An intensity without its unit, three significant digits, never in exponent notation: `1.62`, `0.0417`,
    `295`, `21000`, `0.0000123`: never in exponent notation."""
    number = float(value)
    if number >= 1000:
        return f"{number:.0f}"
    text = f"{number:.3g}"
    if "e" in text:  # below 1e-4: as many decimals as three significant digits need
        text = f"{number:.{2 - math.floor(math.log10(number))}f}"
    return text


def format_row(row: RooflineRow, hardware: HardwareProfile) -> str:
    """`layer: 1.62 FLOPs/byte, memory-bound on h100-sxm, ~44.2 ns (roofline estimate)`."""
    where = "idle" if row.bound == "idle" else f"{row.bound}-bound on {hardware.name}"
    return f"{row.layer}: {format_intensity(row.intensity)}, {where}, {format_seconds(row.estimated_seconds)}"


def describe_profiles(profiles: Iterable[HardwareProfile] = PROFILES.values()) -> list[str]:
    """One line per profile, for `--help` and the docs: its name, device, bandwidth and source."""
    return [
        f"{item.name}: {item.description}, {float(item.bandwidth / 10**9):g} GB/s; "
        f"vendor peak figures from {item.source}"
        for item in profiles
    ]
