"""render/phase_table.py: a generation's prefill, first and last decode step and mean per token under its table."""

from __future__ import annotations

from fractions import Fraction

from pytest_flopbudget._metrics import FLOPS, INT_OPS, MACS
from pytest_flopbudget._render.phase_table import DECODE_MEAN, decode_mean, format_phases
from pytest_flopbudget._render.table import format_layer_table
from pytest_flopbudget._report import LayerCost, Phase, PhaseTotals, Report


def report(steps: int) -> Report:
    phases = [Phase("prefill", {FLOPS: 2000, MACS: 1000})]
    phases += [Phase(f"decode {k}", {FLOPS: 20 + 2 * k, MACS: 10 + k}) for k in range(1, steps)]
    layer = LayerCost()
    flops, macs = sum(p.flops for p in phases), sum(p.macs for p in phases)
    layer.add_op("aten.mm", {FLOPS: flops, MACS: macs})
    return Report(layers={"lin": layer}, forward=PhaseTotals({FLOPS: flops, MACS: macs}), phases=phases)


def test_the_rows_are_prefill_first_last_and_mean() -> None:
    lines = format_phases(report(5))
    assert lines[1].startswith("phases (5 tokens generated)")
    labels = [line.split("  ")[0] for line in lines[3:]]
    assert labels == ["prefill", "decode 1 (first)", "decode 4 (last)", DECODE_MEAN]
    assert decode_mean(report(5), MACS) == Fraction(11 + 12 + 13 + 14, 4)
    assert "12.5" in lines[-1]


def test_one_token_shows_the_prefill_only_and_other_counts_nothing() -> None:
    assert [line.split("  ")[0] for line in format_phases(report(1))[3:]] == ["prefill"]
    plain = report(3)
    plain.phases = []
    assert format_phases(plain) == []
    assert "phases" not in format_layer_table(plain)


def test_integer_ops_have_a_column_only_where_some_phase_has_some() -> None:
    assert "integer ops" not in format_phases(report(5))[1]
    quantized = report(5)
    quantized.phases[1] = Phase("decode 1", {FLOPS: 22, MACS: 11, INT_OPS: 4096})
    header, *_, mean = format_phases(quantized)[1:]
    assert "integer ops" in header
    assert mean.split()[-1] == "1.02k"  # 4096 over 4 decode steps = 1,024
