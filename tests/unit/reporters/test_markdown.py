"""The job summary: the exact Markdown, escaping of names, and staying under GitHub's 1 MiB limit."""

from __future__ import annotations

from pathlib import Path

from reporter_helpers import RESNET_PARAMS, VIT, pyproject

from pytest_flopbudget._front_ends import CLI
from pytest_flopbudget._judge.base_ref import BudgetChange
from pytest_flopbudget._reporters.markdown import (
    MAX_BYTES,
    RESERVE,
    append_step_summary,
    cell,
    room_left,
    summary,
    usage_bar,
)
from pytest_flopbudget._run import Unchecked

HINT = "`flopbudget check --update`"
PYPROJECT = pyproject(
    RESNET_PARAMS,
    VIT,
    """\
[tool.flopbudget.models."a|b <i>x</i>"]
target = "pkg:vit"
inputs = [[1, 8]]
macs = "1k"
""",
)

GOLDEN = """\
### flopbudget: ❌ 1 of 3 models over budget, 1 with warnings, 1 budget change to review

**Budgets raised or removed since origin/main** (check that this is intended):

- ⚠️ vit: flops budget raised from 1.5k to 2k (+33.3%) since origin/main (pyproject.toml:12)

**Warnings** (the check passes; read them before merging):

- ⚠️ vit: 2 op calls were not counted (aten.kthvalue x2) (pyproject.toml:9)

|  | model | metric | budget | baseline | now | delta | budget use |
| --- | --- | --- | --- | --- | --- | --- | --- |
| ❌ | resnet | FLOPs | 1.00k | 800 | 1.20k | +400 (+50.0%) | ██████████ 120.0% over |
| ⚠️ |  | MACs | - | 400 | 600 | +200 (+50.0%) | - |
| ✅ |  | params | 10 | 2 | 2 | = | ██░░░░░░░░ 20.0% |
| ✅ | vit | FLOPs | 2.00k | 1.50k | 1.50k | = | ███████░░░ 75.0% |
| ⚠️ |  | skipped op calls | 5 | 0 | 2 | +2 (new) | ████░░░░░░ 40.0% |
| ✅ | a\\|b &lt;i&gt;x&lt;/i&gt; | MACs | 1.00k | - | 750 | - | ███████░░░ 75.0% |

<details>
<summary>❌ resnet: 1.20 kFLOPs &gt; budget 1.00 kFLOPs (+20.0%); baseline 800 FLOPs</summary>

```text
FLOPs per layer, against .flopbudget/resnet.json:
  layer  baseline    now          delta
  head        500    900  +400 (+80.0%)
  total       800  1.20k  +400 (+50.0%)
to accept: set flops = "1.2k" at pyproject.toml:6 (tool.flopbudget.models.resnet); then run `flopbudget check --update resnet` and commit both
```

</details>

<details>
<summary>⚠️ vit: 1.50 kFLOPs (unchanged), 750 MACs (unchanged), 1 params (unchanged), 0 skipped op calls -&gt; 2 skipped op calls (new)</summary>

```text
skipped op calls per layer, against .flopbudget/vit.json:
  layer    baseline  now       delta
  (model)         -    2  +2 (added)
  total           0    2    +2 (new)
```

</details>
"""  # noqa: E501 (the golden hint and summary lines are one line each)


def test_golden_summary(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    resnet = project.verdict("resnet", make_report({"stem": 300, "head": 900}), make_report({"stem": 300, "head": 500}))
    vit = project.verdict("vit", make_report({"a": 1500}, {"aten.kthvalue": 2}), make_report({"a": 1500}))
    odd = project.verdict("a|b <i>x</i>", make_report({"a": 1500}))
    change = BudgetChange(
        "vit", "flops", "raised", "1.5k", "2k", "origin/main", project.settings.models["vit"].sources["flops"], "+33.3%"
    )
    assert summary([odd, vit, resnet], [change], front_end=CLI, workspace=project.root) == GOLDEN


def test_a_model_that_grew_inside_its_budget_shows_where(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    layers = {f"layers.{i}.mlp.up": 39 for i in range(32)}
    vit = project.verdict("vit", make_report(layers), make_report(dict.fromkeys(layers, 30)))
    text = summary([vit], front_end=CLI, workspace=project.root)
    assert text.splitlines()[0].startswith("### flopbudget: ✅ 1 model within budget")
    assert " vit: 960 FLOPs -&gt; 1.25 kFLOPs (+30.0%)" in text
    assert "  layers.{0..31}.mlp.up x32       960  1.25k  +288 (+30.0%)" in text.splitlines()


def test_unchanged_models_collapse_into_one_row(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:02d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(12)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    same = [project.verdict(f"m{i:02d}", make_report({"a": 5}), make_report({"a": 5})) for i in range(12)]
    new = project.verdict("m11", make_report({"a": 5}))  # no baseline: its row says "-", not "="
    text = summary([*same[:11], new], front_end=CLI)
    names = ", ".join(f"m{i:02d}" for i in range(10))
    assert f"| ✅ | 11 models unchanged: {names}, … |  |  |  |  |  |  |" in text.splitlines()
    assert "| ✅ | m11 | FLOPs | 10 | - | 5 | - | █████░░░░░ 50.0% |" in text.splitlines()
    assert text.count("| ✅ |") == 2 and "<details>" not in text
    one = summary(same[:1], front_end=CLI)  # a single unchanged model keeps its row
    assert "| ✅ | m00 | FLOPs | 10 | 5 | 5 | = | █████░░░░░ 50.0% |" in one.splitlines()


def test_all_within_budget_has_no_details(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    text = summary([project.verdict("vit", make_report({"a": 1500}))], front_end=CLI, workspace=project.root)
    assert text.splitlines()[0] == "### flopbudget: ✅ 1 model within budget"
    assert "<details>" not in text


def test_failure_without_baseline_lists_top_layers_and_the_hint(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    text = summary([project.verdict("resnet", make_report({"a": 700, "b": 400}))], front_end=CLI)
    assert "top layers by FLOPs:" in text
    assert "no baseline for resnet yet (.flopbudget/resnet.json); run `flopbudget check --update` to create it" in text


def test_cells_escape_markdown_and_html() -> None:
    assert cell("a|b") == "a\\|b"
    assert cell("<script>&") == "&lt;script&gt;&amp;"
    assert cell("x\ny") == "x y"
    assert cell("*b* _i_ `c` [l](u) ~s~") == "\\*b\\* \\_i\\_ \\`c\\` \\[l\\](u) \\~s\\~"


def test_hostile_name_cannot_break_the_details_block(make_project, make_report) -> None:
    name = "x```\\n</details><img src=y>"
    project = make_project(PYPROJECT.replace('"a|b <i>x</i>"', f'"{name}"'))
    verdict = project.verdict(name.replace("\\n", "\n"), make_report({"a": 2500}))
    text = summary([verdict], front_end=CLI)
    assert "<summary>❌ x``` &lt;/details&gt;&lt;img src=y&gt;: 1.25 kMACs &gt; budget" in text
    before, fenced = text.split("\n````text\n")  # a fence longer than any backtick run in the name
    inside, after = fenced.split("\n````\n")
    assert "</details><img src=y>" in inside  # literal inside the code block
    assert before.count("<details>") == 1 and "</details>" not in before and after == "\n</details>\n"


def test_names_mention_no_one_and_reference_no_issue(make_project, make_report) -> None:
    """A model named `@org/team #1` would notify a team and link issue 1 from the job summary and the comment:
    every name outside a code block gets a zero-width space after `@` and between `#` or `GH-` and a digit."""
    name = "@org/team #1 GH-2"
    project = make_project(PYPROJECT.replace('"a|b <i>x</i>"', f'"{name}"'))
    grown = project.verdict(name, make_report({"@layer": 2500}))
    text = summary([grown], front_end=CLI)
    inert = "@\u200borg/team #\u200b1 GH-\u200b2"
    assert f"| ❌ | {inert} | MACs |" in text  # the table row
    assert f"<summary>❌ {inert}: 1.25 kMACs &gt; budget" in text  # the folded diff's summary line
    outside = text.split("````text")[0] if "````text" in text else text.split("```text")[0]
    assert "@org" not in outside and "#1" not in outside and "GH-2" not in outside
    assert "@layer" in text.split("```text")[1]  # a code block links nothing: the layer's name as it is
    assert cell("a @b #3 c#d gh-x") == "a @\u200bb #\u200b3 c#d gh-x" == cell(cell("a @b #3 c#d gh-x"))


def test_truncation_keeps_rows_before_details_and_says_so(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:03d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(200)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    layers = {f"layer{j}": 100 + j for j in range(40)}
    verdicts = [
        project.verdict(f"m{i:03d}", make_report(layers), make_report({k: 50 for k in layers})) for i in range(200)
    ]
    full = summary(verdicts, front_end=CLI)
    limit = 40_000
    text = summary(verdicts, front_end=CLI, max_bytes=limit)
    assert len(full.encode()) > limit >= len(text.encode())
    assert text.count("| ❌ | m") == 200  # every model's row is kept
    kept = text.count("<details>")
    assert 0 < kept < 200
    assert text.rstrip().endswith(
        f"_Summary cut to stay under GitHub's 1 MiB limit: {200 - kept} failure details left out; "
        f"the job log has them all._"
    )


def test_truncation_of_the_table_itself(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:04d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(500)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    verdicts = [project.verdict(f"m{i:04d}", make_report({"a": 5})) for i in range(500)]
    text = summary(verdicts, front_end=CLI, max_bytes=5_000)
    assert len(text.encode()) <= 5_000
    rows = [line for line in text.splitlines() if line.startswith("| ✅ | m")]
    assert 0 < len(rows) < 500
    assert f"| … {500 - len(rows)} more rows |" in text
    assert f"{500 - len(rows)} table rows left out" in text


def test_default_limit_holds_for_a_huge_run(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:04d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(1500)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    layers = {f"block{j}.conv{'x' * 60}": 100 + j for j in range(15)}
    verdicts = [project.verdict(f"m{i:04d}", make_report(layers)) for i in range(1500)]
    text = summary(verdicts, front_end=CLI)
    assert len(text.encode()) <= MAX_BYTES - RESERVE
    assert "_Summary cut to stay under GitHub's 1 MiB limit" in text


def test_append_counts_what_the_step_already_wrote(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    assert room_left(path) == MAX_BYTES - RESERVE
    path.write_text("earlier output\n", encoding="utf-8")
    assert room_left(path) == MAX_BYTES - RESERVE - len("earlier output\n")
    append_step_summary(path, "### flopbudget\n")
    assert path.read_text(encoding="utf-8") == "earlier output\n\n### flopbudget\n"


def test_unchecked_models_head_the_summary(make_project, make_report) -> None:
    project = make_project(PYPROJECT)
    broken = Unchecked("a|b <i>x</i>", "it raised RuntimeError: boom", None)
    text = summary([project.verdict("vit", make_report({"a": 1500}))], unchecked=[broken], front_end=CLI)
    assert text.splitlines()[:5] == [
        "### flopbudget: ❌ 1 not checked, 1 model within budget",
        "",
        "**Not checked** (the model could not be counted, so its budget is unknown):",
        "",
        "- ❌ a\\|b &lt;i&gt;x&lt;/i&gt;: it raised RuntimeError: boom",
    ]


def test_usage_bar_fills_a_cell_per_whole_tenth_and_is_full_when_over() -> None:
    assert usage_bar(0, 1000) == "░" * 10
    assert usage_bar(99, 1000) == "░" * 10  # 9.9%: not a whole tenth yet
    assert usage_bar(600, 1000) == "█" * 6 + "░" * 4  # exact: 3/5 is six cells, no float rounding down to five
    assert usage_bar(999, 1000) == "█" * 9 + "░"  # a full bar means the ceiling is reached
    assert usage_bar(1000, 1000) == usage_bar(1001, 1000) == usage_bar(10**30, 1) == "█" * 10
    assert usage_bar(0, 0) == "░" * 10 and usage_bar(1, 0) == "█" * 10
    assert usage_bar(3, 4, cells=4) == "███░"


def test_every_budgeted_row_has_a_bar_and_overruns_are_marked(make_project, make_report) -> None:
    project = make_project(PYPROJECT.replace('flops = "1k"', "flops = 0"))
    over = project.verdict("resnet", make_report({"a": 10}))
    at_zero = project.verdict("vit", make_report({"a": 2000}))
    text = summary([over, at_zero], front_end=CLI)
    assert "| ❌ | resnet | FLOPs | 0 | - | 10 | - | ██████████ over (budget 0) |" in text
    assert "| ✅ |  | params | 10 | - | 1 | - | █░░░░░░░░░ 10.0% |" in text
    assert "| ✅ | vit | FLOPs | 2.00k | - | 2.00k | - | ██████████ 100.0% |" in text  # at the ceiling: full, not over


def test_warnings_are_spelled_out_up_to_ten_then_counted(make_project, make_report) -> None:
    models = "".join(
        f'[tool.flopbudget.models.m{i:02d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = 10\n\n' for i in range(12)
    )
    project = make_project("[tool.flopbudget]\n\n" + models)
    grew = [project.verdict(f"m{i:02d}", make_report({"a": 5}), make_report({"a": 4})) for i in range(12)]
    assert all(len(verdict.warnings) == 1 for verdict in grew)  # grew inside the budget: one warning each
    lines = summary(grew, front_end=CLI).splitlines()
    start = lines.index("**Warnings** (the check passes; read them before merging):")
    listed = lines[start + 2 : lines.index("", start + 2)]
    assert [line.split(":")[0] for line in listed[:10]] == [f"- ⚠️ m{i:02d}" for i in range(10)]
    assert listed[10:] == ["- … 2 more warnings: the job log has them all"]
