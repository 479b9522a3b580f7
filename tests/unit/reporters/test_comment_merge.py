"""One pull-request comment from the check's body and the pytest run's: headings, one marker, GitHub's limit."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pytest_flopbudget._reporters.comment_merge import COMMENT_LIMIT, Part, cut, fair_shares, merge
from pytest_flopbudget._reporters.output import Findings
from pytest_flopbudget._reporters.pr_comment import MARKER, MAX_CHARS, comment_body
from pytest_flopbudget._run import RunResult

CHECK = "pyproject models (flopbudget check)"
PYTEST = "budgets in tests (pytest)"
ROOM = MAX_CHARS - 256

Body = Callable[..., str]


@pytest.fixture
def body(make_project, make_report) -> Body:
    """`body(n, grew=True)`: the comment body of a run of `n` models, each over its budget (a `<details>` block
    each) when `grew`, else within it and without a baseline (a table row each, no block)."""

    def make(n: int, grew: bool = True) -> str:
        flops = 10 if grew else 1000
        models = "".join(
            f'[tool.flopbudget.models.m{i:04d}]\ntarget = "pkg:m"\ninputs = [[1]]\nflops = {flops}\n\n'
            for i in range(n)
        )
        project = make_project("[tool.flopbudget]\n\n" + models)
        baseline = make_report({"conv": 100}) if grew else None
        verdicts = [project.verdict(f"m{i:04d}", make_report({"conv": 100, "head": 50}), baseline) for i in range(n)]
        return comment_body(Findings(RunResult(verdicts)), str(project.root))

    return make


def sections(comment: str) -> dict[str, str]:
    """The merged comment's parts by heading."""
    found = re.split(r"^## (.+)\n\n", comment, flags=re.MULTILINE)
    return dict(zip(found[1::2], found[2::2]))


def assert_well_formed(comment: str) -> None:
    """Under the limit, one marker and on top, every `<details>` closed and every code fence closed."""
    assert len(comment) <= ROOM
    assert comment.startswith(MARKER + "\n") and comment.count(MARKER) == 1
    for text in sections(comment).values():
        assert text.count("<details>") == text.count("</details>")
        assert len(re.findall(r"^```", text, flags=re.MULTILINE)) % 2 == 0


def test_one_body_is_posted_as_written(body: Body) -> None:
    for text in (f"{MARKER}\nsmall\n", body(300)):
        assert merge([Part(CHECK, text)], marker=MARKER, max_chars=ROOM) == text


def test_two_bodies_share_one_marker_each_under_the_heading_of_its_run() -> None:
    check = f"{MARKER}\n### flopbudget: ✅ 1 model within budget\n"
    tests = f"{MARKER}\n### flopbudget: ❌ 1 of 1 model over budget\n\ndetails\n"
    assert merge([Part(CHECK, check), Part(PYTEST, tests)], marker=MARKER, max_chars=ROOM) == (
        f"{MARKER}\n"
        f"## {CHECK}\n\n### flopbudget: ✅ 1 model within budget\n\n"
        f"## {PYTEST}\n\n### flopbudget: ❌ 1 of 1 model over budget\n\ndetails\n"
    )


def accounted(text: str, rows: int, blocks: int) -> None:
    """Every table row and `<details>` block of the whole run is shown or counted in the one note of `text`."""
    assert text.count("_Summary cut") == 1
    note = re.search(r"_Summary cut to stay under (.+): (.+) left out; the job log has them all\._\n", text)
    assert note is not None and note[1] == COMMENT_LIMIT
    rows_out = re.search(r"(\d+) table rows?", note[2])
    blocks_out = re.search(r"(\d+) failure details?", note[2])
    shown_rows = len(re.findall(r"^\| (?:❌|⚠️|✅) \|", text, flags=re.MULTILINE))
    assert shown_rows + (int(rows_out[1]) if rows_out else 0) == rows
    assert text.count("<details>") + (int(blocks_out[1]) if blocks_out else 0) == blocks


def test_only_the_larger_body_is_cut_with_the_summarys_note(body: Body) -> None:
    huge, medium = body(300), body(30)
    assert "296 failure details left out" in huge  # its writer cut it to one comment already
    assert "_Summary cut" not in medium and len(medium) < ROOM // 2 < len(huge)
    comment = merge([Part(CHECK, huge), Part(PYTEST, medium)], marker=MARKER, max_chars=ROOM)
    assert_well_formed(comment)
    parts = sections(comment)
    assert list(parts) == [CHECK, PYTEST]
    assert parts[PYTEST] == medium.removeprefix(MARKER + "\n")  # the smaller one whole
    accounted(parts[CHECK], rows=900, blocks=300)  # both cuts counted, in the summary's words
    assert parts[CHECK].startswith("### flopbudget: ❌ 300 of 300 models over budget\n")


def test_two_huge_bodies_are_both_cut_under_the_limit(body: Body) -> None:
    huge = body(300)
    comment = merge([Part(CHECK, huge), Part(PYTEST, huge)], marker=MARKER, max_chars=ROOM)
    assert_well_formed(comment)
    parts = sections(comment)
    assert list(parts) == [CHECK, PYTEST]
    for text in parts.values():
        assert text.startswith("### flopbudget: ❌ 300 of 300 models over budget\n")
        accounted(text, rows=900, blocks=300)


def test_cut_rows_end_the_table_with_a_more_rows_row(body: Body) -> None:
    rows = body(800, grew=False)
    text = rows.removeprefix(MARKER + "\n")
    shorter = cut(text, 5000)
    assert len(shorter) <= 5000
    lines = shorter.splitlines()
    shown = [line for line in lines if re.match(r"\| ✅ \| m\d{4} \|", line)]
    more = re.fullmatch(r"\|  \| … (\d+) more rows \|  \|  \|  \|  \|  \|  \|", lines[lines.index(shown[-1]) + 1])
    assert more is not None and int(more[1]) + len(shown) == 800
    note = f"_Summary cut to stay under {COMMENT_LIMIT}: {more[1]} table rows left out; the job log has them all._"
    assert lines[-1] == note
    assert lines[-2] == ""


def test_a_details_line_inside_a_code_block_does_not_end_the_block() -> None:
    code = ["```text", "</details>", "x" * 600, "```"]  # a layer named `</details>`, in the diff's code block
    block = ["<details>", "<summary>❌ tricky</summary>", "", *code, "", "</details>"]
    text = "\n".join(["### flopbudget: ❌ 1 of 1 model over budget", "", *block, ""]) + "\n"
    shorter = cut(text, 500)
    assert "<details>" not in shorter and "x" * 600 not in shorter  # the whole block left out, not half of it
    assert shorter.endswith("1 failure detail left out; the job log has them all._\n")


def test_a_body_that_fits_is_not_touched() -> None:
    text = "### flopbudget: ✅ 1 model within budget\n"
    assert cut(text, len(text)) == text


@pytest.mark.parametrize(
    ("sizes", "room", "shares"),
    [
        ([100, 10], 200, [100, 10]),  # all fit
        ([50_000, 3_000], 40_000, [37_000, 3_000]),  # the larger one is cut
        ([50_000, 50_000], 40_000, [20_000, 20_000]),  # both, equally
        ([30_000, 19_000, 500], 40_000, [20_500, 19_000, 500]),
    ],
)
def test_fair_shares_cut_the_larger_bodies_first(sizes: list[int], room: int, shares: list[int]) -> None:
    assert fair_shares(sizes, room) == shares


def test_a_heading_mentions_no_one() -> None:
    parts = [Part("@org/team #1", f"{MARKER}\nfirst\n"), Part("b", f"{MARKER}\nsecond\n")]
    assert merge(parts, marker=MARKER, max_chars=MAX_CHARS).split("\n")[1] == "## @\u200borg/team #\u200b1"
