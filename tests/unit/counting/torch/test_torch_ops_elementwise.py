"""Elementwise ops, activations, softmax, reductions, indexing, dropout, in-place variants, hand-derived.

Conventions (formulas.py): 1 FLOP per output element for arithmetic, comparisons, activations and their backwards;
fused kernels count what they fuse (addcmul, addcdiv, lerp, glu: 2; glu_backward: 3); softmax / log_softmax 5 per
element, softmax backward 4; reductions 1 per *input* element, variance / std 3; scatter-adds 1 per source element.
Views, copies, indexing and embedding lookups are free.

Most tests use x = [2, 3, 4]: 24 elements.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_op_helpers import Call, op_costs  # noqa: E402
from torch_op_helpers import run as checked_run  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402

run = partial(checked_run, macs_free=True)  # nothing in this file is a multiply-accumulate


def x() -> torch.Tensor:
    return torch.randn(2, 3, 4)


# --- activations: 1 FLOP per element ---------------------------------------------------------------------------

ACTIVATIONS = [
    (nn.ReLU(), "aten.relu"),
    (nn.GELU(), "aten.gelu"),
    (nn.GELU(approximate="tanh"), "aten.gelu"),
    (nn.SiLU(), "aten.silu"),
    (nn.Sigmoid(), "aten.sigmoid"),
    (nn.Tanh(), "aten.tanh"),
    (nn.LeakyReLU(0.1), "aten.leaky_relu"),
    (nn.Hardswish(), "aten.hardswish"),
    (nn.Hardsigmoid(), "aten.hardsigmoid"),
    (nn.Softplus(), "aten.softplus"),
    (nn.ELU(), "aten.elu"),
    (nn.SELU(), "aten.elu"),  # SELU is elu with scales
    (nn.CELU(), "aten.celu"),
    (nn.Mish(), "aten.mish"),
    (nn.ReLU6(), "aten.hardtanh"),  # relu6 is hardtanh(0, 6)
    (nn.Hardtanh(), "aten.hardtanh"),
    (nn.LogSigmoid(), "aten.log_sigmoid_forward"),
    (nn.PReLU(), "aten._prelu_kernel"),
    (nn.Threshold(0.1, 0.0), "aten.threshold"),
]


@pytest.mark.parametrize(("module", "op"), ACTIVATIONS, ids=[type(m).__name__ for m, _ in ACTIVATIONS])
def test_activation_is_one_flop_per_element(module: nn.Module, op: str) -> None:
    # 2*3*4 = 24 elements * 1
    assert op_costs(run(module, x())) == {op: (1, 24, 0)}


def test_composite_activations_count_their_parts() -> None:
    # softsign = x / (1 + |x|): abs, add, div = 3 * 24
    assert op_costs(run(nn.Softsign(), x())) == {"aten.abs": (1, 24, 0), "aten.add": (1, 24, 0), "aten.div": (1, 24, 0)}
    # tanhshrink = x - tanh(x): 2 * 24
    assert op_costs(run(nn.Tanhshrink(), x())) == {"aten.tanh": (1, 24, 0), "aten.sub": (1, 24, 0)}


def test_glu_is_two_flops_per_output_element() -> None:
    # glu halves dim -1: output [2, 3, 2] = 12 elements; sigmoid + multiply = 2 each -> 24
    assert op_costs(run(nn.GLU(), x())) == {"aten.glu": (1, 24, 0)}


@pytest.mark.parametrize(("fn", "op"), [(F.softmax, "aten._softmax"), (F.log_softmax, "aten._log_softmax")])
def test_softmax_is_five_flops_per_element(fn: Callable[..., Any], op: str) -> None:
    # max, subtract, exp, sum, divide (log_softmax: log): 5 * 24 = 120
    assert op_costs(run(lambda t: fn(t, -1), x())) == {op: (1, 120, 0)}


def test_softmax_composite_names_share_the_kernel_formula() -> None:
    # aten.softmax / log_softmax / _safe_softmax are decomposed or reached on other paths: same 5 per element
    softmax = TORCH_OPS.lookup("aten._softmax")
    for alias in ("aten._log_softmax", "aten._safe_softmax", "aten.softmax", "aten.log_softmax"):
        assert TORCH_OPS.lookup(alias) is softmax
    assert TORCH_OPS.lookup("aten._log_softmax_backward_data") is TORCH_OPS.lookup("aten._softmax_backward_data")


def test_softmin_and_softmax2d() -> None:
    # softmin = softmax(-x): neg 24 + softmax 120
    assert op_costs(run(nn.Softmin(-1), x())) == {"aten.neg": (1, 24, 0), "aten._softmax": (1, 120, 0)}
    # Softmax2d over channels of [1, 2, 3, 3]: 18 * 5
    assert op_costs(run(nn.Softmax2d(), torch.randn(1, 2, 3, 3))) == {"aten._softmax": (1, 90, 0)}


# --- elementwise arithmetic with broadcasting: cost per OUTPUT element -----------------------------------------


def test_add_broadcast_counts_output_elements() -> None:
    # [2, 3, 4] + [3, 1] broadcasts to 24 outputs
    assert op_costs(run(torch.add, x(), torch.randn(3, 1))) == {"aten.add": (1, 24, 0)}


def test_broadcast_output_bigger_than_either_input() -> None:
    # [3, 1] * [1, 4] -> [3, 4]: 12 multiplies although the inputs have 3 and 4 elements
    assert op_costs(run(torch.mul, torch.randn(3, 1), torch.randn(1, 4))) == {"aten.mul": (1, 12, 0)}


def test_chained_arithmetic_with_scalars() -> None:
    # (x * 2 + 1) / 3 - y, y of shape [4]: 4 ops * 24
    report = run(lambda a, b: (a * 2 + 1) / 3 - b, x(), torch.randn(4))
    assert op_costs(report) == {
        "aten.mul": (1, 24, 0),
        "aten.add": (1, 24, 0),
        "aten.div": (1, 24, 0),
        "aten.sub": (1, 24, 0),
    }


def test_unary_math_chain() -> None:
    # exp, log, sqrt, abs, pow, reciprocal, rsqrt, sin, cos: 9 * 24
    report = run(lambda t: t.exp().log().sqrt().abs().pow(2).reciprocal().rsqrt().sin().cos(), x())
    assert report.flops == 9 * 24
    assert all(calls == 1 and flops == 24 for calls, flops, _ in op_costs(report).values())


def test_comparisons_and_selection() -> None:
    # maximum with broadcasting: 24; torch.max(a, b) is maximum too
    assert op_costs(run(torch.maximum, x(), torch.randn(4))) == {"aten.maximum": (1, 24, 0)}
    assert op_costs(run(torch.max, x(), torch.randn(4))) == {"aten.maximum": (1, 24, 0)}
    # clamp: 24; where(x > 0, x, 0): the comparison 24, the select is free
    assert op_costs(run(lambda t: t.clamp(-1, 1), x())) == {"aten.clamp": (1, 24, 0)}
    assert op_costs(run(lambda t: torch.where(t > 0, t, 0.0), x())) == {"aten.gt": (1, 24, 0)}


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (torch.addcmul, "aten.addcmul"),
        (torch.addcdiv, "aten.addcdiv"),
        (lambda a, b, c: torch.lerp(a, b, c), "aten.lerp"),
    ],
)
def test_fused_ternary_ops_are_two_flops_per_element(fn: Callable[..., Any], op: str) -> None:
    # a + b*c (or a + b/c, a + w*(b - a)): 2 * 24 = 48
    assert op_costs(run(fn, x(), x(), x())) == {op: (1, 48, 0)}


def positive() -> torch.Tensor:
    return torch.rand(2, 3, 4) + 1.5  # > 1: in the domain of acosh, log, lgamma, ...


def unit() -> torch.Tensor:
    return torch.rand(2, 3, 4) * 0.8 + 0.1  # in (0, 1): in the domain of acos, atanh, logit, erfinv, ...


def ints() -> torch.Tensor:
    return torch.randint(0, 7, (2, 3, 4))


#: the rest of ELEMENTWISE_OPS, each reached through its public torch function: 1 FLOP per output element (24)
UNARY = [
    (torch.acos, unit, "aten.acos"),
    (torch.acosh, positive, "aten.acosh"),
    (torch.asin, unit, "aten.asin"),
    (torch.asinh, positive, "aten.asinh"),
    (torch.atan, positive, "aten.atan"),
    (torch.atanh, unit, "aten.atanh"),
    (torch.bitwise_not, ints, "aten.bitwise_not"),
    (torch.ceil, positive, "aten.ceil"),
    (torch.cosh, positive, "aten.cosh"),
    (torch.sinh, positive, "aten.sinh"),
    (torch.tan, unit, "aten.tan"),
    (torch.digamma, positive, "aten.digamma"),
    (torch.erf, positive, "aten.erf"),
    (torch.erfc, positive, "aten.erfc"),
    (torch.erfinv, unit, "aten.erfinv"),
    (torch.exp2, positive, "aten.exp2"),
    (torch.expm1, positive, "aten.expm1"),
    (torch.floor, positive, "aten.floor"),
    (torch.frac, positive, "aten.frac"),
    (torch.i0, positive, "aten.i0"),
    (torch.isinf, positive, "aten.isinf"),
    (torch.isnan, positive, "aten.isnan"),
    (torch.lgamma, positive, "aten.lgamma"),
    (torch.log10, positive, "aten.log10"),
    (torch.log1p, positive, "aten.log1p"),
    (torch.log2, positive, "aten.log2"),
    (torch.logical_not, positive, "aten.logical_not"),
    (torch.logit, unit, "aten.logit"),
    (torch.nan_to_num, positive, "aten.nan_to_num"),
    (lambda t: torch.polygamma(1, t), positive, "aten.polygamma"),
    (torch.rad2deg, positive, "aten.rad2deg"),
    (torch.deg2rad, positive, "aten.deg2rad"),
    (torch.round, positive, "aten.round"),
    (torch.sign, positive, "aten.sign"),
    (torch.sgn, positive, "aten.sgn"),
    (torch.signbit, positive, "aten.signbit"),
    (torch.sinc, positive, "aten.sinc"),
    (torch.trunc, positive, "aten.trunc"),
    (torch.neg, positive, "aten.neg"),
    (torch.square, positive, "aten.pow"),  # square is pow(x, 2)
    (lambda t: torch.clamp(t, max=1.0), positive, "aten.clamp"),
    (lambda t: torch.clip(t, 0, 1), positive, "aten.clamp"),
    (F.hardshrink, positive, "aten.hardshrink"),
    (F.softshrink, positive, "aten.softshrink"),
    (lambda t: F.rrelu(t, training=True), positive, "aten.rrelu_with_noise"),
]
BINARY = [
    (torch.atan2, "aten.atan2"),
    (torch.copysign, "aten.copysign"),
    (torch.eq, "aten.eq"),
    (torch.ne, "aten.ne"),
    (torch.ge, "aten.ge"),
    (torch.le, "aten.le"),
    (torch.lt, "aten.lt"),
    (torch.floor_divide, "aten.floor_divide"),
    (torch.fmax, "aten.fmax"),
    (torch.fmin, "aten.fmin"),
    (torch.fmod, "aten.fmod"),
    (torch.remainder, "aten.remainder"),
    (torch.heaviside, "aten.heaviside"),
    (torch.hypot, "aten.hypot"),
    (torch.minimum, "aten.minimum"),
    (torch.logical_and, "aten.logical_and"),
    (torch.logical_or, "aten.logical_or"),
    (torch.logical_xor, "aten.logical_xor"),
    (torch.xlogy, "aten.xlogy"),
    (torch.special.xlog1py, "aten.special_xlog1py"),
    (torch.rsub, "aten.rsub"),
    (torch.true_divide, "aten.div"),
]
INTEGER_BINARY = [
    (torch.bitwise_and, "aten.bitwise_and"),
    (torch.bitwise_or, "aten.bitwise_or"),
    (torch.bitwise_xor, "aten.bitwise_xor"),
    (torch.bitwise_left_shift, "aten.bitwise_left_shift"),
    (torch.bitwise_right_shift, "aten.bitwise_right_shift"),
]


@pytest.mark.parametrize(("fn", "make", "op"), UNARY, ids=[f"{op}-{i}" for i, (_, _, op) in enumerate(UNARY)])
def test_every_unary_elementwise_op(fn: Callable[..., Any], make: Callable[[], torch.Tensor], op: str) -> None:
    assert op_costs(run(fn, make())) == {op: (1, 24, 0)}


@pytest.mark.parametrize(("fn", "op"), BINARY + INTEGER_BINARY, ids=[op for _, op in BINARY + INTEGER_BINARY])
def test_every_binary_elementwise_op(fn: Callable[..., Any], op: str) -> None:
    make = ints if (fn, op) in INTEGER_BINARY else positive
    # [2, 3, 4] with [3, 4] broadcasts to 24 outputs: 24
    assert op_costs(run(fn, make(), make()[0])) == {op: (1, 24, 0)}


def test_composite_elementwise_ops() -> None:
    # isfinite decomposes: x == x (not NaN) and |x| != inf: abs, ne, eq, and the mul that combines them = 4 * 24
    report = run(torch.isfinite, positive())
    assert report.flops == 96
    assert op_costs(report) == {
        "aten.abs": (1, 24, 0),
        "aten.ne": (1, 24, 0),
        "aten.eq": (1, 24, 0),
        "aten.mul": (1, 24, 0),
    }


def test_native_dropout_kernel() -> None:
    aten = torch.ops.aten
    # the fused dropout kernel (CUDA's path; callable on the CPU): 1 per element for the masked scale
    forward = count(Call(lambda t: aten.native_dropout(t, 0.5, True)[0]), x())
    assert op_costs(forward) == {"aten.native_dropout": (1, 24, 0)}
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    backward = count(Call(lambda g, m: aten.native_dropout_backward(g, m, 2.0)), x(), mask)
    assert op_costs(backward) == {"aten.native_dropout_backward": (1, 24, 0)}


# --- reductions: per INPUT element -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "op", "flops"),
    [
        (lambda t: t.sum(), "aten.sum", 24),
        (lambda t: t.sum(-1), "aten.sum", 24),  # 6 outputs, still 24 input elements
        (lambda t: t.mean((0, 1)), "aten.mean", 24),
        (lambda t: t.amax(-1), "aten.amax", 24),
        (lambda t: t.amin(0), "aten.amin", 24),
        (lambda t: t.max(), "aten.max", 24),
        (lambda t: t.max(-1)[0], "aten.max", 24),
        (lambda t: t.argmax(), "aten.argmax", 24),
        (lambda t: t.prod(-1), "aten.prod", 24),
        (lambda t: t.norm(), "aten.linalg_vector_norm", 24),
        (lambda t: t.logsumexp(-1), "aten.logsumexp", 24),
        (lambda t: t.cumsum(-1), "aten.cumsum", 24),  # a scan: 1 per element
        (lambda t: t.cumprod(0), "aten.cumprod", 24),
        (lambda t: t.logcumsumexp(0), "aten.logcumsumexp", 24),
        (lambda t: t.var(-1), "aten.var", 3 * 24),  # variance: subtract, square, add = 3 per input element
        (lambda t: t.std(), "aten.std", 3 * 24),
        (lambda t: t.std(0, correction=0), "aten.std", 3 * 24),
        (lambda t: torch.aminmax(t, dim=-1), "aten.aminmax", 24),
        (lambda t: t.argmin(), "aten.argmin", 24),
        (lambda t: t.min(), "aten.min", 24),
        (lambda t: t.all(), "aten.all", 24),
        (lambda t: t.any(-1), "aten.any", 24),
        (lambda t: torch.count_nonzero(t), "aten.count_nonzero", 24),
        (lambda t: torch.cummax(t, 0)[0], "aten.cummax", 24),
        (lambda t: torch.cummin(t, 0)[0], "aten.cummin", 24),
        (lambda t: torch.nansum(t), "aten.nansum", 24),
        (lambda t: torch.norm(t, 3), "aten.linalg_vector_norm", 24),
        (lambda t: torch.var_mean(t, -1), "aten.var_mean", 3 * 24),
        (lambda t: torch.std_mean(t, -1), "aten.std_mean", 3 * 24),
    ],
)
def test_reduction(fn: Callable[..., Any], op: str, flops: int) -> None:
    assert op_costs(run(fn, x())) == {op: (1, flops, 0)}


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (torch._is_all_true, "aten._is_all_true"),  # what torch._check_tensor_all and distributions' checks call
        (torch._is_any_true, "aten._is_any_true"),
    ],
)
def test_bool_all_reductions_are_one_flop_per_element(fn: Callable[..., Any], op: str) -> None:
    # like aten.all: 1 per input element of the bool tensor: 2*3*4 = 24; the comparison t > 0 is 24 more
    report = run(lambda t: fn(t > 0), x())
    assert op_costs(report) == {"aten.gt": (1, 24, 0), op: (1, 24, 0)}


def test_check_tensor_all_counts_its_reduction() -> None:
    # torch._check_tensor_all(cond) is cond._is_all_true().item(): gt 24 + _is_all_true 24, then the mul 24
    def checked(t: torch.Tensor) -> torch.Tensor:
        torch._check_tensor_all(t > -100)
        return t * 2

    report = run(checked, x())
    assert op_costs(report) == {"aten.gt": (1, 24, 0), "aten._is_all_true": (1, 24, 0), "aten.mul": (1, 24, 0)}


def test_einsum_style_reductions_and_normalize() -> None:
    # F.normalize over the last dim of [2, 3, 4]: norm 24, clamp_min on 6 norms, divide 24 -> 54
    report = run(lambda t: F.normalize(t, dim=-1), x())
    assert op_costs(report) == {
        "aten.linalg_vector_norm": (1, 24, 0),
        "aten.clamp_min": (1, 6, 0),
        "aten.div": (1, 24, 0),
    }


# --- free ops: views, indexing, embedding lookups --------------------------------------------------------------


def test_embedding_lookup_is_free() -> None:
    report = run(nn.Embedding(10, 4), torch.tensor([[1, 2, 3]]))
    assert (report.flops, report.macs, report.params) == (0, 0, 40)
    assert op_costs(report) == {}


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: torch.gather(t, 2, torch.zeros(2, 3, 2, dtype=torch.long)),
        lambda t: t[:, 1:, ::2].transpose(0, 2).reshape(-1),
        lambda t: t.permute(2, 0, 1).contiguous().view(4, 6),
        lambda t: torch.cat([t, t], 0).flip(0).roll(1, -1),
        lambda t: t.index_select(1, torch.tensor([0, 2])),
        lambda t: t[:, [0, 2]],
        lambda t: t.masked_fill(torch.ones(2, 3, 4, dtype=torch.bool), 0.0),
        lambda t: F.pad(t, (1, 1)),
        lambda t: F.pad(t, (1, 1), mode="reflect"),
        lambda t: t.repeat(1, 2, 1).expand(3, 2, 6, 4).tril(),
        lambda t: F.pixel_shuffle(t.reshape(1, 4, 3, 2), 2),
        lambda t: F.unfold(t.reshape(1, 2, 3, 4), 2),
        lambda t: t.to(torch.float64).float().clone(),
    ],
)
def test_free_ops(fn: Callable[..., Any]) -> None:
    report = run(fn, x())
    assert (report.flops, report.macs) == (0, 0)
    assert op_costs(report) == {}


ADD = {"aten.add": (1, 24, 0)}


@pytest.mark.parametrize(
    ("fill", "expected"),
    [
        (lambda t: torch.arange(24, dtype=t.dtype), ADD),
        (lambda t: torch.linspace(0, 1, 24), ADD),
        # the Tensor_Tensor overload: the ends cost their reductions, amin and amax over 24 elements each
        (lambda t: torch.linspace(t.amin(), t.amax(), 24), {**ADD, "aten.amin": (1, 24, 0), "aten.amax": (1, 24, 0)}),
    ],
    ids=["arange", "linspace", "linspace-tensor-ends"],
)
def test_linspace_is_a_free_fill_like_arange(fill: Callable[..., Any], expected: dict[str, Any]) -> None:
    # a generated sequence is allocation, like arange: free. Only the add uses it: 2*3*4 = 24
    report = run(lambda t: t + fill(t).view(2, 3, 4), x())
    assert op_costs(report) == expected


# --- scatter / index arithmetic --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (lambda t, s: t.index_add(0, torch.tensor([0, 1, 0]), s), "aten.index_add"),
        (lambda t, s: t.scatter_add(0, torch.zeros(3, 4, dtype=torch.long), s), "aten.scatter_add"),
        (lambda t, s: t.scatter_reduce(0, torch.zeros(3, 4, dtype=torch.long), s, "amax"), "aten.scatter_reduce"),
        pytest.param(
            lambda t, s: t.index_reduce(0, torch.tensor([0, 1, 0]), s, "prod"),
            "aten.index_reduce",
            marks=pytest.mark.filterwarnings("ignore:index_reduce"),
        ),
        (lambda t, s: t.index_put((torch.tensor([0, 1, 0]),), s, accumulate=True), "aten.index_put"),
    ],
)
def test_scatter_adds_cost_one_flop_per_source_element(fn: Callable[..., Any], op: str) -> None:
    # source [3, 4] = 12 elements combined into the destination
    assert op_costs(run(fn, torch.randn(2, 4), torch.randn(3, 4))) == {op: (1, 12, 0)}


def test_index_put_impl_shares_the_index_put_formula() -> None:
    assert TORCH_OPS.lookup("aten._index_put_impl") is TORCH_OPS.lookup("aten.index_put")


def test_plain_index_put_is_a_copy() -> None:
    # x[idx] = v without accumulate: a formula that returns zero cost
    report = run(lambda t, s: t.index_put((torch.tensor([0, 1]),), s), torch.randn(2, 4), torch.randn(2, 4))
    assert op_costs(report) == {"aten.index_put": (1, 0, 0)}


def test_scatter_with_reduce_is_not_free() -> None:
    index = torch.zeros(3, 4, dtype=torch.long)
    report = count(Call(lambda t, s: t.scatter(0, index, s, reduce="add")), torch.randn(2, 4), torch.randn(3, 4))
    # 12 source elements added into the destination, like scatter_add
    assert report.flops == 12


# --- dropout ---------------------------------------------------------------------------------------------------


def test_dropout_in_train_mode_on_cpu() -> None:
    report = run(nn.Dropout(0.5).train(), x())
    # CPU decomposition: mask = bernoulli(1 - p) (counted 1 per element), mask / (1 - p), x * mask: 3 * 24
    assert op_costs(report) == {"aten.bernoulli": (1, 24, 0), "aten.div": (1, 24, 0), "aten.mul": (1, 24, 0)}
    assert op_costs(run(lambda t: F.dropout(t, 0.5, training=True), x())) == op_costs(report)


def test_dropout_in_eval_mode_is_free() -> None:
    report = run(nn.Dropout(0.5).eval(), x())
    assert (report.flops, op_costs(report)) == (0, {})


# --- in-place variants count like the out-of-place op ----------------------------------------------------------


@pytest.mark.parametrize(
    ("inplace", "outofplace", "op"),
    [
        (lambda a, b: a.add_(b), lambda a, b: a.add(b), "aten.add"),
        (lambda a, b: a.mul_(b), lambda a, b: a * b, "aten.mul"),
        (lambda a, b: torch.relu_(a), lambda a, b: torch.relu(a), "aten.relu"),
        (lambda a, b: F.relu(a, inplace=True), lambda a, b: F.relu(a), "aten.relu"),
        (lambda a, b: a.sigmoid_(), lambda a, b: a.sigmoid(), "aten.sigmoid"),
        (lambda a, b: a.clamp_(-1, 1), lambda a, b: a.clamp(-1, 1), "aten.clamp"),
        (lambda a, b: a.addcmul_(a, b), lambda a, b: a.addcmul(a, b), "aten.addcmul"),
        (lambda a, b: F.leaky_relu(a, inplace=True), lambda a, b: F.leaky_relu(a), "aten.leaky_relu"),
    ],
)
def test_inplace_counts_like_out_of_place(inplace: Callable[..., Any], outofplace: Callable[..., Any], op: str) -> None:
    a, b = x(), torch.randn(3, 4)
    in_place = run(inplace, a.clone(), b)
    out_of_place = run(outofplace, a.clone(), b)
    assert op_costs(in_place) == op_costs(out_of_place)
    assert op_costs(in_place)[op][0] == 1
    assert in_place.flops == out_of_place.flops > 0


def test_inplace_chain_in_a_module() -> None:
    class Block(nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            t = t.clone()
            t.mul_(2).add_(1)
            return t.relu_()

    # mul 24 + add 24 + relu 24 = 72
    assert op_costs(run(Block(), x())) == {"aten.mul": (1, 24, 0), "aten.add": (1, 24, 0), "aten.relu": (1, 24, 0)}


# --- backward --------------------------------------------------------------------------------------------------

ACTIVATION_BACKWARDS = [
    (nn.ReLU(), "aten.threshold_backward"),
    (nn.GELU(), "aten.gelu_backward"),
    (nn.SiLU(), "aten.silu_backward"),
    (nn.Sigmoid(), "aten.sigmoid_backward"),
    (nn.Tanh(), "aten.tanh_backward"),
    (nn.LeakyReLU(), "aten.leaky_relu_backward"),
    (nn.Hardswish(), "aten.hardswish_backward"),
    (nn.Hardsigmoid(), "aten.hardsigmoid_backward"),
    (nn.Softplus(), "aten.softplus_backward"),
    (nn.ELU(), "aten.elu_backward"),
    (nn.Mish(), "aten.mish_backward"),
    (nn.Hardtanh(), "aten.hardtanh_backward"),
    (nn.LogSigmoid(), "aten.log_sigmoid_backward"),
]


@pytest.mark.parametrize(
    ("module", "op"), ACTIVATION_BACKWARDS, ids=[type(m).__name__ for m, _ in ACTIVATION_BACKWARDS]
)
def test_activation_backward_is_one_flop_per_element(module: nn.Module, op: str) -> None:
    report = run(module, x().requires_grad_(), training=True)
    # forward 24 + loss sum 24; backward 24
    assert op_costs(report)[op] == (1, 24, 0)
    assert (report.forward.flops, report.backward.flops) == (48, 24)


def test_prelu_backward() -> None:
    report = run(nn.PReLU(), x().requires_grad_(), training=True)
    assert op_costs(report)["aten._prelu_kernel_backward"] == (1, 24, 0)


def test_glu_backward_is_three_flops_per_input_element() -> None:
    report = run(nn.GLU(), x().requires_grad_(), training=True)
    # forward 12 outputs * 2 = 24, loss sum over 12; backward: gradient for all 24 inputs * 3 = 72
    assert op_costs(report) == {"aten.glu": (1, 24, 0), "aten.sum": (1, 12, 0), "aten.glu_backward": (1, 72, 0)}


@pytest.mark.parametrize(
    ("fn", "forward_op", "backward_op"),
    [
        (lambda t: F.softmax(t, -1), "aten._softmax", "aten._softmax_backward_data"),
        (lambda t: F.log_softmax(t, -1), "aten._log_softmax", "aten._log_softmax_backward_data"),
    ],
)
def test_softmax_backward_is_four_flops_per_element(fn: Callable[..., Any], forward_op: str, backward_op: str) -> None:
    report = run(fn, x().requires_grad_(), training=True)
    # forward 5 * 24 = 120, loss sum 24; backward: multiply, sum, subtract, multiply = 4 * 24 = 96
    assert op_costs(report) == {forward_op: (1, 120, 0), "aten.sum": (1, 24, 0), backward_op: (1, 96, 0)}


def test_embedding_backward_adds_each_gradient_row() -> None:
    report = run(nn.Embedding(10, 4), torch.tensor([[1, 2, 3]]), training=True)
    # output [1, 3, 4] = 12; loss sum 12; backward: 12 gradient elements summed into the weight rows
    assert op_costs(report) == {"aten.sum": (1, 12, 0), "aten.embedding_dense_backward": (1, 12, 0)}
    assert (report.forward.flops, report.backward.flops) == (12, 12)


def test_dropout_backward() -> None:
    report = run(nn.Dropout(0.5), x().requires_grad_(), training=True)
    # forward bernoulli + div + mul + loss sum = 4 * 24; backward: grad * mask = 24
    assert (report.forward.flops, report.backward.flops) == (96, 24)


def test_elementwise_and_reduction_backward() -> None:
    report = run(lambda a, b: (a * b).mean(), x().requires_grad_(), x().requires_grad_(), training=True)
    # forward: mul 24 + mean 24 (the loss is already a scalar: its sum is over one element)
    # backward: mean backward divides the expanded grad (24), then grad_a = g * b and grad_b = g * a (24 each)
    assert report.forward.flops == 24 + 24 + 1
    assert report.backward.flops == 3 * 24


@pytest.mark.parametrize(
    "module", [nn.Hardshrink(), nn.Softshrink(), nn.RReLU()], ids=["hardshrink", "softshrink", "rrelu"]
)
def test_missing_activation_backwards(module: nn.Module) -> None:
    report = count(module, x().requires_grad_(), training=True)
    # forward 24 + loss 24; backward 1 per element = 24
    assert report.skipped == {}
    assert report.backward.flops == 24


def test_polar_is_four_flops_per_complex_element() -> None:
    # complex rotary tables (DeepSeek-V2, Llama 4): cos, sin and two multiplies per output element: 24 * 4 = 96
    costs = op_costs(run(torch.polar, x().abs(), x()))
    assert costs["aten.polar"] == (1, 96, 0)
