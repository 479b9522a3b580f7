"""The JSON results read back: the rebuilt run writes every output byte for byte as the run itself did."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from reporter_helpers import RESNET_PARAMS, VIT, pyproject

from pytest_flopbudget._config.location import Location
from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._reporters import ci, json_report
from pytest_flopbudget._reporters.results_reader import parse_results
from pytest_flopbudget._run import RunResult, Unchecked
from pytest_flopbudget._shard import PlanItem, Shard

PYPROJECT = pyproject(RESNET_PARAMS, VIT)
#: Every built-in file output, and the GitHub output with its job summary.
FILES = ("json", "markdown", "gitlab", "metrics", "benchmark", "bencher", "comment", "pictures")


def outputs(result: RunResult, root: Path, where: Path) -> dict[str, str]:
    """Every output of `result`, written under `where` as a run in `root` on GitHub Actions writes them."""
    where.mkdir()
    summary = where / "summary.md"
    summary.touch()
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(root), "GITHUB_STEP_SUMMARY": str(summary)}
    specs = [ci.ReportSpec("github"), ci.TERMINAL, *(ci.ReportSpec(kind, str(where / kind)) for kind in FILES)]
    stream = io.StringIO()
    emitted = ci.emit(result, specs, env=env, stream=stream, errors=stream)
    assert emitted.ok
    return {"stream": stream.getvalue(), **{path.name: path.read_text(encoding="utf-8") for path in where.iterdir()}}


def a_run(make_project, make_report) -> tuple[RunResult, Path]:
    project = make_project(PYPROJECT)
    grown = project.verdict("resnet", make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500}))
    vit = project.verdict("vit", make_report({"a": 100}, skipped={"aten.op": 2}), make_report({"a": 90}))
    marker = project.marker_verdict("tests/test_x.py", 12, "test_x", make_report({"b": 40}), flops="30")
    source = project.settings.models["resnet"].sources["flops"]
    changes = [
        BudgetChange("resnet", "flops", "raised", "800", "1k", "origin/main", source, "+25.0%"),
        BudgetChange("vit", "baseline", "baseline changed", "origin/main:.flopbudget/vit.json", ".flopbudget/vit.json",
                     "origin/main", project.settings.models["vit"].source),
    ]  # fmt: skip
    gone = Unchecked("gone", "cannot import 'pkg'", project.settings.models["vit"].source, "pyproject.toml::gone")
    result = RunResult(
        verdicts=[grown, marker, vit], unchecked=[gone], changes=changes, baseline_dir=".flopbudget",
        base_ref="origin/main", front_end=CLI,
    )  # fmt: skip
    return result, project.root


def test_a_run_read_back_writes_every_output_as_the_run_did(make_project, make_report, tmp_path: Path) -> None:
    result, root = a_run(make_project, make_report)
    text = json_report.dumps_results(result, root=root)
    back = parse_results(text, root)
    assert back.shard is None and back.result.front_end is CLI  # the merge's text is the CLI's
    assert outputs(back.result, root, tmp_path / "back") == outputs(result, root, tmp_path / "run")
    assert json_report.dumps_results(back.result, root=root) == text


def test_places_keep_their_kind_and_are_made_relative_to_the_checkout(make_project, make_report) -> None:
    result, root = a_run(make_project, make_report)
    data = json.loads(json_report.dumps_results(result, root=root))
    resnet = data["models"][0]
    assert resnet["origin"] == {"file": "pyproject.toml", "line": 3, "key": "tool.flopbudget.models.resnet",
                                "origin": "pyproject"}  # fmt: skip
    assert data["run"] == {"base_ref": "origin/main", "baseline_dir": ".flopbudget", "projects": []}
    back = parse_results(json.dumps(data), root).result
    assert back.verdicts[0].measurement.origin == result.verdicts[0].measurement.origin
    assert back.verdicts[0].measurement.origin.file == str(root / "pyproject.toml")


def test_a_shards_record_travels_with_its_results(make_project, make_report) -> None:
    result, root = a_run(make_project, make_report)
    result.shard = Shard(2, 3, (PlanItem("a", "pyproject.toml::a"),), ("pyproject.toml::a",), {"pyproject.toml": "1"},
                         {"a.json": "2"})  # fmt: skip
    back = parse_results(json_report.dumps_results(result, root=root), root)
    assert back.shard == result.shard and back.result.shard == result.shard


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="pytest-flopbudget/results/1"), "format is 'pytest-flopbudget/results/1'"),
        (lambda d: d.pop("run"), "missing field 'run'"),
        (lambda d: d["models"][0].update(name=3), "models[0].name must be a string, got 3"),
        (lambda d: d["models"][0]["findings"][0].update(actual="1"), "models[0].findings[0].actual must be a whole"),
        (lambda d: d["models"][0]["report"].update(totals=[]), "models[0].report:"),
        (lambda d: d["run"].update(base_ref=1), "run.base_ref must be a string, got 1"),
        (lambda d: d["models"][0]["findings"][0].update(kind="bad"), "models[0].findings[0].kind is 'bad', expected"),
        (lambda d: d["models"][0]["budget"].update(limits=[1]), "not a results document this version can read"),
    ],
)
def test_a_document_it_cannot_read_is_one_line_naming_the_field(make_project, make_report, edit, message) -> None:
    result, root = a_run(make_project, make_report)
    data = json.loads(json_report.dumps_results(result, root=root))
    edit(data)
    with pytest.raises(ValueError, match=None) as raised:
        parse_results(json.dumps(data), root)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_not_json_and_deep_nesting_are_one_line(tmp_path: Path) -> None:
    for text, message in (("{", "not JSON"), ("[" * 100_000, "nested too deeply"), ("1" * 50, "digits")):
        with pytest.raises(ValueError, match=message):
            parse_results(text, tmp_path)


def test_a_place_outside_the_checkout_stays_absolute(make_project, make_report, tmp_path: Path) -> None:
    result, root = a_run(make_project, make_report)
    result.unchecked = [Unchecked("x", "m", Location("/elsewhere/p.toml", 1, "k"))]
    back = parse_results(json_report.dumps_results(result, root=root), root).result
    assert back.unchecked[0].origin == Location("/elsewhere/p.toml", 1, "k")
