"""Budgets on the curve in pyproject and in a marker: `max-degree` and `at`, and every error naming file:line:key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._config.curve_budget import parse_at, parse_max_degree
from pytest_flopbudget._config.location import LocatedError, Location
from pytest_flopbudget._config.pyproject import ModelEntry, Settings, load_settings
from pytest_flopbudget._metrics import BYTES, FLOPS, INT_OPS, MACS, PARAMS, PEAK_MEMORY

MODEL = """\
[tool.flopbudget.models.gpt]
target = "toy:gpt"
inputs = [{ shape = [1, "seq"], dtype = "int64" }]
dims = { seq = 128 }
curve = { seq = [16, 512] }
"""


def load(tmp_path: Path, extra: str, model: str = MODEL) -> Settings:
    path = tmp_path / "pyproject.toml"
    path.write_text(model + textwrap.dedent(extra))
    return load_settings(path)


def entry(tmp_path: Path, extra: str) -> ModelEntry:
    return load(tmp_path, extra).models["gpt"]


def problems(tmp_path: Path, extra: str, monkeypatch: pytest.MonkeyPatch, model: str = MODEL) -> list[str]:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LocatedError) as info:
        load(tmp_path, extra, model)
    return str(info.value).splitlines()


def test_a_number_caps_every_metric_shown_without_a_budget_of_its_own(tmp_path: Path) -> None:
    budget = entry(tmp_path, "max-degree = { seq = 1 }\n").budget
    assert [(d.metric, d.dim, d.degree) for d in budget.degrees] == [
        (FLOPS, "seq", 1),
        (MACS, "seq", 1),
        (INT_OPS, "seq", 1),
        (PARAMS, "seq", 1),
    ]
    assert budget.degrees[0].source.line == 6
    assert budget.degrees[0].source.key == "tool.flopbudget.models.gpt.max-degree.seq"
    assert not budget.is_empty and budget.on_curve  # a degree alone is a budget


def test_a_metric_table_caps_that_metric_instead(tmp_path: Path) -> None:
    budget = entry(tmp_path, "max-degree = { seq = 1, flops = { seq = 2 }, peak-memory = { seq = 1 } }\n").budget
    found = {(d.metric, d.dim): d.degree for d in budget.degrees}
    assert found == {
        (FLOPS, "seq"): 2,
        (MACS, "seq"): 1,
        (INT_OPS, "seq"): 1,
        (PARAMS, "seq"): 1,
        (PEAK_MEMORY, "seq"): 1,
    }


def test_ceilings_at_points_of_the_curve(tmp_path: Path) -> None:
    budget = entry(
        tmp_path,
        """\
        [[tool.flopbudget.models.gpt.at]]
        seq = 512
        flops = "2G"
        bytes = "1 GiB"
        """,
    ).budget
    (point,) = budget.at
    assert point.point == {"seq": 512}
    assert point.limits[FLOPS].value == 2 * 10**9 and point.limits[BYTES].value == 2**30
    assert point.source.line == 6


def test_the_budget_round_trips_and_a_budget_without_curve_keys_writes_what_it_always_did(tmp_path: Path) -> None:
    budget = entry(tmp_path, 'max-degree = { seq = 1 }\nat = [{ seq = 256, macs = "1G" }]\n').budget
    assert Budget.from_dict(budget.to_dict()) == budget
    assert set(Budget().to_dict()) == {"limits", "max_increase", "source"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("max-degree = 1\n", "pyproject.toml:6: tool.flopbudget.models.gpt.max-degree: expected a table of dim"),
        ("max-degree = { seq = -1 }\n", "max-degree.seq: expected a whole number from 0 to 16, got -1"),
        ("max-degree = { seq = 1.5 }\n", "max-degree.seq: expected a whole number from 0 to 16, got 1.5"),
        ("max-degree = { seq = true }\n", "max-degree.seq: expected a whole number from 0 to 16, got True"),
        ("max-degree = { height = 1 }\n", "max-degree.height: dim 'height' has no range in the curve (seq)"),
        ("max-degree = { skipped = { seq = 1 } }\n", "max-degree.skipped: not a metric; a metric's own table"),
        ("max-degree = { flop = { seq = 1 } }\n", "max-degree.flop: not a metric"),
        ("at = { seq = 512 }\n", "models.gpt.at: expected a list of tables of dim = size and budgets"),
        ('at = [{ seq = 4096, flops = "1G" }]\n', "at.0.seq: expected a size in the curve's range [16, 512], got 4096"),
        ('at = [{ flops = "1G" }]\n', "at.0: names no dim of the curve (seq): at which size?"),
        ("at = [{ seq = 64 }]\n", "at.0: sets no ceiling; give one of: flops, macs, int-ops, params"),
        ('at = [{ seq = 64, flops = "1 Gi" }]\n', "at.0.flops: '1 Gi' is not a budget"),
        ('at = [{ seq = 64, height = 3, flops = "1G" }]\n', "at.0.height: unknown key; expected a dim of the curve"),
        ("at = [{ seq = 64, max-skipped-ops = 1 }]\n", "at.0.max-skipped-ops: unknown key"),
    ],
)
def test_every_error_names_the_file_line_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, expected: str
) -> None:
    lines = problems(tmp_path, extra, monkeypatch)
    assert any(expected in line for line in lines), lines
    assert all(line.startswith("pyproject.toml:6: tool.flopbudget.models.gpt.") for line in lines), lines


def test_a_budget_on_the_curve_needs_the_curve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = MODEL.replace("curve = { seq = [16, 512] }\n", "")
    lines = problems(tmp_path, "max-degree = { seq = 1 }\n", monkeypatch, model)
    assert lines == [
        "pyproject.toml:5: tool.flopbudget.models.gpt.max-degree.seq: a degree is judged on the model's formula: "
        "set curve = { seq = [low, high] } too"
    ]


def test_a_model_with_only_a_budget_on_the_curve_declares_a_budget(tmp_path: Path) -> None:
    assert entry(tmp_path, "max-degree = { seq = 2 }\n").budget.limits == {}


def test_a_marker_names_any_dim_and_any_positive_size() -> None:
    """A marker's curve is not known when it is read: its dims are judged on the formula the test counts."""

    def locate(sub: tuple[str | int, ...]) -> Location:
        return Location("t.py", 3, ".".join(map(str, ("max_degree", *sub))))

    flops, *_ = parse_max_degree({"seq": 1}, locate, None)
    assert (flops.metric, flops.dim, flops.degree) == (FLOPS, "seq", 1)
    (point,) = parse_at([{"seq": 8192, "flops": "2T"}], locate, None)
    assert point.point == {"seq": 8192} and point.limits[FLOPS].value == 2 * 10**12
    with pytest.raises(LocatedError, match="an identifier"):
        parse_max_degree({"2seq": 1}, locate, None)
