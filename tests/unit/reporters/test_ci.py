"""The CI entry point: spec parsing, `auto` detection, `emit` to every output, and a real counted model."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from reporter_helpers import RESNET, pyproject

from pytest_flopbudget._reporters.ci import (
    ReportSpec,
    ReportSpecError,
    emit,
    parse_spec,
    resolve_specs,
)
from pytest_flopbudget._run import RunResult, Unchecked

PYPROJECT = pyproject(RESNET)
GITHUB = {"GITHUB_ACTIONS": "true"}
#: The grammar every bad spec's message ends with, spelled out (a test of the text, not of the constant).
EXPECTED = (
    "github, gitlab:PATH, json:PATH, markdown:PATH, metrics:PATH, benchmark:PATH, bencher:PATH, comment:PATH, "
    "pictures:PATH, auto or none"
)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("github", ReportSpec("github")),
        (" GitHub ", ReportSpec("github")),
        ("gitlab:gl-code-quality.json", ReportSpec("gitlab", "gl-code-quality.json")),
        ("json:out/r.json", ReportSpec("json", "out/r.json")),
        ("json:C:\\ci\\r.json", ReportSpec("json", "C:\\ci\\r.json")),  # only the first colon separates
        ("markdown:summary.md", ReportSpec("markdown", "summary.md")),
        ("metrics:metrics.txt", ReportSpec("metrics", "metrics.txt")),
        ("benchmark:out/bench.json", ReportSpec("benchmark", "out/bench.json")),
        ("Bencher:bmf.json", ReportSpec("bencher", "bmf.json")),
        ("comment:body.md", ReportSpec("comment", "body.md")),
        ("auto", ReportSpec("auto")),
        ("none", ReportSpec("none")),
    ],
)
def test_parse_spec(text: str, spec: ReportSpec) -> None:
    assert parse_spec(text) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("githb", f"unknown report 'githb'; expected {EXPECTED}"),
        ("gitlab", f"report 'gitlab': gitlab needs a file, as in gitlab:PATH; expected {EXPECTED}"),
        ("json: ", f"report 'json: ': json needs a file, as in json:PATH; expected {EXPECTED}"),
        ("github:x", f"report 'github:x': github takes no path; expected {EXPECTED}"),
        ("", f"unknown report ''; expected {EXPECTED}"),
        ("metrics", f"report 'metrics': metrics needs a file, as in metrics:PATH; expected {EXPECTED}"),
    ],
)  # fmt: skip
def test_bad_spec_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ReportSpecError) as info:
        parse_spec(text)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_auto_means_github_only_on_github_actions() -> None:
    assert resolve_specs([], GITHUB) == [ReportSpec("github")]
    assert resolve_specs([], {}) == []
    assert resolve_specs([], {"GITHUB_ACTIONS": "false"}) == []
    assert resolve_specs(["none"], GITHUB) == []
    assert resolve_specs(["none", "json:a.json"], GITHUB) == [ReportSpec("json", "a.json")]
    assert resolve_specs(["json:a", "github", "auto", "json:a"], GITHUB) == [
        ReportSpec("github"),
        ReportSpec("json", "a"),
    ]
    assert resolve_specs(["json:a"], GITHUB) == [ReportSpec("github"), ReportSpec("json", "a")]  # auto stays on
    assert resolve_specs(["json:a"], {}) == [ReportSpec("json", "a")]
    assert resolve_specs(["github"], {}) == [ReportSpec("github")]  # explicit works anywhere


def test_emit_github_annotations_and_step_summary(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    verdict = project.verdict("resnet", make_report({"a": 1100}), make_report({"a": 900}))
    summary = tmp_path / "step_summary.md"
    env = {**GITHUB, "GITHUB_WORKSPACE": str(project.root), "GITHUB_STEP_SUMMARY": str(summary)}
    out = io.StringIO()
    result = emit(RunResult([verdict]), resolve_specs([], env), env=env, stream=out)
    assert result.ok
    assert out.getvalue().splitlines() == [
        "",  # commands start on a fresh line whatever was printed before
        "::error file=pyproject.toml,line=6,title=flopbudget%3A resnet over the FLOPs budget::"
        "resnet: 1.10 kFLOPs > budget 1.00 kFLOPs (+10.0%25); baseline 900 FLOPs"
        "%0Alargest FLOPs changes by layer: a +200 (+22.2%25)",
    ]
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### flopbudget: ❌ 1 of 1 model over budget\n")
    assert "| ❌ | resnet | FLOPs | 1.00k | 900 | 1.10k | +200 (+22.2%) | ██████████ 110.0% over |" in text


def test_emit_github_without_summary_file_or_models(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    out = io.StringIO()
    verdict = project.verdict("resnet", make_report({"a": 900}))
    assert emit(RunResult([verdict]), [ReportSpec("github")], env={}, stream=out, workspace=project.root).ok
    assert out.getvalue() == ""  # within budget, no baseline: nothing to annotate, and no summary file to write
    assert emit(RunResult(), [ReportSpec("github")], env={"GITHUB_STEP_SUMMARY": "/nonexistent/x"}, stream=out).ok


def test_emit_files_relative_to_the_ci_checkout(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT, subdir="repo/sub")
    verdict = project.verdict("resnet", make_report({"a": 1100}))
    env = {"CI_PROJECT_DIR": str(tmp_path / "repo")}
    specs = [ReportSpec("gitlab", str(tmp_path / "gl.json")), ReportSpec("json", str(tmp_path / "r.json"))]
    result = emit(RunResult([verdict]), specs, env=env, stream=io.StringIO())
    assert result.ok
    (issue,) = json.loads((tmp_path / "gl.json").read_text(encoding="utf-8"))
    assert issue["location"] == {"path": "sub/pyproject.toml", "lines": {"begin": 6}}
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["models"][0]["origin"]["file"] == "sub/pyproject.toml"


def test_emit_with_no_verdicts_still_writes_an_empty_code_quality_report(tmp_path: Path) -> None:
    path = tmp_path / "gl.json"
    assert emit(RunResult(), [ReportSpec("gitlab", str(path))], env={}).ok
    assert path.read_text(encoding="utf-8") == "[]\n"


def test_one_unwritable_output_does_not_stop_the_others(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    specs = [ReportSpec("json", str(blocker / "r.json")), ReportSpec("markdown", str(tmp_path / "s.md"))]
    result = emit(RunResult([project.verdict("resnet", make_report({"a": 5}))]), specs, env={}, workspace=project.root)
    assert not result.ok
    (error,) = result.errors
    assert error.startswith(f"flopbudget: error: cannot write the json report json:{blocker / 'r.json'}: ")
    assert (tmp_path / "s.md").read_text(encoding="utf-8").startswith("### flopbudget: ✅ 1 model within budget")


def test_an_unwritable_output_is_a_failure_the_front_end_words(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    result = emit(RunResult(), [ReportSpec("json", str(blocker / "r.json"))], env={})
    (failure,) = result.failures
    assert failure.startswith(f"cannot write the json report json:{blocker / 'r.json'}: ")
    assert result.errors == [f"flopbudget: error: {failure}"]


def test_real_counted_models_through_judge(tmp_path: Path) -> None:
    """count() on tiny torch models, a saved baseline, `judge`, then every output: the whole path for real."""
    torch = pytest.importorskip("torch")
    from pytest_flopbudget import count
    from pytest_flopbudget._config.pyproject import load_settings
    from pytest_flopbudget._judge.baseline import BaselineStore
    from pytest_flopbudget._judge.verdict import Measurement, judge
    from pytest_flopbudget._render.formatting import format_value

    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.mlp]\ntarget = "m:mlp"\ninputs = [[1, 8]]\nflops = 100\n', encoding="utf-8"
    )
    entry = load_settings(tmp_path / "pyproject.toml").models["mlp"]
    store = BaselineStore(tmp_path / ".flopbudget")
    store.save("mlp", count(torch.nn.Linear(8, 4), torch.zeros(1, 8)))
    wider = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    verdict = judge(Measurement("mlp", count(wider, torch.zeros(1, 8)), entry.budget, entry.source), store)
    assert not verdict.passed
    out = io.StringIO()
    env = {"GITHUB_WORKSPACE": str(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    result = emit(
        RunResult([verdict]), [ReportSpec("github"), ReportSpec("json", str(tmp_path / "r.json"))], env=env, stream=out
    )
    assert result.ok
    first = out.getvalue().splitlines()[1]
    head = "::error file=pyproject.toml,line=4,title=flopbudget%3A mlp over the FLOPs budget::mlp: "
    assert first.startswith(head + format_value(verdict.value("flops"), "flops") + " > budget 100 FLOPs")
    assert "largest FLOPs changes by layer: 0 +" in first  # the Linear moved from the root to layer "0"
    assert "<details>" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["models"][0]["metrics"]["flops"]["now"] == verdict.value("flops")


def test_reporters_import_neither_pytest_nor_torch() -> None:
    code = (
        "import sys\n"
        "import pytest_flopbudget._reporters.ci, pytest_flopbudget._judge.base_ref\n"
        "bad = sorted(m for m in ('pytest', 'torch', '_pytest') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_unchecked_models_are_reported_even_without_verdicts(make_project, tmp_path: Path) -> None:
    project = make_project(PYPROJECT)
    broken = Unchecked("resnet", "it raised", project.settings.models["resnet"].source)
    out = io.StringIO()
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}
    result = emit(RunResult(unchecked=[broken]), [ReportSpec("github")], env=env, stream=out, workspace=project.root)
    assert result.ok
    assert out.getvalue() == (
        "\n::error file=pyproject.toml,line=3,title=flopbudget%3A resnet not checked::resnet: not checked: it raised\n"
    )
    assert (tmp_path / "s.md").read_text(encoding="utf-8").startswith("### flopbudget: ❌ 1 not checked, no models")


def test_a_full_step_summary_is_left_alone(make_project, make_report, tmp_path: Path) -> None:
    from pytest_flopbudget._reporters.markdown import MAX_BYTES

    project = make_project(PYPROJECT)
    summary = tmp_path / "s.md"
    summary.write_bytes(b"x" * (MAX_BYTES - 1000))
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    verdict = project.verdict("resnet", make_report({"a": 1100}))
    result = emit(RunResult([verdict]), [ReportSpec("github")], env=env, stream=io.StringIO(), workspace=project.root)
    assert result.ok
    assert summary.stat().st_size == MAX_BYTES - 1000
