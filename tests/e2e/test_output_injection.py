"""Names from a model cannot inject GitHub workflow commands or terminal escapes, through either front end.

A pyproject key and a torch layer name carry a newline followed by `::stop-commands::pwned`, an ANSI clear-screen
and a bidi override. Under GitHub Actions, with a failing budget (so every output path prints them), every stdout
line must be inert except our own `::error`/`::warning`/`::notice` commands, whose data is escaped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from e2e_helpers import clean_env

pytest.importorskip("torch")

EVIL = "x\\n::stop-commands::pwned\\u001b[2J\\u0007\\u202e##[group]"

MODELS = """\
from torch import nn


def evil():
    model = nn.Sequential()
    model.add_module("a\\\\n::stop-commands::pwned\\\\x1b[2J\\\\x07\\\\u202e##[group]", nn.Linear(8, 64))
    return model
"""

PYPROJECT = f'[tool.flopbudget.models."{EVIL}"]\ntarget = "models:evil"\ninputs = [[1, 8]]\nmacs = "10"\n'
OUR_COMMAND = re.compile(r"^::(error|warning|notice)( [^:]*)?::[^\r\n]*$")


def assert_inert(stdout: str) -> None:
    for line in stdout.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            # our own command: its properties have no raw colon (escaped %3A), its data no raw newline
            assert OUR_COMMAND.match(line), line
        assert "##[" not in line, line
        assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line, line


def assert_no_controls(text: str) -> None:
    """A Markdown file: no escape, bell or bidi control from a name, shown escaped instead."""
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), ascii(text)
    assert "\\x1b" in text and "\\u202e" in text and "\\x07" in text


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def env(root: Path) -> dict[str, str]:
    return clean_env(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(root), COLUMNS="400")


def test_cli_output_is_inert(project: Path) -> None:
    for args in (["check"], ["check", "--update"], ["count", EVIL.replace("\\n", "\n")], ["diff"]):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_flopbudget", *args], cwd=project, env=env(project), capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert_inert(done.stdout)
        assert_inert(done.stderr)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check"], cwd=project, env=env(project), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and "::error " in done.stdout  # the annotation itself is still there, escaped


def test_pytest_output_is_inert(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA",
         "pyproject.toml"],
        cwd=project, env=env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:]
    assert_inert(done.stdout)
    assert "::error " in done.stdout


def test_markdown_summary_and_report_are_inert(project: Path) -> None:
    """The job summary (`$GITHUB_STEP_SUMMARY`) and `--report markdown:PATH` pass through the safe-text filter."""
    summary = project / "step-summary.md"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", "--report", "markdown:summary.md"], cwd=project,
        env={**env(project), "GITHUB_STEP_SUMMARY": str(summary)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    for path in (summary, project / "summary.md"):
        assert_no_controls(path.read_text(encoding="utf-8"))


def test_pytest_job_summary_is_inert(project: Path) -> None:
    summary = project / "step-summary.md"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "pyproject.toml",
         "--flopbudget-report=markdown:summary.md"],
        cwd=project, env={**env(project), "GITHUB_STEP_SUMMARY": str(summary)}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:]
    for path in (summary, project / "summary.md"):
        assert_no_controls(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--bogus=x\n::warning::pwned\x1b[2J\x07\u202e##[group]"],  # argparse echoes argv as it is
        ["count", "net", "--depth", "x\n::warning::pwned"],
        ["check", "--base-ref", "main\n::warning::pwned\x1b[2J\u202e"],  # was printed as two errors
    ],
)
def test_hostile_arguments_are_one_inert_error_line(project: Path, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", *argv], cwd=project, env=env(project), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and re.match(r"flopbudget( count)?: error: ", lines[0]), done.stderr
    assert_inert(done.stderr)
    assert "pwned" in lines[0]  # shown, escaped, not dropped


EXPORTS = ("metrics:out/metrics.txt", "benchmark:out/bench.json", "bencher:out/bmf.json")


def test_history_exports_and_junit_properties_stay_well_formed(project: Path) -> None:
    """The name (a newline, `::`, `#`, an escape, a bidi override) cannot break a history export or the JUnit XML,
    and both front ends write the same exports."""
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", *(f"--report={spec}" for spec in EXPORTS)],
        cwd=project, env=env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode == 1, cli.stderr
    written = {
        name: (project / "out" / name).read_text(encoding="utf-8") for name in ("metrics.txt", "bench.json", "bmf.json")
    }
    via_pytest = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "pyproject.toml",
         "--junitxml=junit.xml", *(f"--flopbudget-report={spec}" for spec in EXPORTS)],
        cwd=project, env=env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert via_pytest.returncode == 1, via_pytest.stdout[-2000:]
    for name, text in written.items():
        assert (project / "out" / name).read_text(encoding="utf-8") == text, name
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), ascii(text)
    inert = "x\\x0a::stop-commands::pwned\\x1b[2J\\x07\\u202e#\\x23[group]"
    assert list(json.loads(written["bmf.json"])) == [inert]
    assert {entry["name"] for entry in json.loads(written["bench.json"])} >= {f"{inert} - MACs"}
    samples = [line for line in written["metrics.txt"].splitlines() if not line.startswith("#")]
    assert samples and all(line.startswith("flopbudget_") and "#" not in line for line in samples)
    assert written["metrics.txt"].endswith("\n# EOF\n")
    cases = list(ET.parse(project / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 1
    names = dict((p.get("name"), p.get("value")) for p in cases[0].iter("property"))
    assert names["flopbudget.model"] == inert and names["flopbudget.verdict"] == "fail"
    # last: it needs the dev extra's prometheus_client
    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    families = list(parser.text_string_to_metric_families(written["metrics.txt"]))
    assert {sample.labels["model"] for family in families for sample in family.samples} == {inert.replace("#", "\\x23")}


def test_differential_pictures_are_inert_and_the_same_from_both_front_ends(project: Path) -> None:
    """`pictures:PATH`: the model's and the layer's names (a newline, `::`, `##[`, an escape, a bidi override) are
    shown escaped in the page, which stays one section with nothing to run; both front ends write the same page."""
    quiet = {key: value for key, value in env(project).items() if not key.startswith("GITHUB")}
    seeded = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", "--update"], cwd=project, env=quiet, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    (project / "models.py").write_text(MODELS.replace("nn.Linear(8, 64)", "nn.Linear(8, 96)"))  # the layer grew
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", "--report", "pictures:out/cli.html"], cwd=project,
        env=env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode == 1, cli.stderr
    via_pytest = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "pyproject.toml",
         "--flopbudget-report=pictures:out/pytest.html"],
        cwd=project, env=env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert via_pytest.returncode == 1, via_pytest.stdout[-2000:]
    page = (project / "out" / "cli.html").read_text(encoding="utf-8")
    assert (project / "out" / "pytest.html").read_text(encoding="utf-8") == page
    assert_no_controls(page)
    assert "##[" not in page and "<script" not in page
    assert len(re.findall(r'^<section class="model"', page, flags=re.M)) == 1  # what the action counts
    assert "<h2>x\\x0a::stop-commands::pwned\\x1b[2J\\x07\\u202e#&#35;[group] (FLOPs)</h2>" in page
    assert 'data-path="a\\n::stop-commands::pwned\\x1b[2J\\x07\\u202e#&#35;[group]"' in page  # the layer's box
