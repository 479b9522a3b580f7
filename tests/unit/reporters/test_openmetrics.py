"""GitLab's metrics report: OpenMetrics text that prometheus_client's OpenMetrics parser reads back exactly, and
that GitLab's own line reader (everything after `#` dropped, then split as a shell would) keys one value per model
and metric, whatever the model is called."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from export_formats import gitlab_keys
from export_formats import parse_openmetrics as parse
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._metrics import METRICS
from pytest_flopbudget._reporters.openmetrics import family, label_text, metrics_text, write_metrics

PYPROJECT = pyproject(RESNET)
HOSTILE = [
    'we"ird #name\nx',
    "back\\slash",
    "模型 ü",
    "it's `$(x)`",
    "\u202eevil\x1b[2J",
    "# EOF",
    '} 1\nflopbudget_flops{model="y"} 2',
    "a\\x23b",
]


def verdicts_named(project, make_report, *names: str):
    base = project.verdict("resnet", make_report({"a": 1200}), make_report({"a": 800}))
    return [
        dataclasses.replace(base, measurement=dataclasses.replace(base.measurement, name=name, nodeid=None))
        for name in names
    ]


def test_one_gauge_per_metric_one_sample_per_model(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    resnet = project.verdict("resnet", make_report({"a": 1200}, {"aten.fft": 3}), make_report({"a": 800}))
    text = metrics_text([resnet])
    assert text.endswith("\n# EOF\n")
    assert text.startswith(
        "# TYPE flopbudget_flops gauge\n"
        "# HELP flopbudget_flops FLOPs per model, counted by pytest-flopbudget\n"
        'flopbudget_flops{model="resnet"} 1200\n'
    )
    assert parse(text) == {
        "flopbudget_flops": {"resnet": 1200},
        "flopbudget_macs": {"resnet": 600},
        "flopbudget_params": {"resnet": 1},
        "flopbudget_skipped": {"resnet": 3},
    }  # the memory metrics were not measured: no series
    assert gitlab_keys(text) == {
        "flopbudget_flops{model=resnet}": "1200",
        "flopbudget_macs{model=resnet}": "600",
        "flopbudget_params{model=resnet}": "1",
        "flopbudget_skipped{model=resnet}": "3",
    }


def test_memory_metrics_carry_their_unit(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    report = dataclasses.replace(make_report({"a": 10}), optional_metrics=frozenset(METRICS.optional), peak_memory=4096)
    text = metrics_text([project.verdict("resnet", report)])
    assert "# UNIT flopbudget_peak_memory_bytes bytes\n" in text
    families = parse(text)
    # integer ops only where there are some (this model has none)
    assert list(families) == [family(metric) for metric in METRICS if not metric.omit_zero]
    assert [family(metric) for metric in METRICS.optional] == [
        "flopbudget_bytes", "flopbudget_param_bytes", "flopbudget_buffer_bytes", "flopbudget_peak_memory_bytes",
    ]  # fmt: skip
    assert families["flopbudget_peak_memory_bytes"] == {"resnet": 4096}


def test_hostile_names_cannot_break_the_report(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    text = metrics_text(verdicts_named(project, make_report, *HOSTILE))
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text)
    families = parse(text)  # raises on a broken line, a duplicate series, or anything after `# EOF`
    expected = {label_text(name) for name in HOSTILE}
    assert len(expected) == len(HOSTILE)
    assert set(families["flopbudget_flops"]) == expected
    assert all(value == 1200 for value in families["flopbudget_flops"].values())
    assert all("#" not in label and "\n" not in label for label in expected)
    assert "模型 ü" in expected  # readable names stay readable
    # GitLab: one key per model and metric, each with its own value (nothing cut at a `#`, no line lost)
    keys = gitlab_keys(text)
    assert len(keys) == len(HOSTILE) * 4
    assert set(keys.values()) == {"1200", "600", "1"} | {"0"}


def test_nothing_counted_is_an_empty_report(tmp_path: Path) -> None:
    write_metrics([], tmp_path / "out" / "metrics.txt")
    assert (tmp_path / "out" / "metrics.txt").read_text() == "# EOF\n"
    assert parse("# EOF\n") == {}
