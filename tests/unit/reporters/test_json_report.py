"""JSON results: every model's Report, budget and verdict, lossless and strict JSON, paths relative."""

from __future__ import annotations

import json
from pathlib import Path

from reporter_helpers import RESNET_PARAMS, pyproject

from pytest_flopbudget import __version__
from pytest_flopbudget._config.budget import Budget
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._report import Report
from pytest_flopbudget._reporters.json_report import RESULTS_FORMAT, results, write_results
from pytest_flopbudget._run import Unchecked

PYPROJECT = pyproject(
    RESNET_PARAMS,
    """\
[tool.flopbudget.models.zero]
target = "pkg:zero"
inputs = [[1, 8]]
flops = 0
""",
)


def test_document_layout_and_figures(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    now, old = make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500})
    resnet = project.verdict("resnet", now, old)
    zero = project.verdict("zero", make_report({"a": 4}))
    change = BudgetChange(
        "resnet", "flops", "raised", "800", "1k", "main", project.settings.models["resnet"].sources["flops"], "+25.0%"
    )
    data = results([zero, resnet], [change], root=project.root)
    assert data["format"] == RESULTS_FORMAT
    assert data["tool"] == {"name": "pytest-flopbudget", "version": __version__}
    assert data["passed"] is False
    assert data["counts"] == {"models": 2, "failed": 2, "unchecked": 0, "errors": 2, "warnings": 2}  # MACs + change
    assert [m["name"] for m in data["models"]] == ["resnet", "zero"]
    entry = data["models"][0]
    assert entry["nodeid"] == "pyproject.toml::resnet"
    assert entry["origin"] == {
        "file": "pyproject.toml", "line": 3, "key": "tool.flopbudget.models.resnet", "origin": "pyproject",
    }  # fmt: skip
    assert entry["passed"] is False and entry["test_failed"] is False and entry["cache_mismatch"] is None
    assert entry["reason"] == "resnet: 1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%); baseline 800 FLOPs"
    assert entry["metrics"]["flops"] == {
        "now": 1200, "limit": 1000, "baseline": 800, "delta": 400, "usage": 1.2, "over": True,
    }  # fmt: skip
    assert entry["metrics"]["macs"] == {
        "now": 600, "limit": None, "baseline": 400, "delta": 200, "usage": None, "over": False,
    }  # fmt: skip
    assert entry["findings"][0] == {
        "severity": "error",
        "kind": "ceiling",
        "metric": "flops",
        "message": "1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%)",
        "actual": 1200,
        "limit": 1000,
        "baseline": 800,
        "source": {
            "file": "pyproject.toml",
            "line": 6,
            "key": "tool.flopbudget.models.resnet.flops",
            "slot": ["flops"],
            "origin": "pyproject",
        },
        "dim": None,
    }
    assert entry["budget"]["limits"]["flops"]["source"]["file"] == "pyproject.toml"
    assert Budget.from_dict(entry["budget"]).limit("params").value == 10
    assert Report.from_dict(entry["report"]).to_dict() == now.to_dict()  # the Report survives the trip
    assert Report.from_dict(entry["baseline"]).to_dict() == old.to_dict()
    assert entry["baseline_file"] == ".flopbudget/resnet.json"
    assert data["models"][1]["metrics"]["flops"]["usage"] is None  # 4 FLOPs over a zero budget: no finite ratio
    assert data["budget_changes"] == [
        {
            "model": "resnet", "setting": "flops", "kind": "raised", "before": "800", "after": "1k", "ref": "main",
            "message": "resnet: flops budget raised from 800 to 1k (+25.0%) since main",
            "source": {
                "file": "pyproject.toml", "line": 6, "key": "tool.flopbudget.models.resnet.flops", "slot": ["flops"],
                "origin": "pyproject",
            },
            "percent": "+25.0%",
        }
    ]  # fmt: skip


def test_written_file_is_strict_deterministic_json(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    verdicts = [project.verdict("zero", make_report({"a": 4})), project.verdict("resnet", make_report({"a": 5}))]
    path = tmp_path / "out" / "flopbudget.json"
    write_results(verdicts, path, root=project.root)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert data["passed"] is False and data["budget_changes"] == [] and data["unchecked"] == []
    write_results(list(reversed(verdicts)), path, root=project.root)
    assert path.read_text(encoding="utf-8") == text  # same verdicts, same bytes


def test_unchecked_models_are_listed_and_fail(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    entry = project.settings.models["zero"]
    unchecked = Unchecked("zero", "cannot import 'pkg': ModuleNotFoundError", entry.source)
    data = results([project.verdict("resnet", make_report({"a": 5}))], unchecked=[unchecked], root=project.root)
    assert data["passed"] is False
    assert data["counts"]["unchecked"] == 1 and data["counts"]["errors"] == 1
    assert data["unchecked"] == [
        {
            "name": "zero",
            "message": "cannot import 'pkg': ModuleNotFoundError",
            "source": {
                "file": "pyproject.toml",
                "line": 9,
                "key": "tool.flopbudget.models.zero",
                "origin": "pyproject",
            },
            "nodeid": None,
        }
    ]


def test_a_location_is_written_with_its_origin(make_project, make_report) -> None:
    # which kind of place (pyproject, marker, test) is a field of every place: `flopbudget merge` rebuilds the
    # outputs that read it (the command that records a baseline) from the document alone
    project = make_project(PYPROJECT)
    verdict = project.verdict("resnet", make_report({"stem": 300, "head": 900}))
    assert verdict.measurement.origin.origin is not None
    text = json.dumps(results([verdict], root=project.root))
    assert '"origin": "pyproject"' in text and '"origin": {' in text
