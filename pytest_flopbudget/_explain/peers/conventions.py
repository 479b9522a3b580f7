"""Peer conventions as profiles: the figure a peer would report, computed from our Report op by op, without running
the peer.

Each profile reads every op of every layer of a Report (its FLOPs, MACs, calls, bytes; the layer's parameters) and
prices it by the peer's rule, in the peer's unit, with the reason where it differs from ours: the same `Item`s
`flopbudget explain --vs NAME` gives from a real run, so `Explanation.residual` is zero by construction. A Report
keeps what an op cost, not its shapes or the module that ran it, so where a peer's rule needs more (the outputs of a
reduction are read back from the op's bytes; whether a ReLU ran as a module or a function; the loop a scanned body
sits in), the profile takes the usual case and says so in `notes`, one line per kind of op, never silently.

Each profile satisfies the convention-profile protocol: `name`, `title`, `source` (the file in the peer's repository
whose rules it follows) and `apply(report) -> Explanation`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from pytest_flopbudget._explain import items as reasons
from pytest_flopbudget._explain.items import Explanation, Item
from pytest_flopbudget._explain.kinds import FUSED_ATTENTION, is_multiply_accumulate, kind, stem
from pytest_flopbudget._explain.match import split
from pytest_flopbudget._metrics import BYTES
from pytest_flopbudget._report import LayerCost, OpCost, Report


class Profile(Protocol):
    """A convention: the figure a peer (or a stack) would report for a Report's model, itemised against ours."""

    name: str
    title: str
    source: str

    def apply(self, report: Report) -> Explanation: ...


@dataclasses.dataclass(frozen=True)
class Op:
    """One op of one layer of a Report, as a rule reads it."""

    layer: str
    name: str
    cost: OpCost
    owner: LayerCost
    report: Report

    @property
    def flops(self) -> int:
        return self.cost.flops

    @property
    def macs(self) -> int:
        return self.cost.macs

    @property
    def affine(self) -> bool:
        """Whether the layer holds parameters (a norm with a weight and bias: `affine`)."""
        return self.owner.params > 0

    @property
    def training(self) -> bool:
        return self.report.training or self.report.train_mode

    def outputs(self) -> int | None:
        """The output elements of a reduction whose FLOPs are its inputs (1 per input element), read back from its
        bytes (inputs read and outputs written at one element size); None where no one size fits."""
        moved, inputs = self.cost.get(BYTES), self.flops
        fits = [
            moved // size - inputs
            for size in (1, 2, 4, 8)
            if moved % size == 0 and 0 < moved // size - inputs <= inputs
        ]
        return fits[0] if len(fits) == 1 else None


@dataclasses.dataclass(frozen=True)
class Priced:
    """The peer's figure for one op, in its unit; `reason` and `detail` say why where it differs (for a zero:
    why the peer has nothing), and `inexact` is the note to give where the rule guessed."""

    theirs: int
    reason: str = ""
    detail: str = ""
    inexact: str = ""


Rule = Callable[[Op], Priced]


@dataclasses.dataclass
class PeerProfile:
    """A peer's convention: its unit and one rule over our ops. Its fields are plain attributes (not frozen), as the
    convention-profile protocol declares them."""

    name: str
    title: str
    source: str
    unit: str
    rule: Rule
    #: Notes every application gives (what a Report cannot tell this peer's rule).
    always: tuple[str, ...] = ()

    def apply(self, report: Report) -> Explanation:
        found: list[Item] = []
        notes: list[str] = []
        theirs = 0
        for path, layer in report.layers.items():
            for name, cost in layer.ops.items():
                if not cost.flops and not cost.macs:
                    continue
                op = Op(path, name, cost, layer, report)
                priced = self.rule(op)
                theirs += priced.theirs
                if priced.inexact and priced.inexact not in notes:
                    notes.append(priced.inexact)
                if priced.reason and priced.theirs and priced.theirs != op.flops and not is_multiply_accumulate(name):
                    found.append(Item(path, name, op.flops, priced.theirs, priced.reason, detail=priced.detail))
                    continue
                zero = (priced.reason or reasons.COUNTED_AS_ZERO, priced.detail or f"{self.name} prices it at zero")
                found.extend(split(path, name, op.flops, op.macs, priced.theirs, self.unit, zero))
        if report.skipped_ops:
            notes.append(f"we skipped {report.skipped_calls} op calls (no formula): neither figure has them")
        return Explanation(
            peer=self.name,
            title=self.title,
            version="profile",
            unit=self.unit,
            ours=report.flops,
            theirs=theirs,
            items=tuple(found),
            notes=(*notes, *self.always),
        )


def _same(op: Op) -> Priced:
    return Priced(op.flops)


def _zero(reason: str, detail: str) -> Priced:
    return Priced(0, reason, detail)


# --- fvcore ----------------------------------------------------------------------------------------------------

#: fvcore's `_IGNORED_OPS` (fvcore/nn/jit_analysis.py) that cost anything here: counted as zero by design.
FVCORE_IGNORED = frozenset({"relu", "clamp", "max", "eq", "ge", "gt", "floor", "floor_divide", "remainder",
                            "masked_fill", "index_put", "bitwise_not", "and"})  # fmt: skip


def fvcore_rule(op: Op) -> Priced:
    """fvcore/nn/jit_handles.py: a multiply-accumulate is 1 (no bias); batch norm in eval 2 per element with an
    affine (1 without), in training 5 (4); layer and group norm 5 (4); adaptive average pool 1 per input element;
    `_IGNORED_OPS` zero; anything without a handle zero, with a warning."""
    name, family = op.name, kind(op.name)
    if name in FUSED_ATTENTION:
        return _zero(reasons.FUSED_ATTENTION, "fvcore has no handle for the fused attention kernel")
    if is_multiply_accumulate(name):
        return Priced(op.macs)
    if family == "batch_norm":
        if not op.training:
            return Priced(op.flops // 2)  # ours 4 (2 without affine) per element, fvcore 2 (1)
        return Priced(op.flops * 5 // 8 if op.affine else op.flops * 4 // 6)
    if family in ("layer_norm", "group_norm"):
        return Priced(op.flops * 5 // 8 if op.affine else op.flops * 4 // 6)
    if family == "avg_pool":
        note = "fvcore: aten.mean taken as an adaptive average pool (1 per input element); a torch.mean has no "
        note += "handle there (0)"
        return Priced(op.flops, inexact=note if stem(name) == "mean" else "")
    if stem(name) in FVCORE_IGNORED:
        return _zero(reasons.COUNTED_AS_ZERO, "in fvcore's ignored ops")
    return _zero(reasons.NOT_SUPPORTED, "fvcore has no handle for it (it warns)")


# --- thop ------------------------------------------------------------------------------------------------------

THOP_ZERO = frozenset(
    {"relu", "relu6", "hardtanh", "leaky_relu", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
     "max_pool3d_with_indices", "adaptive_max_pool2d", "dropout"}
)  # fmt: skip


def thop_rule(op: Op) -> Priced:
    """thop/vision/basic_hooks.py and calc_func.py, by module type: convolutions and linear layers their MACs
    (no bias), norms 2 per element (4 with an affine), ReLU and max pooling zero, an adaptive average pool its
    kernel plus 1 per output; any op outside a hooked module is unseen."""
    name, family = op.name, kind(op.name)
    if family in ("conv", "conv_transpose") or stem(name) in ("addmm", "linear", "mm"):
        note = "thop: aten.mm taken as an nn.Linear without bias (hooked); a torch.matmul in a forward is unseen"
        return Priced(op.macs, inexact=note if stem(name) == "mm" else "")
    if is_multiply_accumulate(name):
        return _zero(reasons.MISSED_BY_HOOKS, "thop hooks no module that runs it (a matmul in a forward)")
    if family == "batch_norm":
        if not op.training:
            return Priced(op.flops)  # ours 4 (2) per element in eval, thop 2 * 2 with an affine (2)
        return Priced(op.flops // 2 if op.affine else op.flops // 3)
    if family == "layer_norm":
        return Priced(op.flops // 2 if op.affine else op.flops // 3)  # ours 8 (6), thop 4 (2)
    if family == "avg_pool":
        outputs = op.outputs()
        if outputs is None:
            return Priced(op.flops, inexact="thop: an adaptive average pool's outputs are not known here")
        return Priced(op.flops + outputs, reasons.PER_ELEMENT, f"thop adds 1 per output ({outputs:,})")
    if stem(name) in THOP_ZERO:
        return _zero(reasons.COUNTED_AS_ZERO, "thop's zero_ops")
    if family == "add":
        return _zero(reasons.RESIDUAL_ADD_MISSED, "`x + y` in a module's own forward: no hook sees it")
    return _zero(reasons.NOT_SUPPORTED, "thop has no hook for the module that runs it")


# --- ptflops ---------------------------------------------------------------------------------------------------

PTFLOPS_ACTIVATIONS = frozenset({"relu", "relu6", "elu", "leaky_relu", "prelu"})


def ptflops_rule(op: Op) -> Priced:
    """ptflops/pytorch_ops.py (pytorch backend): convolutions and linear layers their MACs plus the bias, batch norm
    1 per element (2 with an affine), activations 1 per element, pools 1 per input element, each module's hook
    and again the patched `torch.nn.functional` call its forward makes (`nn.ReLU` and `F.relu`: twice); a `x + y`
    reaches neither."""
    name, family = op.name, kind(op.name)
    if name in FUSED_ATTENTION:
        return _zero(reasons.FUSED_ATTENTION, "ptflops has no rule for the fused attention kernel")
    if is_multiply_accumulate(name):
        return Priced(op.macs + op.flops - 2 * op.macs)  # the bias add counted, 1 per output element
    if family == "batch_norm":
        if not op.training:
            return Priced(op.flops // 2)  # ours 4 (2) per element, ptflops 2 (1)
        return Priced(op.flops // 4 if op.affine else op.flops // 6)
    if stem(name) in PTFLOPS_ACTIVATIONS:
        return Priced(2 * op.flops, reasons.COUNTED_TWICE, "the module's hook and the patched F call, 1 each",
                      inexact="ptflops: an activation taken as a module (its hook and F's patch: 2 per element); "
                      "an F call alone counts 1")  # fmt: skip
    if family in ("max_pool", "avg_pool"):
        return Priced(2 * op.flops, reasons.COUNTED_TWICE, "the module's hook and the patched F call",
                      inexact="ptflops: a pool taken as a module whose windows tile its input (1 per input element, "
                      "twice); overlapping or padded windows differ")  # fmt: skip
    if family == "add":
        return _zero(reasons.RESIDUAL_ADD_MISSED, "`x + y` reaches no hook or patched function")
    return _zero(reasons.NOT_SUPPORTED, "ptflops has no hook or patch for it")


# --- TensorFlow's profiler -------------------------------------------------------------------------------------

#: The op types TensorFlow's profiler has a flops rule for (`ops.RegisterStatistics(..., "flops")`, TensorFlow 2.21).
TF_PROFILER_RULES = frozenset(
    {
        "Add", "AddN", "AddV2", "ArgMax", "ArgMin", "AssignAdd", "AssignSub", "AvgPool", "AvgPoolGrad",
        "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "BiasAdd", "BiasAddGrad", "Conv2D", "Conv2DBackpropFilter",
        "Conv2DBackpropInput", "Conv3D", "DepthwiseConv2dNative", "Dilation2D", "Equal", "Greater", "GreaterEqual",
        "L2Loss", "Less", "LessEqual", "Log", "MatMul", "MaxPool", "MaxPoolGrad", "Maximum", "Mean", "Minimum",
        "Mul", "Neg", "NotEqual", "Pow", "RealDiv", "Reciprocal", "Rsqrt", "RsqrtGrad", "Softmax", "Square",
        "SquaredDifference", "Sub", "Sum",
    }
)  # fmt: skip


def tf_profiler_rule(op: Op) -> Priced:
    """tensorflow/python/profiler/internal/flops_registry.py: no rule, no flops; `Rsqrt` 2 per element; `Sum`,
    `ArgMax`, `ArgMin`, `BiasAddGrad` n - 1 adds per output; the rest as ours."""
    name = op.name
    if name == "keras_rule":  # a layer priced by rule: the ops it ran keep their calls, not their FLOPs
        replaced = {other for other, cost in op.owner.ops.items() if other != name and not cost.flops}
        ruled = replaced & TF_PROFILER_RULES
        if not ruled:
            return _zero(
                reasons.NOT_SUPPORTED, f"the profiler registers no flops rule for {', '.join(sorted(replaced))}"
            )
        if ruled == {"Mean"}:
            return _same(op)  # a mean pool: 1 per input element both ways
        return Priced(op.flops, inexact="tf-profiler: a Keras layer priced by the shared rule (a norm) is taken at "
                      "our figure; the profiler prices the ops Keras writes (count with keras_rules=False, or run "
                      "--vs tf-profiler)")  # fmt: skip
    if name not in TF_PROFILER_RULES:
        return _zero(reasons.NOT_SUPPORTED, f"the profiler registers no flops rule for {name}")
    if name == "Rsqrt":
        return Priced(2 * op.flops, reasons.PER_ELEMENT, "the profiler counts Rsqrt as 2 per element")
    if name in ("Sum", "ArgMax", "ArgMin", "BiasAddGrad"):
        return Priced(op.flops, inexact=f"tf-profiler: {name}'s outputs are not known here (it counts n - 1 adds "
                      "per output); taken at our figure")  # fmt: skip
    return _same(op)


# --- XLA's cost analysis ---------------------------------------------------------------------------------------

#: HLO ops XLA's HloCostAnalysis counts as transcendentals, not flops (the jaxpr primitives that lower to them).
XLA_TRANSCENDENTAL = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "rsqrt", "sqrt", "cbrt", "pow",
                                "sin", "cos", "tan", "atan2", "erf", "erf_inv", "asin", "acos", "atan", "sinh",
                                "cosh", "asinh", "acosh", "atanh", "lgamma", "digamma"})  # fmt: skip
XLA_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or"})


def xla_rule(op: Op) -> Priced:
    """xla/service/hlo_cost_analysis.cc: transcendentals apart from flops, a reduction n - m adds, `logistic` 3
    flops per element (and a transcendental), a dot 2 per multiply-accumulate, elementwise 1 per element."""
    name = op.name
    if name in XLA_TRANSCENDENTAL:
        return _zero(reasons.TRANSCENDENTAL, "XLA reports it among transcendentals")
    if name == "logistic":
        return Priced(3 * op.flops, reasons.PER_ELEMENT, "XLA: exp-based, 3 flops per element and a transcendental")
    if name in XLA_REDUCTIONS:
        outputs = op.outputs()
        if outputs is None:
            return Priced(op.flops, inexact=f"xla: {name}'s outputs are not known here (XLA counts n - m); taken "
                          "at our figure")  # fmt: skip
        return Priced(op.flops - outputs, reasons.REDUCTION, f"{outputs:,} outputs")
    if "." in name:  # a named composite (jax.nn.gelu, flax.nnx.LayerNorm): XLA costs its primitives
        return Priced(op.flops, inexact="xla: a named composite (a norm layer, softmax) is taken at our rule's "
                      "figure; XLA costs the primitives it is made of (run --vs xla)")  # fmt: skip
    if name in ("argmax", "argmin", "integer_pow", "cumsum", "cumlogsumexp", "cummax", "cumprod", "sort"):
        return Priced(op.flops, inexact=f"xla: {name} taken at our figure (XLA's figure needs its shapes)")
    return _same(op)


# --- the profiles ----------------------------------------------------------------------------------------------

FVCORE = PeerProfile(
    "fvcore",
    "fvcore's FlopCountAnalysis: MACs of convolutions and matmuls, norms by its handles, the rest zero",
    "https://github.com/facebookresearch/fvcore/blob/main/fvcore/nn/jit_handles.py",
    "macs",
    fvcore_rule,
)
PTFLOPS = PeerProfile(
    "ptflops",
    "ptflops (pytorch backend): MACs with the bias, module hooks and patched functionals",
    "https://github.com/sovrasov/flops-counter.pytorch/blob/master/ptflops/pytorch_ops.py",
    "macs",
    ptflops_rule,
)
THOP = PeerProfile(
    "thop",
    "thop's profile: MACs without the bias, by the hooked module types only",
    "https://github.com/Lyken17/pytorch-OpCounter/blob/master/thop/vision/basic_hooks.py",
    "macs",
    thop_rule,
)
TF_PROFILER = PeerProfile(
    "tf-profiler",
    "TensorFlow's profiler (float_operation): its registered rules, zero for the rest",
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/profiler/internal/flops_registry.py",
    "flops",
    tf_profiler_rule,
    always=(
        "tf-profiler: the profiler drops an op with an unknown dim; a Report is counted at known shapes, so this "
        "profile drops none (run --vs tf-profiler on a graph traced with the batch unknown)",
    ),
)
XLA = PeerProfile(
    "xla",
    "XLA's cost analysis: transcendentals apart, reductions n - m, a loop body once",
    "https://github.com/openxla/xla/blob/main/xla/service/hlo_cost_analysis.cc",
    "flops",
    xla_rule,
    always=(
        "xla: XLA costs a scan's or while's body once (plus 2 for its counter); a Report keeps no loop structure, "
        "so this profile counts every iteration as our count does (run --vs xla for a scanned model)",
    ),
)

#: The peer-convention profiles, for the convention registry (`_conventions/registry.py` reads a module's
#: `PROFILES`).
PEER_PROFILES: tuple[PeerProfile, ...] = (FVCORE, PTFLOPS, THOP, TF_PROFILER, XLA)
PROFILES = PEER_PROFILES


def profile_named(name: str) -> PeerProfile | None:
    return next((profile for profile in PEER_PROFILES if profile.name == name), None)
