"""Which term of a formula changed, in which group of repeated layers."""

from __future__ import annotations

from pytest_flopbudget._curve.formula import Formula, Holds
from pytest_flopbudget._curve.polynomial import parse
from pytest_flopbudget._judge.formula_diff import group_label, grouped_labels, layer_group, term_changes
from pytest_flopbudget._metrics import FLOPS


def formula(layers: dict[str, str], dims: tuple[str, ...] = ("seq",)) -> Formula:
    polys = {path: {FLOPS: parse(text, dims)} for path, text in layers.items()}
    total = parse("0", dims)
    for layer in polys.values():
        total = total + layer[FLOPS]
    holds = Holds(step=dict.fromkeys(dims, 1), ranges=dict.fromkeys(dims, (16, 512)))
    return Formula(dims=dims, totals={FLOPS: total}, layers=polys, holds=holds)


def test_repeated_layers_group_into_a_range_a_list_or_a_star() -> None:
    assert layer_group("layers.11.attn") == "layers.*.attn"
    assert group_label([f"layers.{i}.attn" for i in range(12)]) == "layers.{0..11}.attn"
    assert group_label(["layers.0.attn", "layers.2.attn"]) == "layers.{0,2}.attn"
    assert group_label([f"layers.{i}.attn" for i in range(0, 20, 2)]) == "layers.*.attn"
    assert group_label(["head"]) == "head"
    assert group_label([""]) == "(model)"
    assert grouped_labels(["a.0.x", "head", "a.1.x", "a.0.y"]) == ["a.{0..1}.x", "head", "a.0.y"]


def test_a_changed_term_names_its_monomial_its_layers_and_the_change() -> None:
    base = formula({"h.0.attn": "140*seq**2", "h.1.attn": "140*seq**2", "h.0.mlp": "100*seq"})
    now = formula({"h.0.attn": "280*seq**2", "h.1.attn": "280*seq**2", "h.0.mlp": "100*seq + 7"})
    changes = term_changes(base, now, FLOPS)
    assert [str(c) for c in changes] == ["seq**2 term of h.{0..1}.attn +100.0%", "1 term of h.0.mlp new"]


def test_added_and_removed_terms_and_layers() -> None:
    base = formula({"a": "seq**2", "b": "3*seq"})
    now = formula({"a": "seq", "c": "3*seq"})
    assert sorted(str(c) for c in term_changes(base, now, FLOPS)) == [
        "seq term of a new",
        "seq term of b removed",
        "seq term of c new",
        "seq**2 term of a removed",
    ]


def test_formulas_in_different_dims_have_no_term_diff() -> None:
    assert term_changes(formula({"a": "seq"}), formula({"a": "seq"}, ("seq", "batch")), FLOPS) == []
    assert term_changes(formula({"a": "seq"}), formula({"a": "seq"}), FLOPS) == []
