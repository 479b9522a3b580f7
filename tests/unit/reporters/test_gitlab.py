"""GitLab Code Quality: every field of every issue checked against GitLab's documented report format.

GitLab's format (docs.gitlab.com, "Code Quality report format"): a JSON array of objects, each with
`description` (string), `check_name` (string), `fingerprint` (unique string), `severity` (one of info, minor,
major, critical, blocker) and `location.path` (relative to the repository) with `location.lines.begin` (line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reporter_helpers import TWO_MODELS

from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._reporters.annotations import collect
from pytest_flopbudget._reporters.gitlab import code_quality, fingerprint_of, write_code_quality
from pytest_flopbudget._run import Unchecked

SEVERITIES = {"info", "minor", "major", "critical", "blocker"}
PYPROJECT = TWO_MODELS


def assert_gitlab_format(issues: Any) -> None:
    """The documented shape, field by field, plus the uniqueness GitLab relies on to track issues."""
    assert isinstance(issues, list)
    for issue in issues:
        assert isinstance(issue, dict)
        assert isinstance(issue["description"], str) and issue["description"]
        assert isinstance(issue["check_name"], str) and issue["check_name"]
        assert isinstance(issue["fingerprint"], str) and re.fullmatch(r"[0-9a-f]{64}", issue["fingerprint"])
        assert issue["severity"] in SEVERITIES
        location = issue["location"]
        assert isinstance(location["path"], str)
        assert not location["path"].startswith(("/", "./")) and "\\" not in location["path"]
        begin = location["lines"]["begin"]
        assert isinstance(begin, int) and not isinstance(begin, bool) and begin >= 1
        assert issue["type"] == "issue" and issue["categories"] == ["Performance"]  # Code Climate extras
    fingerprints = [issue["fingerprint"] for issue in issues]
    assert len(fingerprints) == len(set(fingerprints))


def test_issues_field_by_field(make_project, make_report) -> None:
    project = make_project(PYPROJECT, subdir="sub")
    resnet = project.verdict("resnet", make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500}))
    vit = project.verdict("vit", make_report({"a": 1500}, {"aten.kthvalue": 2}), make_report({"a": 1500}))
    change = BudgetChange(
        "vit", "flops", "raised", "1.5k", "2k", "origin/main", project.settings.models["vit"].sources["flops"], "+33.3%"
    )
    issues = code_quality(collect([resnet, vit], [change]), root=project.root.parent)
    assert_gitlab_format(issues)
    assert [(i["check_name"], i["severity"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("flopbudget/ceiling/flops", "critical", 6),
        ("flopbudget/raised/flops", "major", 12),
        ("flopbudget/skipped/skipped", "info", 9),
    ]
    assert issues[0] == {
        "type": "issue",
        "check_name": "flopbudget/ceiling/flops",
        "description": "resnet: 1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%); baseline 800 FLOPs; "
        "largest FLOPs changes by layer: head +400 (+80.0%)",
        "categories": ["Performance"],
        "severity": "critical",
        "fingerprint": fingerprint_of(collect([resnet])[0]),
        "location": {"path": "sub/pyproject.toml", "lines": {"begin": 6}},
    }
    assert issues[1]["description"] == "vit: flops budget raised from 1.5k to 2k (+33.3%) since origin/main"


def test_fingerprint_is_stable_across_runs_and_figures(make_project, make_report) -> None:
    first = make_project(PYPROJECT)
    before = code_quality(collect([first.verdict("resnet", make_report({"a": 1100}))]), root=first.root)
    # next run: another overrun of the same model and metric, declared on another line
    second = make_project("\n\n" + PYPROJECT.replace('flops = "1k"', 'flops = "1.05k"'))
    after = code_quality(collect([second.verdict("resnet", make_report({"a": 1300}))]), root=second.root)
    assert before[0]["location"]["lines"]["begin"] != after[0]["location"]["lines"]["begin"]
    assert before[0]["description"] != after[0]["description"]
    assert before[0]["fingerprint"] == after[0]["fingerprint"]
    params = code_quality(collect([second.verdict("resnet", make_report({"a": 900}, params=11))]), root=second.root)
    assert params[0]["check_name"] == "flopbudget/ceiling/params"
    assert params[0]["fingerprint"] != before[0]["fingerprint"]  # another metric is another issue


def test_two_tests_counting_one_model_get_distinct_fingerprints(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    a = project.marker_verdict("tests/test_a.py", 3, "test_x", make_report({"a": 20}), flops=10)
    b = project.marker_verdict("tests/test_b.py", 3, "test_x", make_report({"a": 30}), flops=10)
    assert a.name == b.name
    issues = code_quality(collect([a, b]), root=project.root)
    assert_gitlab_format(issues)
    assert [i["location"]["path"] for i in issues] == ["tests/test_b.py", "tests/test_a.py"]  # worst first


def test_source_outside_the_repository_falls_back_to_pyproject_line_1(make_project, make_report, tmp_path) -> None:
    project = make_project(PYPROJECT, subdir="project")
    other = tmp_path / "other"
    other.mkdir()
    issues = code_quality(collect([project.verdict("resnet", make_report({"a": 1100}))]), root=other)
    assert_gitlab_format(issues)
    assert issues[0]["location"] == {"path": "pyproject.toml", "lines": {"begin": 1}}


def test_written_file_is_an_array_even_when_empty(tmp_path: Path, make_project, make_report) -> None:
    path = tmp_path / "reports" / "gl-code-quality.json"
    assert write_code_quality([], path, root=tmp_path) == 0
    assert path.read_text(encoding="utf-8") == "[]\n"
    hostile = "evil%,:\nname"
    text = PYPROJECT.replace("models.vit]", """models."evil%,:\\nname"]""")
    project = make_project(text)
    verdict = project.verdict(hostile, make_report({"a": 2500}))
    assert write_code_quality(collect([verdict]), path, root=project.root) == 1
    (issue,) = json.loads(path.read_text(encoding="utf-8"))
    assert_gitlab_format([issue])
    assert issue["description"] == "evil%,:\nname: 2.50 kFLOPs > budget 2.00 kFLOPs (+25.0%)"


def test_unchecked_model_is_a_critical_issue(make_project) -> None:
    project = make_project(PYPROJECT)
    broken = Unchecked("vit", "it raised", project.settings.models["vit"].source)
    (issue,) = code_quality(collect([], unchecked=[broken]), root=project.root)
    assert_gitlab_format([issue])
    assert (issue["check_name"], issue["severity"], issue["description"]) == (
        "flopbudget/unchecked", "critical", "vit: not checked: it raised",
    )  # fmt: skip
    assert issue["location"] == {"path": "pyproject.toml", "lines": {"begin": 9}}


def test_descriptions_show_escapes_bells_and_bidi_controls_escaped(make_project, make_report) -> None:
    """A reviewer reads the description in the merge request: control and bidi characters are shown, not obeyed."""
    text = PYPROJECT.replace("models.vit]", 'models."a\\u001b[2J\\u0007\\u202eb"]')
    project = make_project(text)
    verdict = project.verdict("a\x1b[2J\x07\u202eb", make_report({"a": 2500}))
    (issue,) = code_quality(collect([verdict]), root=project.root)
    assert issue["description"] == "a\\x1b[2J\\x07\\u202eb: 2.50 kFLOPs > budget 2.00 kFLOPs (+25.0%)"
