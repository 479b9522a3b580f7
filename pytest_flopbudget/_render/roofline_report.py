"""`flopbudget count --hardware NAME[:DTYPE]`: the roofline estimate of a counted Report on one hardware profile.

`roofline.py` is the arithmetic on plain figures; this module applies it to a Report: it picks the dtype whose peak
applies (given after the name, or read from the model: `model_dtype`), estimates each layer from its ops' FLOPs and
bytes (`Roofline.estimate`), and says in one place what the figures are (`Roofline.notes`), so the table and the
JSON label them the same way. An estimate needs the bytes each op moves: a Report that does not measure them gets
one error line, never a figure computed as if no byte moved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pytest_flopbudget._errors import ConfigError
from pytest_flopbudget._metrics import BYTES, INT_OPS, PARAM_BYTES, PARAMS
from pytest_flopbudget._render.roofline import (
    DTYPES,
    ESTIMATE_LABEL,
    Estimate,
    HardwareProfile,
    canonical_dtype,
    estimate_ops,
    intensity,
    intensity_figure,
    profile,
)
from pytest_flopbudget._report import LayerCost, OpCost, Report, ancestors

#: The dtype of an element of each size, for a model whose parameters are all of one size. Two bytes is bf16 or
#: fp16: every profile gives both the same peak, so the name does not change the estimate. One byte (fp8 or int8,
#: whose peaks differ on some devices) and eight (fp64, which no profile has) are not guessed.
_BY_ELEMENT_SIZE = {4: "fp32", 2: "bf16"}

#: What the estimate leaves out, said wherever it is shown.
CAVEAT = (
    "per op max(FLOPs / peak, bytes / bandwidth), summed per layer; a lower bound at the vendor's peak figures, "
    "not a measurement (caches, kernel launches, overlap and clocks are ignored)"
)


@dataclass(frozen=True)
class Roofline:
    """A hardware profile, the dtype whose peak applies, and how that dtype was chosen."""

    hardware: HardwareProfile
    dtype: str
    #: `given` (`--hardware NAME:DTYPE`), or how it was read from the model (`the parameters' dtype`, ...)
    chosen_by: str

    @property
    def peak(self) -> Fraction:
        return self.hardware.peak(self.dtype)

    @property
    def ridge(self) -> Fraction:
        return self.peak / self.hardware.bandwidth

    def estimate(self, cost: LayerCost) -> Estimate:
        """One layer's estimate (exclusive of its children): its ops one after another, each at its own roof. An
        op is each op name of the layer with its calls summed (`LayerCost.ops`), so calls of one op at different
        intensities share one roof: the estimate stays a lower bound. An op's integer ops (`int-ops`, which its
        FLOPs leave out) run at the profile's int8 peak: they enter as the FLOPs that take as long at this dtype's
        peak, so a quantized layer is not estimated as if it computed nothing."""
        return estimate_ops(((self._work(op), op.get(BYTES)) for op in cost.ops.values()), self.hardware, self.dtype)

    def _work(self, op: OpCost) -> int | Fraction:
        integer = op.get(INT_OPS)
        if not integer:
            return int(op.flops)
        return op.flops + integer * self.peak / self.hardware.peak("int8")

    def estimates(self, report: Report) -> dict[str, Estimate]:
        """Every module path and each of its ancestors with the estimate of its whole subtree: the sum of its
        layers' own estimates (the model's, at the root, is the estimate of the call)."""
        totals: dict[str, Estimate] = {}
        for path, cost in report.layers.items():
            own = self.estimate(cost)
            for ancestor in ancestors(path):
                totals[ancestor] = totals[ancestor] + own if ancestor in totals else own
        return totals

    def notes(self) -> list[str]:
        """The lines under the table that say what the estimate columns are."""
        return [
            f"{ESTIMATE_LABEL} on {self.hardware.name} ({self.hardware.description}): {self.dtype} peak "
            f"{_figure(self.peak / 10**12)} TFLOP/s ({self.chosen_by}), {_figure(self.hardware.bandwidth / 10**9)} "
            f"GB/s, ridge point {intensity_figure(self.ridge)} FLOPs/byte",
            f"  est. time: {CAVEAT}; figures from {self.hardware.source}",
        ]

    def describe(self) -> dict[str, Any]:
        """The profile and the choices, for the JSON's `roofline_estimate`."""
        return {
            "hardware": self.hardware.name,
            "device": self.hardware.description,
            "source": self.hardware.source,
            "dtype": self.dtype,
            "dtype_chosen_by": self.chosen_by,
            "peak_flops_per_second": float(self.peak),
            "bandwidth_bytes_per_second": float(self.hardware.bandwidth),
            "ridge_point_flops_per_byte": float(self.ridge),
            "note": f"{ESTIMATE_LABEL}: {CAVEAT}",
        }


def choose(spec: str) -> tuple[HardwareProfile, str | None]:
    """`h100-sxm` or `h100-sxm:bf16` -> the profile and the given dtype (None: read it from the model); one error
    line listing the accepted names otherwise. Checked before counting, so a typo costs no count."""
    name, _, dtype = spec.partition(":")
    hardware = profile(name)
    if not dtype:
        return hardware, None
    hardware.peak(dtype)  # one error line naming the dtypes this profile has figures for
    return hardware, canonical_dtype(dtype)


def roofline_for(report: Report, hardware: HardwareProfile, dtype: str | None) -> Roofline:
    """The estimate's settings for `report`: the given dtype, or the model's (`model_dtype`)."""
    if not report.measures(BYTES):
        raise ConfigError(
            f"--hardware needs the bytes each op moves, and the {report.backend} backend does not measure them "
            f"for this model: no roofline estimate"
        )
    if dtype is not None:
        return Roofline(hardware, dtype, "given")
    found, chosen_by = model_dtype(report)
    if found is None or found not in hardware.peaks:
        accepted = ", ".join(name for name in DTYPES if name in hardware.peaks)
        raise ConfigError(
            f"--hardware {hardware.name}: cannot tell which peak applies ({chosen_by}); name the compute dtype, "
            f"e.g. --hardware {hardware.name}:bf16 (one of {accepted})"
        )
    return Roofline(hardware, found, chosen_by)


def model_dtype(report: Report) -> tuple[str | None, str]:
    """The dtype the model computes in, as far as the Report tells, and how it was told.

    The parameters' dtype first: each layer's parameter bytes over its parameters is the element size of its
    parameters when they share one, and the size holding the most parameters wins (4 bytes: fp32, 2: bf16, whose
    peak is fp16's on every profile). A model without parameters computes in its floating inputs' dtype. A Report
    without either (or with 1- or 8-byte parameters: fp8 or int8, fp64) gives None and the reason.
    """
    if report.measures(PARAM_BYTES) and report.params:
        held: dict[int, int] = {}
        for cost in report.layers.values():
            params, stored = cost.get(PARAMS), cost.get(PARAM_BYTES)
            if params and stored % params == 0 and stored // params in (1, 2, 4, 8):
                held[stored // params] = held.get(stored // params, 0) + params
        if held:
            size = max(sorted(held), key=lambda item: held[item])
            found = _BY_ELEMENT_SIZE.get(size)
            if found is None:
                return None, f"the parameters are {size} byte(s) each"
            return found, "the dtype most parameters are stored in"
        return None, "the parameters mix dtypes within layers"
    floating = sorted(set(_floating_inputs(report.inputs)))
    if len(floating) == 1:
        return floating[0], "the inputs' dtype (the model has no parameters)"
    return None, "the model has no parameters and no single floating input dtype"


def _floating_inputs(inputs: Iterable[Any]) -> Iterable[str]:
    for item in inputs:
        if isinstance(item, dict) and isinstance(item.get("dtype"), str):
            name = canonical_dtype(item["dtype"])
            if name in ("fp32", "bf16", "fp16", "fp8"):
                yield name


def layer_intensity(cost: LayerCost) -> Fraction | None:
    """FLOPs per byte moved of one layer (or subtree); None where it moves no bytes (absent, never 0 or inf)."""
    return intensity(cost.flops, cost.get(BYTES))


def _figure(value: Fraction) -> str:
    """`989.5`, `67`, `3,350`: a data-sheet figure as the data sheet writes it."""
    number = float(value)
    return f"{number:,.0f}" if number == int(number) else f"{number:,}"
