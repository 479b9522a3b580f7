"""Einsum as pairwise contractions, shared by the ONNX `Einsum` and TensorFlow `Einsum` formulas (framework-free)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from math import prod

from pytest_flopbudget._counting import formulas as f
from pytest_flopbudget._counting.formulas import Cost


def einsum_cost(equation: str, shapes: Sequence[Sequence[int]]) -> Cost:
    """Contract the operands left to right, as `torch.einsum` does without an optimiser.

    Each pairwise step over index sizes {i}: with a contracted index it is a batched matmul of prod(sizes) MACs;
    without one it is an elementwise (outer) product, 1 FLOP per output element and no MACs, like `torch.outer`
    (and like torch.einsum when the only contracted indices have size 1).
    An index that appears in one operand only and nowhere later is summed out first (1 FLOP per input element).
    """
    inputs, output = _parse_einsum(equation, shapes)
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes):
        for label, size in zip(labels, shape):
            sizes[label] = max(sizes.get(label, 1), size)
    cost = f.ZERO
    operands = [set(labels) for labels in inputs]
    current = operands[0]
    current_numel = prod(shapes[0]) if shapes else 0
    for index, other in enumerate(operands[1:], start=1):
        later = set(output).union(*operands[index + 1 :])
        current, current_numel, step = _reduce_unused(current, current_numel, sizes, later | other)
        cost = cost + step
        other, _, step = _reduce_unused(other, prod(shapes[index]), sizes, later | current)
        cost = cost + step
        union = current | other
        kept = {label for label in union if label in later}
        total = prod(sizes[label] for label in union)
        # a contracted index makes it a (batched) matmul; without one (or contracting only size-1 indices, which
        # torch.einsum lowers to a multiply) it is an elementwise product
        contracted = prod(sizes[label] for label in union - kept)
        cost = cost + (Cost(2 * total, total) if contracted > 1 else f.elementwise(total))
        current, current_numel = kept, prod(sizes[label] for label in kept)
    _, _, step = _reduce_unused(current, current_numel, sizes, set(output))
    return cost + step


def _reduce_unused(labels: set[str], numel: int, sizes: dict[str, int], needed: set[str]) -> tuple[set[str], int, Cost]:
    unused = labels - needed
    if not unused:
        return labels, numel, f.ZERO
    kept = labels - unused
    return kept, prod(sizes[label] for label in kept), f.reduction(numel)


def _parse_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[list[str], str]:
    """Labels per operand and for the output, with `...` expanded to fresh upper-case-free labels."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum equation {equation!r} has {len(terms)} operands, the node has {len(shapes)}")
    spare = [c for c in string.ascii_letters[::-1] if c not in equation]
    ellipsis_rank = max((len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t), default=0)
    fill = "".join(spare[:ellipsis_rank])
    expanded = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            rank = len(shape) - (len(term) - 3)
            term = term.replace("...", fill[len(fill) - rank :] if rank else "")
        expanded.append(term)
    if arrow:
        output = rhs.replace("...", fill)
    else:  # implicit output: the ellipsis, then labels used once, in alphabetical order
        counts: dict[str, int] = {}
        for term in expanded:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        output = fill + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in fill))
    return expanded, output
