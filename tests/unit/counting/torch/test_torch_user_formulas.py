"""`register_formula(..., backend="torch")` end to end: a custom op defined with `torch.library`, counted in fake
and real execution, first skipped, then priced by the user's formula; overriding a built-in; formulas that fail."""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from pytest_flopbudget import Cost, Report, count, register_formula  # noqa: E402
from pytest_flopbudget.formulas import registered_formulas  # noqa: E402

OP = "flopbudget_test.fused_gelu"

#: `torch.library.Library` objects unregister their ops when collected: kept for the life of the process.
_LIBRARY = torch.library.Library("flopbudget_test", "DEF")
_LIBRARY.define("fused_gelu(Tensor x, str approximate='none') -> Tensor")


def _fused_gelu_cpu(x: Any, approximate: str = "none") -> Any:
    return torch.nn.functional.gelu(x, approximate=approximate)


def _fused_gelu_fake(x: Any, approximate: str = "none") -> Any:
    return torch.empty_like(x)


_LIBRARY.impl("fused_gelu", _fused_gelu_cpu, "CPU")
torch.library.register_fake("flopbudget_test::fused_gelu", _fused_gelu_fake, lib=_LIBRARY)


class Net(nn.Module):
    """A linear layer, then the custom op in a child module (so its layer is `act`)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 6)
        self.act = Act()

    def forward(self, x: Any) -> Any:
        return self.act(self.proj(x))


class Act(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.ops.flopbudget_test.fused_gelu(x, approximate="tanh")


#: proj: 3 rows x 4 in x 6 out = 72 MACs, 144 + 18 bias = 162 FLOPs
LINEAR = (162, 72)
EXECUTIONS = pytest.mark.parametrize("execution", ["fake", "real"])


def fused_gelu(args: Any, out: Any) -> Cost:
    """8 FLOPs per element for the tanh form, 4 for the exact one: reads the bound argument and the output."""
    per_element = 8 if args["approximate"] == "tanh" else 4
    return Cost(flops=per_element * out.numel(), macs=0)


def run(execution: str) -> Report:
    return count(Net(), torch.randn(3, 4), execution=execution)


@EXECUTIONS
def test_custom_op_is_skipped_then_counted_after_registration(execution: str) -> None:
    before = run(execution)
    assert before.skipped == {OP: 1}
    assert before.skipped_ops[OP].reason == "no formula"
    assert before.skipped_ops[OP].layers == ["act"]
    assert (before.flops, before.macs) == LINEAR

    with register_formula(OP, fused_gelu, backend="torch"):
        after = run(execution)
    assert after.skipped == {}
    assert after.estimated == {}
    assert (after.flops, after.macs) == (LINEAR[0] + 8 * 18, LINEAR[1])
    assert after.layers["act"].ops[OP].calls == 1
    assert after.layers["act"].flops == 8 * 18

    assert run(execution).skipped == {OP: 1}  # removed with the block


@EXECUTIONS
def test_formula_receives_arguments_by_schema_name_and_the_output(execution: str) -> None:
    seen: list[tuple[list[str], tuple[int, ...], str, tuple[int, ...]]] = []

    def spy(args: Any, out: Any) -> tuple[int, int]:
        seen.append((sorted(args), tuple(args["x"].shape), args["approximate"], tuple(out.shape)))
        return (1, 0)  # a plain (flops, macs) pair

    with register_formula(OP, spy, backend="torch"):
        report = run(execution)
    assert seen == [(["approximate", "x"], (3, 6), "tanh", (3, 6))]
    assert report.layers["act"].ops[OP].flops == 1


@pytest.mark.parametrize(
    "key",
    [
        "flopbudget_test::fused_gelu",
        pytest.param(torch.ops.flopbudget_test.fused_gelu, id="packet"),
        pytest.param(torch.ops.flopbudget_test.fused_gelu.default, id="overload"),
    ],
)
def test_op_can_be_named_as_torch_names_it(key: Any) -> None:
    with register_formula(key, fused_gelu, backend="torch") as handle:
        assert handle.key == OP
        assert run("fake").skipped == {}


def test_overriding_a_builtin_needs_override_and_is_undone_on_removal() -> None:
    model = nn.GELU()
    x = torch.randn(2, 5)
    builtin = count(model, x).flops
    with pytest.raises(
        ValueError,
        match=r"^register_formula: torch op 'aten.gelu' has a built-in formula in the "
        r"torch backend; pass override=True to replace it$",
    ):
        register_formula("aten.gelu", fused_gelu, backend="torch")
    with register_formula("aten.gelu", lambda args, out: (100, 0), backend="torch", override=True):
        assert count(model, x).flops == 100
        assert count(model, x, execution="real").flops == 100
    assert count(model, x).flops == builtin


def test_a_free_op_is_a_builtin_too() -> None:
    with pytest.raises(ValueError, match=r"torch op 'aten.view' is counted as free in the torch backend"):
        register_formula("aten.view", fused_gelu, backend="torch")
    model = Call(lambda t: t.view(-1))
    assert count(model, torch.randn(2, 3)).ops == {}
    with register_formula("aten.view", lambda args, out: (out.numel(), 0), backend="torch", override=True):
        assert count(model, torch.randn(2, 3)).flops == 6


class Call(nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


@pytest.mark.parametrize(
    ("formula", "error"),
    [
        (lambda args, out: 2.5, "TypeError: the formula returned 2.5, not a Cost or (flops, macs)"),
        (lambda args, out: (1.5, 0), "returned (1.5, 0): FLOPs and MACs must be integers"),
        (lambda args, out: Cost(-1, 0), "returned Cost(flops=-1, macs=0): FLOPs and MACs must not be negative"),
        (lambda args, out: args["missing"], "KeyError: 'missing'"),
    ],
    ids=["not-a-pair", "float", "negative", "raises"],
)
def test_a_failing_formula_skips_the_op_with_the_error(formula: Any, error: str) -> None:
    with register_formula(OP, formula, backend="torch"):
        report = run("fake")
    assert report.skipped == {OP: 1}
    reason = report.skipped_ops[OP].reason
    assert reason.startswith("formula failed (") and error in reason, reason
    assert (report.flops, report.macs) == LINEAR


def test_the_documented_example_runs(documented_example: Callable[[str, str], str]) -> None:
    """docs/formulas.md, "PyTorch ops": a `torch.library.custom_op`, skipped, then counted (its asserts)."""
    code = documented_example("formulas.md", "PyTorch ops")
    assert 'register_formula("mylib.fused_gelu"' in code
    try:
        exec(compile(code, "docs/formulas.md", "exec"), {"__name__": "formulas_md"})
    finally:
        for handle in registered_formulas():
            handle.remove()
