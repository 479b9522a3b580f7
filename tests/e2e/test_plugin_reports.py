"""CI outputs from the pytest plugin: `--flopbudget-report` and GitHub Actions, serially and under `-n 2`.

The reporters have golden tests of their own; this checks the wiring: the option and ini value reach the
reporters, every output is written once by the controller (never by an xdist worker), and a bad spec stops the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import MODELS, RunPytest, inner_pytest

pytest.importorskip("torch")

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "models:small"
inputs = [[1, 8]]
macs = 1000

[tool.flopbudget.models.wide]
target = "models:wide"
inputs = [[1, 8]]
macs = 10
"""


@pytest.fixture(params=["serial", pytest.param("xdist", marks=pytest.mark.slow)])
def run(request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunPytest:
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(models=MODELS)
    return inner_pytest(pytester, monkeypatch, request.param, subprocess_run=True)


def test_json_and_gitlab_reports_are_written_once(run, pytester: pytest.Pytester) -> None:
    result = run("--flopbudget-report=json:out/flops.json", "--flopbudget-report=gitlab:out/gl.json")
    result.assert_outcomes(passed=1, failed=1)

    data = json.loads((pytester.path / "out" / "flops.json").read_text())
    text = json.dumps(data)
    assert "small" in text and "wide" in text
    issues = json.loads((pytester.path / "out" / "gl.json").read_text())
    # the overrun of `wide`: 8*64 = 512 MACs > 10, located at the pyproject line declaring the budget
    overruns = [i for i in issues if "wide" in i["description"] and i["severity"] in ("major", "critical", "blocker")]
    assert len(overruns) == 1
    assert overruns[0]["location"]["path"] == "pyproject.toml"
    assert overruns[0]["location"]["lines"]["begin"] == PYPROJECT.splitlines().index("macs = 10") + 1


def test_github_annotations_and_summary_once(run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run()
    result.assert_outcomes(passed=1, failed=1)
    errors = [line for line in result.outlines if line.startswith("::error ")]
    assert len(errors) == 1
    line = PYPROJECT.splitlines().index("macs = 10") + 1
    assert errors[0].startswith(f"::error file=pyproject.toml,line={line},")
    assert "wide" in errors[0]
    assert summary.read_text().count("| wide") == 1


def test_ini_report_spec_and_bad_spec(run, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nflopbudget_report = json:from-ini.json\n")
    run().assert_outcomes(passed=1, failed=1)
    assert Path(pytester.path / "from-ini.json").is_file()

    bad = run("--flopbudget-report=xml:out.xml")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "xml:out.xml" in bad.stderr.str()
    assert "Traceback" not in bad.stderr.str() + bad.stdout.str()
