"""Matrix products, hand-derived: mm, addmm, bmm, baddbmm, addbmm, mv, addmv, dot, matmul, F.linear, einsum,
grouped_mm.

Convention (formulas.py): (M x K) @ (K x N) is M*N*K MACs = 2*M*N*K FLOPs; an addend (bias) is 1 FLOP per output
element, plus 1 FLOP per element for each of beta / alpha that is not 1.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_op_helpers import Call, op_costs, run  # noqa: E402

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.formulas import Cost  # noqa: E402
from pytest_flopbudget._counting.torch.ops import TORCH_OPS  # noqa: E402


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


# --- mm / addmm ------------------------------------------------------------------------------------------------


def test_mm() -> None:
    report = run(torch.mm, r(4, 6), r(6, 5))
    # 2*M*N*K = 2*4*5*6 = 240 FLOPs; M*N*K = 120 MACs
    assert op_costs(report) == {"aten.mm": (1, 240, 120)}
    assert (report.flops, report.macs) == (240, 120)


def test_addmm_bias_is_one_flop_per_output() -> None:
    report = run(torch.addmm, r(5), r(4, 6), r(6, 5))
    # 240 + bias add M*N = 4*5 = 20 -> 260
    assert op_costs(report) == {"aten.addmm": (1, 260, 120)}


@pytest.mark.parametrize(
    ("beta", "alpha", "flops"),
    [
        (1, 1, 240 + 20),  # add only
        (0.5, 2, 240 + 3 * 20),  # beta*C, alpha*AB, the add: 3 per output
        (1, 3, 240 + 2 * 20),  # alpha*AB and the add
        (0, 1, 240),  # beta=0 ignores C entirely: the plain product
        (0, 2, 240 + 20),  # beta=0 but alpha scales the product: 1 multiply per output
    ],
)
def test_addmm_scales(beta: float, alpha: float, flops: int) -> None:
    report = run(lambda c, a, b: torch.addmm(c, a, b, beta=beta, alpha=alpha), r(4, 5), r(4, 6), r(6, 5))
    assert op_costs(report) == {"aten.addmm": (1, flops, 120)}


# --- bmm / baddbmm / addbmm ------------------------------------------------------------------------------------


def test_bmm() -> None:
    report = run(torch.bmm, r(3, 4, 6), r(3, 6, 5))
    # B*2*M*N*K = 3*2*4*5*6 = 720; MACs 360
    assert op_costs(report) == {"aten.bmm": (1, 720, 360)}


def test_baddbmm() -> None:
    report = run(torch.baddbmm, r(3, 4, 5), r(3, 4, 6), r(3, 6, 5))
    # 720 + one add per output element B*M*N = 3*4*5 = 60 -> 780
    assert op_costs(report) == {"aten.baddbmm": (1, 780, 360)}


def test_baddbmm_beta_zero_alpha_half() -> None:
    report = run(lambda c, a, b: torch.baddbmm(c, a, b, beta=0, alpha=0.5), r(3, 4, 5), r(3, 4, 6), r(3, 6, 5))
    # beta=0 drops the add; alpha=0.5 is 1 multiply per output: 720 + 60 = 780
    assert op_costs(report) == {"aten.baddbmm": (1, 780, 360)}


def test_addbmm_sums_the_batch_into_one_matrix() -> None:
    report = run(torch.addbmm, r(4, 5), r(3, 4, 6), r(3, 6, 5))
    # the B products are accumulated into M*N outputs: 3*4*5*6 = 360 MACs; + 4*5 = 20 adds for the addend -> 740
    assert op_costs(report) == {"aten.addbmm": (1, 740, 360)}


# --- mv / addmv / dot ------------------------------------------------------------------------------------------


def test_mv() -> None:
    report = run(torch.mv, r(4, 6), r(6))
    # M*K = 24 MACs, 48 FLOPs
    assert op_costs(report) == {"aten.mv": (1, 48, 24)}


def test_addmv() -> None:
    assert op_costs(run(torch.addmv, r(4), r(4, 6), r(6))) == {"aten.addmv": (1, 48 + 4, 24)}
    # beta=2 and alpha=3: 3 FLOPs per output element (scale C, scale product, add): 48 + 3*4 = 60
    scaled = run(lambda c, a, b: torch.addmv(c, a, b, beta=2, alpha=3), r(4), r(4, 6), r(6))
    assert op_costs(scaled) == {"aten.addmv": (1, 60, 24)}


@pytest.mark.parametrize(("fn", "op"), [(torch.dot, "aten.dot"), (torch.vdot, "aten.vdot"), (torch.inner, "aten.dot")])
def test_dot(fn: Callable[..., Any], op: str) -> None:
    # K = 6 MACs, 12 FLOPs
    assert op_costs(run(fn, r(6), r(6))) == {op: (1, 12, 6)}


def test_outer_product_is_elementwise_not_a_mac() -> None:
    # torch decomposes outer() to a broadcast multiply: 4*6 = 24 multiplies, no accumulation, so no MACs
    assert op_costs(run(torch.outer, r(4), r(6))) == {"aten.mul": (1, 24, 0)}


# --- matmul (2-D, batched, broadcast) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "op", "macs"),
    [
        ((4, 6), (6, 5), "aten.mm", 4 * 5 * 6),  # 2-D
        ((2, 3, 4, 6), (2, 3, 6, 5), "aten.bmm", 2 * 3 * 4 * 5 * 6),  # batched: 6 products of 4x6 @ 6x5
        ((2, 3, 4, 6), (6, 5), "aten.mm", 2 * 3 * 4 * 5 * 6),  # batch folded into rows: [24, 6] @ [6, 5]
        ((2, 1, 4, 6), (3, 6, 5), "aten.bmm", 2 * 3 * 4 * 5 * 6),  # broadcast 2x1 with 3 -> 6 products
        ((6,), (2, 6, 5), "aten.bmm", 2 * 1 * 5 * 6),  # vector @ batch: [2, 1, 6] @ [2, 6, 5]
        ((4, 6), (6,), "aten.mv", 4 * 6),  # matrix @ vector
        ((6,), (6,), "aten.dot", 6),  # vector @ vector
    ],
)
def test_matmul(a: tuple[int, ...], b: tuple[int, ...], op: str, macs: int) -> None:
    report = run(torch.matmul, r(*a), r(*b))
    assert op_costs(report) == {op: (1, 2 * macs, macs)}


# --- F.linear --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "bias", "op", "flops", "macs"),
    [
        ((4, 6), False, "aten.mm", 2 * 4 * 5 * 6, 4 * 5 * 6),  # 240, 120
        ((4, 6), True, "aten.addmm", 2 * 4 * 5 * 6 + 4 * 5, 4 * 5 * 6),  # + 20 bias adds = 260
        ((2, 3, 6), False, "aten.mm", 2 * 6 * 5 * 6, 6 * 5 * 6),  # rows = 2*3 = 6: 360, 180
        ((2, 3, 6), True, "aten.addmm", 2 * 6 * 5 * 6 + 6 * 5, 6 * 5 * 6),  # + 30 bias adds = 390
        ((6,), True, "aten.addmm", 2 * 1 * 5 * 6 + 5, 5 * 6),  # one row: 60 + 5 = 65
    ],
)
def test_linear(x: tuple[int, ...], bias: bool, op: str, flops: int, macs: int) -> None:
    layer = nn.Linear(6, 5, bias=bias)
    report = run(layer, r(*x))
    assert op_costs(report) == {op: (1, flops, macs)}
    assert report.params == 6 * 5 + (5 if bias else 0)


def test_functional_linear_matches_the_module() -> None:
    w, b = r(5, 6), r(5)
    assert op_costs(run(F.linear, r(2, 3, 6), w, b)) == {"aten.addmm": (1, 390, 180)}
    assert op_costs(run(F.linear, r(2, 3, 6), w)) == {"aten.mm": (1, 360, 180)}


def test_aten_linear_formula_when_not_decomposed() -> None:
    # aten.linear is CompositeImplicit (decomposed before the dispatch mode sees it); exported graphs may keep it.
    linear = TORCH_OPS.lookup("aten.linear")
    meta = {"device": "meta"}
    x, w, b = torch.empty(2, 3, 6, **meta), torch.empty(5, 6, **meta), torch.empty(5, **meta)
    # rows 2*3 = 6: 6*6*5 = 180 MACs, 360 FLOPs, + 6*5 = 30 bias adds
    assert linear({"input": x, "weight": w, "bias": b}, None) == Cost(390, 180)
    assert linear({"input": x, "weight": w, "bias": None}, None) == Cost(360, 180)


# --- einsum ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("equation", "shapes", "expected"),
    [
        ("ij,jk->ik", [(4, 6), (6, 5)], {"aten.bmm": (1, 240, 120)}),  # one 4x6 @ 6x5 product
        ("bij,bjk->bik", [(3, 4, 6), (3, 6, 5)], {"aten.bmm": (1, 720, 360)}),
        # attention scores: B*H = 6 products of [q=4, d=5] @ [d=5, k=7]: 6*4*7*5 = 840 MACs
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 7, 5)], {"aten.bmm": (1, 1680, 840)}),
        ("bqd,kd->bqk", [(2, 4, 6), (5, 6)], {"aten.bmm": (1, 480, 240)}),  # [8, 6] @ [6, 5]: 240 MACs
        ("i,i->", [(6,), (6,)], {"aten.bmm": (1, 12, 6)}),  # dot product: 6 MACs
        ("i,j->ij", [(4,), (6,)], {"aten.mul": (1, 24, 0)}),  # outer product: 24 multiplies, no MACs
        ("ij->j", [(4, 6)], {"aten.sum": (1, 24, 0)}),  # a reduction: 1 per input element
        ("ii->", [(4, 4)], {"aten.sum": (1, 4, 0)}),  # trace: diagonal (a view) then sum of 4
        # chain, contracted left to right: (2x3 @ 3x4) = 24 MACs, then (2x4 @ 4x5) = 40 MACs -> 64
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], {"aten.bmm": (2, 128, 64)}),
    ],
)
def test_einsum(equation: str, shapes: list[tuple[int, ...]], expected: dict[str, tuple[int, int, int]]) -> None:
    report = run(lambda *ops: torch.einsum(equation, *ops), *(r(*s) for s in shapes))
    assert op_costs(report) == expected


def test_matrix_power_is_repeated_mm() -> None:
    # A^3 = (A @ A) @ A: 2 products of 4x4 @ 4x4 = 2*64 = 128 MACs
    assert op_costs(run(lambda a: torch.linalg.matrix_power(a, 3), r(4, 4))) == {"aten.mm": (2, 256, 128)}


# --- training: the gradient matmuls ----------------------------------------------------------------------------


def test_linear_training_step_without_input_gradient() -> None:
    report = run(nn.Linear(6, 5), r(4, 6), training=True)
    # forward: addmm 2*4*5*6 + 4*5 = 260; loss = y.sum(): 20 adds
    # backward: the input needs no gradient, so only grad_W = dY^T @ X: [5, 4] @ [4, 6] = 120 MACs = 240 FLOPs,
    #           and grad_b = dY.sum(0): 20 adds
    assert (report.forward.flops, report.forward.macs) == (260 + 20, 120)
    assert (report.backward.flops, report.backward.macs) == (240 + 20, 120)
    assert op_costs(report) == {"aten.addmm": (1, 260, 120), "aten.sum": (2, 40, 0), "aten.mm": (1, 240, 120)}


def test_linear_training_step_with_input_gradient() -> None:
    report = run(nn.Linear(6, 5), r(4, 6).requires_grad_(), training=True)
    # backward adds grad_X = dY @ W: [4, 5] @ [5, 6] = 120 MACs: two 120-MAC mms and the bias sum
    assert (report.backward.flops, report.backward.macs) == (2 * 240 + 20, 240)
    assert op_costs(report)["aten.mm"] == (2, 480, 240)


def test_bmm_training_step() -> None:
    a = r(3, 4, 6).requires_grad_()
    report = run(torch.bmm, a, r(3, 6, 5).requires_grad_(), training=True)
    # forward 360 MACs; backward grad_a = dY @ b^T (3*4*6*5) and grad_b = a^T @ dY (3*6*5*4): 2*360 MACs
    assert (report.forward.macs, report.backward.macs) == (360, 720)
    # loss sum: 3*4*5 = 60 adds
    assert report.forward.flops == 720 + 60 and report.backward.flops == 1440


# --- grouped_mm (mixture-of-experts GEMM) ----------------------------------------------------------------------
#
# torch.nn.functional.grouped_mm is torch._grouped_mm is aten._grouped_mm. The kernels need 16-byte aligned strides
# (every size a multiple of 8 in bf16) and the meta kernel (fake mode) accepts only bf16, so the fake-vs-real checks
# below run in bf16. MACs follow the shapes, never the values of `offs`: a[-2] * a[-1] * b[-1], times G when both
# operands are 3-D.


def bf16(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.bfloat16)


def offsets(*ends: int) -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32)


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None) -> torch.Tensor:
    return F.grouped_mm(a, b, offs=offs)


@pytest.mark.parametrize(
    ("a", "b", "offs", "macs"),
    [
        # [S=24, K=8] x [G=3, K=8, N=16], rows grouped 8 / 8 / 4: all S rows meet one expert: 24*8*16 = 3072
        ((24, 8), (3, 8, 16), (8, 16, 20), 24 * 8 * 16),
        # rows 20..23 lie beyond offs[-1] (expert-parallel sentinels): still counted, the count is the same 3072
        ((24, 8), (3, 8, 16), (0, 0, 20), 24 * 8 * 16),
        # [G=3, M=8, K=16] x [G=3, K=16, N=8], no offs: 3 products of 8x16 @ 16x8 = 3*8*16*8 = 3072
        ((3, 8, 16), (3, 16, 8), None, 3 * 8 * 16 * 8),
        # [G=3, M=8, K=16] x [K=16, N=32], the 32 columns cut 8 / 8 / 8 (+8 unused): output [8, 32]; group g is
        # a[g] @ b[:, cols_g]: sum of 8*16*n_g over groups, with all N=32 columns counted: 8*16*32 = 4096
        ((3, 8, 16), (16, 32), (8, 16, 24), 8 * 16 * 32),
        # [M=8, K=32] x [K=32, N=16], K cut 8 / 8 / 8 (+8 unused): output [3, 8, 16]; group g contracts its slice
        # of K: sum of 8*16*k_g, with all K=32 counted: 8*32*16 = 4096
        ((8, 32), (32, 16), (8, 16, 24), 8 * 32 * 16),
    ],
    ids=["2d-3d", "2d-3d-sentinel-rows", "3d-3d", "3d-2d", "2d-2d"],
)
def test_grouped_mm(a: tuple[int, ...], b: tuple[int, ...], offs: tuple[int, ...] | None, macs: int) -> None:
    inputs = (bf16(*a), bf16(*b)) if offs is None else (bf16(*a), bf16(*b), offsets(*offs))
    report = run(grouped_mm, *inputs)
    assert op_costs(report) == {"aten._grouped_mm": (1, 2 * macs, macs)}


def test_grouped_mm_public_alias_is_the_aten_op() -> None:
    # F.grouped_mm forwards to torch._grouped_mm: one aten._grouped_mm, no other op; 24*8*16 = 3072 MACs
    report = run(lambda a, b, o: torch._grouped_mm(a, b, offs=o), bf16(24, 8), bf16(3, 8, 16), offsets(8, 16, 24))
    assert op_costs(report) == op_costs(run(grouped_mm, bf16(24, 8), bf16(3, 8, 16), offsets(8, 16, 24)))
    assert op_costs(report) == {"aten._grouped_mm": (1, 6144, 3072)}


def test_grouped_mm_float32_runs_for_real_on_cpu() -> None:
    # the CPU kernel takes float32 (the meta kernel does not: fake mode falls back to bf16 metadata, next test);
    # [S=16, K=8] x [G=2, K=8, N=8]:
    # 16*8*8 = 1024 MACs
    fn = Call(grouped_mm)
    report = count(fn, torch.randn(16, 8), torch.randn(2, 8, 8), offsets(8, 16), execution="real")
    assert op_costs(report) == {"aten._grouped_mm": (1, 2048, 1024)}


def test_grouped_mm_float32_in_fake_mode() -> None:
    # the meta kernel accepts only bf16; fake mode asks it in bf16 and restores float32: same 1024 MACs, and the
    # output keeps the caller's dtype
    report = count(Call(grouped_mm), torch.randn(16, 8), torch.randn(2, 8, 8), offsets(8, 16))
    assert op_costs(report) == {"aten._grouped_mm": (1, 2048, 1024)}
    assert report.skipped == {}


def test_grouped_mm_bias_is_one_flop_per_output_element() -> None:
    # no kernel accepts a bias yet ("not supported yet"), so the formula is called directly on meta tensors:
    # [G=3, M=4, K=6] x [G=3, K=6, N=5]: 3*4*6*5 = 360 MACs = 720 FLOPs, + 3*4*5 = 60 bias adds -> 780
    grouped = TORCH_OPS.lookup("aten._grouped_mm")
    meta = {"device": "meta"}
    a, b, out = torch.empty(3, 4, 6, **meta), torch.empty(3, 6, 5, **meta), torch.empty(3, 4, 5, **meta)
    assert grouped({"self": a, "mat2": b, "offs": None, "bias": torch.empty(3, 5, **meta)}, out) == Cost(780, 360)
    assert grouped({"self": a, "mat2": b, "offs": None, "bias": None}, out) == Cost(720, 360)


# --- triangular solve ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "unitriangular", "b_shape", "expected"),
    [
        # A [2, 5, 5], B [2, 5, 3] solved from the left: 2*3 = 6 columns of 5, each 5*4/2 = 10 MACs and 5 divides:
        # 60 MACs, 2*60 + 30 = 150 FLOPs
        (True, False, (2, 5, 3), (150, 60)),
        (True, True, (2, 5, 3), (120, 60)),  # unitriangular: no divides
        # from the right, X A = B with B [2, 3, 5]: 2*3 = 6 rows of 5: the same 60 MACs and 30 divides
        (False, False, (2, 3, 5), (150, 60)),
    ],
    ids=["left", "left-unitriangular", "right"],
)
def test_solve_triangular(left: bool, unitriangular: bool, b_shape: tuple[int, ...], expected: tuple[int, int]) -> None:
    a = torch.eye(5).expand(2, 5, 5) + torch.randn(2, 5, 5).triu(1)

    def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve_triangular(a, b, upper=True, left=left, unitriangular=unitriangular)

    costs = op_costs(run(solve, a, r(*b_shape)))
    assert costs["aten.linalg_solve_triangular"] == (1, *expected)
