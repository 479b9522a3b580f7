"""GitHub workflow commands: exact lines, the toolkit's escaping, relative paths and the 10-per-level cap."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from reporter_helpers import TWO_MODELS

from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._reporters.annotations import collect
from pytest_flopbudget._reporters.github import (
    GitHubOutput,
    command,
    escape_data,
    escape_property,
    left_out,
    left_out_text,
    workflow_commands,
    workflow_lines,
)
from pytest_flopbudget._reporters.output import Findings, OutputContext
from pytest_flopbudget._run import RunResult, Unchecked

PYPROJECT = TWO_MODELS

#: A model name with every character that means something in a workflow command.
HOSTILE = "evil%25,name:x\nline2\r"
HOSTILE_TOML = '"evil%25,name:x\\nline2\\r"'


def test_escaping_matches_the_actions_toolkit() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_data("a:b,c") == "a:b,c"  # only properties escape : and ,
    assert escape_property("a:b,c%d\ne\r") == "a%3Ab%2Cc%25d%0Ae%0D"
    assert escape_data("%0A") == "%250A"  # % first: an already-escaped sequence is not decoded by the runner


def test_command_leaves_out_empty_properties() -> None:
    assert command("error", "m") == "::error::m"
    assert command("warning", "m", title="t") == "::warning title=t::m"
    assert command("error", "m", file="a.toml", line=3, title="t") == "::error file=a.toml,line=3,title=t::m"


def test_golden_lines_for_an_overrun_growth_and_skipped_ops(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    resnet = project.verdict("resnet", make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500}))
    vit = project.verdict("vit", make_report({"a": 1500}, {"aten.kthvalue": 2}), make_report({"a": 1500}))
    assert workflow_commands(collect([vit, resnet]), workspace=project.root) == [
        "::error file=pyproject.toml,line=6,title=flopbudget%3A resnet over the FLOPs budget::"
        "resnet: 1.20 kFLOPs > budget 1.00 kFLOPs (+20.0%25); baseline 800 FLOPs"
        "%0Alargest FLOPs changes by layer: head +400 (+80.0%25)",
        # resnet failed: its growth is in its error, so no growth warning on top
        "::warning file=pyproject.toml,line=9,title=flopbudget%3A vit ops not counted::"
        "vit: 2 op calls were not counted (aten.kthvalue x2)",
    ]


def test_repeated_blocks_that_changed_alike_are_one_entry_of_the_layer_hint(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    base = {f"blocks.{i}.up": 100 for i in range(4)} | {"head": 900}
    now = {f"blocks.{i}.up": 150 for i in range(4)} | {"head": 900}
    (line,) = workflow_commands(collect([project.verdict("resnet", make_report(now), make_report(base))]),
                                workspace=project.root)  # fmt: skip
    # 4 x 100 = 400 FLOPs at the base, 4 x 150 = 600 now: +200 (+50.0%), one entry instead of three of four
    assert line.endswith("%0Alargest FLOPs changes by layer: blocks.{0..3}.up x4 +200 (+50.0%25)")


def test_hostile_model_name_and_path_are_escaped(make_project, make_report) -> None:
    text = PYPROJECT.replace("models.vit]", f"models.{HOSTILE_TOML}]")
    project = make_project(text, subdir="odd,dir:100%")
    workspace = project.root.parent
    verdict = project.verdict(HOSTILE, make_report({"a": 2500}))
    assert workflow_commands(collect([verdict]), workspace=workspace) == [
        "::error file=odd%2Cdir%3A100%25/pyproject.toml,line=12,"
        "title=flopbudget%3A evil%2525%2Cname%3Ax%0Aline2%0D over the FLOPs budget::"
        "evil%2525,name:x%0Aline2%0D: 2.50 kFLOPs > budget 2.00 kFLOPs (+25.0%25)"
    ]


def test_marker_budget_points_at_the_test_function(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    verdict = project.marker_verdict("tests/test_m.py", 14, "test_small", make_report({"fc": 90}), flops=80)
    assert workflow_commands(collect([verdict]), workspace=project.root) == [
        "::error file=tests/test_m.py,line=14,title=flopbudget%3A tests.test_small over the FLOPs budget::"
        "tests.test_small: 90 FLOPs > budget 80 FLOPs (+12.5%25)"
    ]


def test_file_outside_the_workspace_is_left_out(make_project, make_report, tmp_path: Path) -> None:
    project = make_project(PYPROJECT, subdir="project")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    verdict = project.verdict("resnet", make_report({"a": 1100}))
    (line,) = workflow_commands(collect([verdict]), workspace=elsewhere)
    assert line.startswith("::error title=flopbudget%3A resnet over the FLOPs budget::resnet: 1.10 kFLOPs")


def test_budget_change_is_a_warning_on_the_declaring_line(make_project) -> None:
    project = make_project(PYPROJECT)
    change = BudgetChange(
        "resnet", "flops", "raised", "800", "1k", "origin/main", project.settings.models["resnet"].sources["flops"],
        "+25.0%",
    )  # fmt: skip
    assert workflow_commands(collect([], [change]), workspace=project.root) == [
        "::warning file=pyproject.toml,line=6,title=flopbudget%3A resnet budget raised since origin/main::"
        "resnet: flops budget raised from 800 to 1k (+25.0%25) since origin/main"
    ]


def _overruns(make_project, make_report, errors: int, warnings: int) -> tuple[Path, list]:
    models = "".join(
        f'[tool.flopbudget.models.m{i:02d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 1000\n\n'
        for i in range(errors + warnings)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    verdicts = []
    for i in range(errors):  # m00 is 1% over, m01 2% over, ...: the last is the worst
        verdicts.append(project.verdict(f"m{i:02d}", make_report({"a": 1000 + 10 * (i + 1)})))
    for i in range(errors, errors + warnings):  # growth within budget
        verdicts.append(project.verdict(f"m{i:02d}", make_report({"a": 500 + i}), make_report({"a": 400})))
    return project.root, verdicts


def test_ten_of_each_level_then_one_notice_counting_the_rest(make_project, make_report) -> None:
    # growth on FLOPs and MACs is one warning per model: 12 growing models, 10 shown
    root, verdicts = _overruns(make_project, make_report, errors=13, warnings=12)
    lines = workflow_commands(collect(verdicts), workspace=root)
    errors = [line for line in lines if line.startswith("::error ")]
    warnings = [line for line in lines if line.startswith("::warning ")]
    notices = [line for line in lines if line.startswith("::notice ")]
    assert len(errors) == 10 and len(warnings) == 10 and len(notices) == 1
    # most important first: the largest overrun (m12, +13%) down to m03 (+4%); m00..m02 are left out
    shown = [line.split("title=flopbudget%3A ")[1].split(" ")[0] for line in errors]
    assert shown == [f"m{i:02d}" for i in range(12, 2, -1)]
    assert notices == [
        "::notice title=flopbudget%3A more findings::5 more flopbudget findings not annotated (3 errors, 2 warnings):"
        " GitHub shows at most 10 annotations of each kind per step. They are listed in this step's log and the job"
        " summary."
    ]
    plain = lines[lines.index(notices[0]) + 1 :]
    assert len(plain) == 5
    assert plain[0] == "flopbudget: error: pyproject.toml:16: m02: 1.03 kFLOPs > budget 1.00 kFLOPs (+3.0%)"
    assert all(line.startswith("flopbudget: ") for line in plain)


def test_overflow_lines_cannot_inject_commands(make_project, make_report) -> None:
    text = "".join(
        f'[tool.flopbudget.models."m{i:02d}\\n::error::injected"]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 1\n\n'
        for i in range(11)
    )
    project = make_project("[tool.flopbudget]\n\n" + text)
    verdicts = [project.verdict(f"m{i:02d}\n::error::injected", make_report({"a": 5})) for i in range(11)]
    lines = workflow_commands(collect(verdicts), workspace=project.root)
    assert len(lines) == 12
    expected = "flopbudget: error: pyproject.toml:56: m10\\n::error::injected: 5 FLOPs > budget 1 FLOPs (+400.0%)"
    assert lines[-1] == expected
    assert not any(line.startswith("::error::") for line in lines)


def test_each_line_says_whether_it_is_a_command_and_is_written_as_such(make_project, make_report) -> None:
    root, verdicts = _overruns(make_project, make_report, errors=12, warnings=0)
    lines = workflow_lines(collect(verdicts), workspace=root)
    assert [line.command for line in lines] == [True] * 11 + [False] * 2  # 10 errors, the notice, 2 plain lines
    assert [line.text for line in lines] == workflow_commands(collect(verdicts), workspace=root)

    class Stream(io.StringIO):
        commands: list[str] = []

        def write_command(self, text: str) -> None:
            self.commands.append(text)

    out = Stream()
    GitHubOutput().write(Findings(RunResult(verdicts), collect(verdicts)), None, OutputContext(str(root), {}, out, out))
    assert out.commands == [line.text + "\n" for line in lines if line.command]
    assert not any(line.startswith("::") for line in out.getvalue().splitlines())


def test_fifteen_failing_models_annotate_the_worst_ten_and_say_how_many_were_left_out(
    make_project, make_report, tmp_path: Path
) -> None:
    root, verdicts = _overruns(make_project, make_report, errors=15, warnings=2)
    annotations = collect(verdicts)
    assert left_out(annotations) == {"error": 5}
    assert left_out_text({"error": 5, "warning": 1}) == "5 more errors and 1 more warning not annotated"
    summary, out = tmp_path / "summary.md", io.StringIO()
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    GitHubOutput().write(Findings(RunResult(verdicts), annotations), None, OutputContext(str(root), env, out, out))
    lines = out.getvalue().splitlines()
    errors = [line.split("title=flopbudget%3A ")[1].split(" ")[0] for line in lines if line.startswith("::error ")]
    assert errors == [f"m{i:02d}" for i in range(14, 4, -1)]  # the largest overrun (m14, +15%) first
    assert len([line for line in lines if line.startswith("::warning ")]) == 2
    assert lines[-1] == "flopbudget: 5 more errors not annotated: see the job summary"
    text = summary.read_text()
    assert (
        "_5 more errors not annotated: GitHub shows at most 10 annotations of each kind per step; every model is in "
        "the table._"
    ) in text
    assert all(f"| m{i:02d} |" in text for i in range(17))
    out = io.StringIO()
    GitHubOutput().write(Findings(RunResult(verdicts), annotations), None, OutputContext(str(root), {}, out, out))
    assert out.getvalue().splitlines()[-1] == "flopbudget: 5 more errors not annotated: listed above"


def test_nothing_left_out_says_nothing(make_project, make_report, tmp_path: Path) -> None:
    root, verdicts = _overruns(make_project, make_report, errors=10, warnings=10)
    annotations = collect(verdicts)
    assert left_out(annotations) == {} and left_out_text({}) == ""
    summary, out = tmp_path / "summary.md", io.StringIO()
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    GitHubOutput().write(Findings(RunResult(verdicts), annotations), None, OutputContext(str(root), env, out, out))
    assert "not annotated" not in out.getvalue() + summary.read_text()


@pytest.mark.parametrize("limit", [1, 3])
def test_cap_is_configurable(make_project, make_report, limit: int) -> None:
    root, verdicts = _overruns(make_project, make_report, errors=4, warnings=0)
    lines = workflow_commands(collect(verdicts), workspace=root, limit=limit)
    assert sum(line.startswith("::error ") for line in lines) == limit
    assert f"{4 - limit} more flopbudget finding" in next(line for line in lines if line.startswith("::notice "))


def test_unchecked_model_is_the_first_error(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    overrun = project.verdict("resnet", make_report({"a": 5000}))
    broken = Unchecked("vit", "cannot import 'pkg': ModuleNotFoundError: No module named 'pkg'",
                       project.settings.models["vit"].source)  # fmt: skip
    assert workflow_commands(collect([overrun], unchecked=[broken]), workspace=project.root)[0] == (
        "::error file=pyproject.toml,line=9,title=flopbudget%3A vit not checked::"
        "vit: not checked: cannot import 'pkg': ModuleNotFoundError: No module named 'pkg'"
    )
