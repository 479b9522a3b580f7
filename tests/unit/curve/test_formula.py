"""The Formula data model: lookups, where it holds in words, and its JSON round trip."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_flopbudget._curve.formula import FORMULA_FORMAT, Formula, Holds
from pytest_flopbudget._curve.polynomial import Polynomial
from pytest_flopbudget._metrics import FLOPS, MACS, PARAMS, PEAK_MEMORY

SEQ = ("seq",)


def formula(holds: Holds | None = None) -> Formula:
    return Formula(
        dims=SEQ,
        totals={FLOPS: Polynomial(SEQ, {(2,): 128, (1,): 10}), MACS: Polynomial(SEQ, {(2,): 64, (1,): 5})},
        layers={
            "h.0.attn": {FLOPS: Polynomial(SEQ, {(2,): 128}), MACS: Polynomial(SEQ, {(2,): 64})},
            "h.0.mlp": {FLOPS: Polynomial(SEQ, {(1,): 10}), MACS: Polynomial(SEQ, {(1,): 5})},
        },
        holds=holds or Holds(step={"seq": 1}, ranges={"seq": (64, 8192)}, samples=9, verified=6),
        point={"seq": 2048},
        ranges={"seq": (64, 8192)},
    )


def test_lookups_and_inclusive_sums() -> None:
    f = formula()
    assert str(f.total("macs")) == "64*seq**2 + 5*seq"
    assert str(f.layer("h.0.attn", MACS)) == "64*seq**2" and str(f.layer("nowhere", MACS)) == "0"
    assert str(f.inclusive("h.0", FLOPS)) == "128*seq**2 + 10*seq" == str(f.inclusive("", FLOPS))
    assert str(f.total(PARAMS)) == "0" and f.total(MACS).degree("seq") == 2


def test_the_layers_that_grow_faster_than_a_degree() -> None:
    f = formula()
    assert {path: str(poly) for path, poly in f.layers_above(MACS, "seq", 1).items()} == {"h.0.attn": "64*seq**2"}
    assert f.layers_above(MACS, "seq", 2) == {} and str(f.total(MACS).above("seq", 1)) == "64*seq**2"


def test_json_round_trip_through_text() -> None:
    f = formula(Holds({"seq": 32}, {"seq": (64, 512)}, True, {"seq": 544}, (PEAK_MEMORY,), 20, 12))
    data = json.loads(json.dumps(f.to_dict()))
    assert data["formula"] == {"flops": "128*seq**2 + 10*seq", "macs": "64*seq**2 + 5*seq"}
    assert data["curve"]["format"] == FORMULA_FORMAT and data["curve"]["layers"]["h.0.attn"]["macs"] == "64*seq**2"
    assert (data["curve"]["ranges"], data["curve"]["point"]) == ({"seq": [64, 8192]}, {"seq": 2048})
    back = Formula.from_dict(data)
    assert back == f and back.holds == f.holds


@pytest.mark.parametrize(
    ("holds", "text"),
    [
        (Holds({"seq": 1}, {"seq": (64, 8192)}), "exact on seq in [64, 8192]"),
        (
            Holds({"height": 32, "width": 32}, {"height": (64, 1024), "width": (64, 1024)}),
            "exact at height, width multiples of 32, height in [64, 1024], width in [64, 1024]",
        ),
        (
            Holds({"seq": 1}, {"seq": (64, 512)}, piecewise=True, broken_at={"seq": 576}),
            "piecewise: exact on seq in [64, 512] only; the cost is not one polynomial beyond (it differs at seq=576)",
        ),
        (
            Holds({"b": 1, "s": 1}, {"b": (1, 8), "s": (8, 64)}, piecewise=True, broken_at={"b": 8, "s": 64}),
            "not one polynomial on b in [1, 8], s in [8, 64]: the formula misses the count at b=8, s=64",
        ),
        (
            Holds({"seq": 1}, {"seq": (8, 64)}, inexact=(PEAK_MEMORY,)),
            "exact on seq in [8, 64]; not exact for peak memory",
        ),
    ],
)
def test_where_it_holds_in_words(holds: Holds, text: str) -> None:
    assert holds.describe() == text
    assert holds.exact == (not holds.piecewise and not holds.inexact)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("curve"), "curve must be an object"),
        (lambda d: d["curve"].update(format="x"), "curve.format is 'x'"),
        (lambda d: d["formula"].update(flops="os.system('x')"), "unexpected"),
        (lambda d: d["formula"].update(watts="1"), "unknown metric 'watts'"),
        (lambda d: d["curve"]["holds"].update(step={"seq": 0}), "step.seq must be an integer of at least 1"),
        (lambda d: d["curve"]["holds"].update(ranges={"seq": [1]}), r"must be \[low, high\]"),
        (lambda d: d["curve"].update(dims=["seq", "seq"]), "must be distinct names"),
        (lambda d: d["curve"].update(dims=["a b"]), "must be distinct names"),
    ],
)
def test_a_malformed_document_is_refused(change: Any, message: str) -> None:
    data = json.loads(json.dumps(formula().to_dict()))
    change(data)
    with pytest.raises(ValueError, match=message):
        Formula.from_dict(data)
